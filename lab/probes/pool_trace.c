/* vrambench — where the driver's stream-ordered pool places each block of a
 * trace: the evidence for the placement rule the sim's pool model
 * (base/device_sim_pool.c) follows.
 *
 * Build and run on a GPU machine:
 *   gcc -O2 -I/usr/local/cuda/include lab/probes/pool_trace.c -o pool-trace \
 *       -L/usr/local/cuda/lib64 -lcudart && zcat TRACE.gz | ./pool-trace > LOG
 * Reads a vbtrace (`a ID SIZE [STREAM]`, `f ID [STREAM]`, `m NAME`, `#`
 * comments) on stdin and replays it as the `async` strategy does
 * (allocators/async.c): one pool from cudaMemPoolCreate with release
 * threshold UINT64_MAX, cudaMallocFromPoolAsync on the trace stream's own
 * non-blocking stream, cudaFreeAsync on the stream the block was allocated
 * on, no kernels. Writes one line per event:
 *   a ID SIZE STREAM OFFSET    OFFSET: the block's address minus `base`
 *                              (see below)
 *   f ID
 *   r RESERVED                 after an event that changed the pool's reserved bytes
 * and at the end `end reserved_high=... used_high=...`. With POOL_TRACE_SYNC=1
 * in the environment it synchronizes the freeing stream after every free (so
 * the driver has seen each free complete before the next call): comparing
 * such a log with a plain one, and two plain ones with each other, shows
 * whether the placement depends on when frees complete (docs/sim-models.md,
 * F13, F14). Addresses are printed
 * as absolute hex in a first line `base 0x...` (the first block's address
 * rounded down to 32 MiB) and as signed offsets from it after. Nothing here is
 * part of vrambench's build: it only reads what the driver does.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#define MAX_STREAMS 64

static void check(cudaError_t err, const char *what, unsigned long line)
{
    if (err != cudaSuccess) {
        fprintf(stderr, "pool-trace: line %lu: %s: %s\n", line, what, cudaGetErrorString(err));
        exit(1);
    }
}

static unsigned long long pool_attr(cudaMemPool_t pool, enum cudaMemPoolAttr attr)
{
    unsigned long long value = 0;
    check(cudaMemPoolGetAttribute(pool, attr, &value), "cudaMemPoolGetAttribute", 0);
    return value;
}

typedef struct live_block {
    void *ptr;
    unsigned stream;
} live_block;

int main(void)
{
    check(cudaSetDevice(0), "cudaSetDevice", 0);
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pool;
    check(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate", 0);
    unsigned long long threshold = UINT64_MAX;
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), "threshold", 0);

    cudaStream_t streams[MAX_STREAMS] = {0};
    const char *sync_env = getenv("POOL_TRACE_SYNC");
    int sync_frees = sync_env && strcmp(sync_env, "1") == 0;
    size_t capacity = 1 << 16;
    live_block *live = calloc(capacity, sizeof *live);
    if (!live) return 1;
    char text[4096];
    unsigned long line = 0;
    uintptr_t base = 0;
    unsigned long long reserved = 0;
    while (fgets(text, sizeof text, stdin)) {
        line++;
        unsigned long long id = 0, size = 0;
        unsigned stream = 0;
        if (text[0] == 'a' && text[1] == ' ') {
            int fields = sscanf(text + 2, "%llu %llu %u", &id, &size, &stream);
            if (fields < 2 || stream >= MAX_STREAMS) {
                fprintf(stderr, "pool-trace: line %lu: bad allocation\n", line);
                return 1;
            }
            if (id >= capacity) {
                size_t grown = capacity;
                while (grown <= id) grown *= 2;
                live = realloc(live, grown * sizeof *live);
                if (!live) return 1;
                memset(live + capacity, 0, (grown - capacity) * sizeof *live);
                capacity = grown;
            }
            if (!streams[stream]) check(cudaStreamCreateWithFlags(&streams[stream], cudaStreamNonBlocking), "stream", line);
            void *ptr = NULL;
            check(cudaMallocFromPoolAsync(&ptr, size, pool, streams[stream]), "cudaMallocFromPoolAsync", line);
            live[id] = (live_block){ptr, stream};
            if (!base) {
                base = (uintptr_t)ptr & ~(uintptr_t)(32u * 1024 * 1024 - 1);
                printf("base 0x%llx\n", (unsigned long long)base);
            }
            printf("a %llu %llu %u %lld\n", id, size, stream, (long long)((intptr_t)ptr - (intptr_t)base));
        } else if (text[0] == 'f' && text[1] == ' ') {
            if (sscanf(text + 2, "%llu", &id) != 1 || id >= capacity || !live[id].ptr) {
                fprintf(stderr, "pool-trace: line %lu: bad free\n", line);
                return 1;
            }
            check(cudaFreeAsync(live[id].ptr, streams[live[id].stream]), "cudaFreeAsync", line);
            if (sync_frees) check(cudaStreamSynchronize(streams[live[id].stream]), "cudaStreamSynchronize", line);
            live[id].ptr = NULL;
            printf("f %llu\n", id);
        } else
            continue;
        unsigned long long now = pool_attr(pool, cudaMemPoolAttrReservedMemCurrent);
        if (now != reserved) printf("r %llu\n", now);
        reserved = now;
    }
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", line);
    printf("end reserved_high=%llu used_high=%llu\n", pool_attr(pool, cudaMemPoolAttrReservedMemHigh),
           pool_attr(pool, cudaMemPoolAttrUsedMemHigh));
    return 0;
}
