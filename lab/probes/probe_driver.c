/* vrambench — probes of the CUDA driver's memory behaviour, the facts the
 * simulated device models (base/device_sim.c, base/device_sim_pool.c).
 *
 * Build and run on a GPU machine:
 *   gcc -O2 -I/usr/local/cuda/include lab/probes/probe_driver.c -o probe \
 *       -L/usr/local/cuda/lib64 -lcudart -lcuda && ./probe
 * Prints one line per measurement, "section: what = value", so a run's output
 * can be pasted into the sim's header as the facts it follows. Nothing here is
 * part of vrambench's build: it only reads what the driver does.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda.h>
#include <cuda_runtime.h>
#include <time.h>

#define MiB (1024.0 * 1024.0)

static void check(cudaError_t err, const char *what)
{
    if (err != cudaSuccess) {
        fprintf(stderr, "probe: %s: %s\n", what, cudaGetErrorString(err));
        exit(1);
    }
}

/* Device memory in use as cudaMemGetInfo reports it. */
static long long used_bytes(void)
{
    size_t free_bytes = 0, total = 0;
    check(cudaDeviceSynchronize(), "synchronize");
    check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
    return (long long)(total - free_bytes);
}

static unsigned long long pool_attr(cudaMemPool_t pool, enum cudaMemPoolAttr attr)
{
    unsigned long long value = 0;
    check(cudaMemPoolGetAttribute(pool, attr, &value), "cudaMemPoolGetAttribute");
    return value;
}

static cudaMemPool_t make_pool(void)
{
    struct cudaMemPoolProps props = {0};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pool;
    check(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate");
    unsigned long long keep = UINT64_MAX;
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "release threshold");
    return pool;
}

static void print_pool(const char *section, const char *what, cudaMemPool_t pool)
{
    printf("%s: %s = reserved %.3f MiB, used %.6f MiB\n", section, what,
           pool_attr(pool, cudaMemPoolAttrReservedMemCurrent) / MiB,
           pool_attr(pool, cudaMemPoolAttrUsedMemCurrent) / MiB);
}

/* ---- cudaMalloc: rounding, packing of small blocks, address reuse ---- */
static void probe_cuda_malloc(void)
{
    static const size_t sizes[] = {512, 40000, 1 << 20, (2 << 20) - 1, 2 << 20, (2 << 20) + 1,
                                   (20 << 20) + 1, 100u << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        long long before = used_bytes();
        void *p;
        check(cudaMalloc(&p, sizes[i]), "cudaMalloc");
        long long with = used_bytes();
        check(cudaFree(p), "cudaFree");
        long long after = used_bytes();
        printf("cudaMalloc: size %zu: used +%.3f MiB while held, %+.3f MiB after free\n", sizes[i],
               (with - before) / MiB, (after - before) / MiB);
    }
    /* Packing: 64 blocks of 40,000 B, used memory after each. */
    enum { N = 64 };
    void *small[N];
    long long base = used_bytes();
    int steps = 0;
    long long last = base;
    for (int i = 0; i < N; i++) {
        check(cudaMalloc(&small[i], 40000), "cudaMalloc small");
        long long now = used_bytes();
        if (now != last) {
            printf("cudaMalloc: 40,000 B blocks: used grew by %.3f MiB at block %d (address +%lld from block 0)\n",
                   (now - last) / MiB, i, (long long)((char *)small[i] - (char *)small[0]));
            steps++;
        }
        last = now;
    }
    printf("cudaMalloc: 64 x 40,000 B: used +%.3f MiB in %d steps; block 1 at +%lld, block 63 at +%lld\n",
           (last - base) / MiB, steps, (long long)((char *)small[1] - (char *)small[0]),
           (long long)((char *)small[N - 1] - (char *)small[0]));
    for (int i = 0; i < N; i++) {
        check(cudaFree(small[i]), "cudaFree small");
        long long now = used_bytes();
        if (now != last)
            printf("cudaMalloc: freeing 40,000 B blocks in order: used fell by %.3f MiB at block %d\n",
                   (last - now) / MiB, i);
        last = now;
    }
    printf("cudaMalloc: all small freed: used %+.3f MiB from before\n", (last - base) / MiB);
    /* Address reuse. */
    void *a, *b, *c, *d;
    check(cudaMalloc(&a, 8 << 20), "a");
    check(cudaFree(a), "free a");
    check(cudaMalloc(&b, 8 << 20), "b");
    printf("cudaMalloc: reuse: 8 MiB freed then 8 MiB again: %s (delta %lld)\n", a == b ? "same address" : "other address",
           (long long)((char *)b - (char *)a));
    check(cudaFree(b), "free b");
    check(cudaMalloc(&c, 4 << 20), "c");
    printf("cudaMalloc: reuse: 8 MiB freed then 4 MiB: delta %lld\n", (long long)((char *)c - (char *)a));
    check(cudaMalloc(&d, 4 << 20), "d");
    printf("cudaMalloc: then another 4 MiB: delta %lld\n", (long long)((char *)d - (char *)a));
    check(cudaFree(c), "free c");
    check(cudaFree(d), "free d");
    /* A sequence: 6 blocks, free 2nd and 4th, then allocate sizes that fit. */
    void *blk[6];
    size_t bs[6] = {2 << 20, 20 << 20, 2 << 20, 40 << 20, 2 << 20, 6 << 20};
    for (int i = 0; i < 6; i++) check(cudaMalloc(&blk[i], bs[i]), "seq");
    for (int i = 0; i < 6; i++)
        printf("cudaMalloc: sequence: block %d (%zu MiB) at +%lld\n", i, bs[i] >> 20,
               (long long)((char *)blk[i] - (char *)blk[0]));
    check(cudaFree(blk[1]), "f1");
    check(cudaFree(blk[3]), "f3");
    void *x, *y, *z;
    check(cudaMalloc(&x, 20 << 20), "x");
    check(cudaMalloc(&y, 10 << 20), "y");
    check(cudaMalloc(&z, 30 << 20), "z");
    printf("cudaMalloc: after freeing blocks 1 (20 MiB) and 3 (40 MiB): 20 MiB at +%lld, 10 MiB at +%lld, 30 MiB at +%lld\n",
           (long long)((char *)x - (char *)blk[0]), (long long)((char *)y - (char *)blk[0]),
           (long long)((char *)z - (char *)blk[0]));
    for (int i = 0; i < 6; i++)
        if (i != 1 && i != 3) cudaFree(blk[i]);
    cudaFree(x), cudaFree(y), cudaFree(z);
}

/* ---- the stream-ordered pool ---- */
static void probe_pool(void)
{
    cudaStream_t s1, s2;
    check(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), "s1");
    check(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), "s2");
    static const size_t sizes[] = {1, 512, 1 << 20, (2 << 20) + 1, 20 << 20, (32 << 20) + 1, 100u << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        cudaMemPool_t pool = make_pool();
        void *p;
        long long before = used_bytes();
        check(cudaMallocFromPoolAsync(&p, sizes[i], pool, s1), "pool malloc");
        check(cudaStreamSynchronize(s1), "sync");
        char what[64];
        snprintf(what, sizeof what, "one block of %zu B", sizes[i]);
        print_pool("pool granularity", what, pool);
        printf("pool granularity: one block of %zu B: driver used +%.3f MiB\n", sizes[i], (used_bytes() - before) / MiB);
        check(cudaFreeAsync(p, s1), "free");
        check(cudaStreamSynchronize(s1), "sync");
        check(cudaMemPoolDestroy(pool), "destroy");
    }
    /* Many small blocks. */
    {
        cudaMemPool_t pool = make_pool();
        void *p[1000];
        for (int i = 0; i < 1000; i++) check(cudaMallocFromPoolAsync(&p[i], 1024, pool, s1), "small");
        check(cudaStreamSynchronize(s1), "sync");
        print_pool("pool small", "1000 blocks of 1 KiB", pool);
        printf("pool small: block 1 at +%lld, block 999 at +%lld\n", (long long)((char *)p[1] - (char *)p[0]),
               (long long)((char *)p[999] - (char *)p[0]));
        for (int i = 0; i < 1000; i++) cudaFreeAsync(p[i], s1);
        check(cudaStreamSynchronize(s1), "sync");
        cudaMemPoolDestroy(pool);
    }
    /* Reuse across sizes on one stream. */
    {
        cudaMemPool_t pool = make_pool();
        void *big, *h1, *h2, *q[8];
        check(cudaMallocFromPoolAsync(&big, 64 << 20, pool, s1), "64");
        print_pool("pool reuse", "64 MiB held", pool);
        check(cudaFreeAsync(big, s1), "free 64");
        check(cudaMallocFromPoolAsync(&h1, 32 << 20, pool, s1), "32");
        check(cudaMallocFromPoolAsync(&h2, 32 << 20, pool, s1), "32b");
        print_pool("pool reuse", "64 MiB freed, then 2 x 32 MiB (same stream, no sync)", pool);
        printf("pool reuse: 32 MiB blocks at +%lld and +%lld from the freed 64 MiB\n", (long long)((char *)h1 - (char *)big),
               (long long)((char *)h2 - (char *)big));
        cudaFreeAsync(h1, s1), cudaFreeAsync(h2, s1);
        for (int i = 0; i < 8; i++) check(cudaMallocFromPoolAsync(&q[i], 8 << 20, pool, s1), "8");
        print_pool("pool reuse", "then 8 x 8 MiB", pool);
        /* Free every other one: 4 x 8 MiB free, not adjacent. Then ask for 32 MiB. */
        for (int i = 0; i < 8; i += 2) cudaFreeAsync(q[i], s1);
        check(cudaStreamSynchronize(s1), "sync");
        void *large;
        check(cudaMallocFromPoolAsync(&large, 32 << 20, pool, s1), "32 from pieces");
        check(cudaStreamSynchronize(s1), "sync");
        print_pool("pool pieces", "4 x 8 MiB free (not adjacent) + 4 held, then 32 MiB", pool);
        printf("pool pieces: the 32 MiB at +%lld from the first 8 MiB block\n", (long long)((char *)large - (char *)q[0]));
        /* 3 MiB from an 8 MiB hole, then 5 MiB. */
        void *t3, *t5;
        check(cudaMallocFromPoolAsync(&t3, 3 << 20, pool, s1), "3");
        check(cudaMallocFromPoolAsync(&t5, 5 << 20, pool, s1), "5");
        check(cudaStreamSynchronize(s1), "sync");
        print_pool("pool split", "then 3 MiB and 5 MiB", pool);
        printf("pool split: 3 MiB at +%lld, 5 MiB at +%lld from the first 8 MiB block\n",
               (long long)((char *)t3 - (char *)q[0]), (long long)((char *)t5 - (char *)q[0]));
        /* Trim with blocks live. */
        check(cudaMemPoolTrimTo(pool, 0), "trim");
        print_pool("pool trim", "trim to 0 with 4 x 8 MiB + 32 + 3 + 5 MiB live", pool);
        cudaFreeAsync(large, s1), cudaFreeAsync(t3, s1), cudaFreeAsync(t5, s1);
        for (int i = 1; i < 8; i += 2) cudaFreeAsync(q[i], s1);
        check(cudaStreamSynchronize(s1), "sync");
        print_pool("pool trim", "all freed, before trim", pool);
        check(cudaMemPoolTrimTo(pool, 0), "trim");
        print_pool("pool trim", "all freed, after trim to 0", pool);
        /* Partially live chunk: 2 x 1 MiB, free one, trim. */
        void *m1, *m2;
        check(cudaMallocFromPoolAsync(&m1, 1 << 20, pool, s1), "m1");
        check(cudaMallocFromPoolAsync(&m2, 1 << 20, pool, s1), "m2");
        cudaFreeAsync(m1, s1);
        check(cudaStreamSynchronize(s1), "sync");
        check(cudaMemPoolTrimTo(pool, 0), "trim");
        print_pool("pool trim", "1 MiB live, 1 MiB freed in the same chunk, after trim to 0", pool);
        cudaFreeAsync(m2, s1);
        check(cudaStreamSynchronize(s1), "sync");
        cudaMemPoolDestroy(pool);
    }
    /* Across streams. */
    {
        cudaMemPool_t pool = make_pool();
        void *a, *b, *c;
        check(cudaMallocFromPoolAsync(&a, 16 << 20, pool, s1), "a");
        check(cudaFreeAsync(a, s1), "free a");
        check(cudaMallocFromPoolAsync(&b, 16 << 20, pool, s2), "b");
        print_pool("pool streams", "16 MiB freed on s1 (no sync), 16 MiB on s2", pool);
        printf("pool streams: without sync: %s\n", a == b ? "same address (reused)" : "other address");
        check(cudaStreamSynchronize(s1), "sync");
        check(cudaStreamSynchronize(s2), "sync");
        check(cudaFreeAsync(b, s2), "free b");
        check(cudaStreamSynchronize(s2), "sync");
        check(cudaMallocFromPoolAsync(&c, 16 << 20, pool, s1), "c");
        check(cudaStreamSynchronize(s1), "sync");
        print_pool("pool streams", "after sync, 16 MiB freed on s2, 16 MiB on s1", pool);
        printf("pool streams: after sync: %s\n", c == b ? "same address (reused)" : "other address");
        cudaFreeAsync(c, s1);
        check(cudaStreamSynchronize(s1), "sync");
        cudaMemPoolDestroy(pool);
    }
    /* Release threshold 0: what a synchronize gives back. */
    {
        cudaMemPool_t pool = make_pool();
        unsigned long long zero = 0;
        check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &zero), "threshold 0");
        void *a, *b;
        check(cudaMallocFromPoolAsync(&a, 40 << 20, pool, s1), "a");
        check(cudaMallocFromPoolAsync(&b, 40 << 20, pool, s1), "b");
        check(cudaFreeAsync(a, s1), "free a");
        print_pool("pool threshold 0", "40 MiB freed, 40 MiB live, before sync", pool);
        check(cudaStreamSynchronize(s1), "sync");
        print_pool("pool threshold 0", "after stream sync", pool);
        cudaFreeAsync(b, s1);
        check(cudaStreamSynchronize(s1), "sync");
        print_pool("pool threshold 0", "all freed, after sync", pool);
        cudaMemPoolDestroy(pool);
    }
    /* High-water marks. */
    {
        cudaMemPool_t pool = make_pool();
        void *a;
        check(cudaMallocFromPoolAsync(&a, 50 << 20, pool, s1), "a");
        cudaFreeAsync(a, s1);
        check(cudaStreamSynchronize(s1), "sync");
        check(cudaMemPoolTrimTo(pool, 0), "trim");
        printf("pool high-water: after 50 MiB + free + trim: reserved high %.3f MiB, used high %.3f MiB\n",
               pool_attr(pool, cudaMemPoolAttrReservedMemHigh) / MiB, pool_attr(pool, cudaMemPoolAttrUsedMemHigh) / MiB);
        unsigned long long zero = 0;
        check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero), "reset high");
        check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero), "reset high");
        printf("pool high-water: after reset: reserved high %.3f MiB, used high %.3f MiB\n",
               pool_attr(pool, cudaMemPoolAttrReservedMemHigh) / MiB, pool_attr(pool, cudaMemPoolAttrUsedMemHigh) / MiB);
        cudaMemPoolDestroy(pool);
    }
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
}


/* ---- the driver's virtual-memory calls: what each costs ---- */
static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void check_cu(CUresult err, const char *what)
{
    if (err != CUDA_SUCCESS) {
        const char *text = "?";
        cuGetErrorString(err, &text);
        fprintf(stderr, "probe: %s: %s\n", what, text);
        exit(1);
    }
}

/* Times `chunks` physical chunks of `chunk` bytes mapped into one range:
 * create, map, set access per chunk or once over the range, unmap, release. */
static void probe_vm(size_t chunk, int chunks, int access_once)
{
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemAccessDesc access = {0};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CUdeviceptr base;
    size_t total = chunk * (size_t)chunks;
    check_cu(cuMemAddressReserve(&base, total, 0, 0, 0), "reserve");
    CUmemGenericAllocationHandle *handles = calloc((size_t)chunks, sizeof *handles);
    double t0 = now_us();
    for (int i = 0; i < chunks; i++) check_cu(cuMemCreate(&handles[i], chunk, &prop, 0), "create");
    double t1 = now_us();
    for (int i = 0; i < chunks; i++) check_cu(cuMemMap(base + i * chunk, chunk, 0, handles[i], 0), "map");
    double t2 = now_us();
    int access_calls = access_once ? 1 : chunks;
    if (access_once) check_cu(cuMemSetAccess(base, total, &access, 1), "access");
    else
        for (int i = 0; i < chunks; i++) check_cu(cuMemSetAccess(base + i * chunk, chunk, &access, 1), "access");
    double t3 = now_us();
    check_cu(cuMemUnmap(base, total), "unmap all");
    double t4 = now_us();
    for (int i = 0; i < chunks; i++) check_cu(cuMemRelease(handles[i]), "release");
    double t5 = now_us();
    check_cu(cuMemAddressFree(base, total), "address free");
    printf("vm: %d x %zu MiB chunks: create %.1f us each, map %.1f us each, set_access %.1f us per call (%d call%s), "
           "one unmap of the range %.1f us (%.1f us per chunk), release %.1f us each\n",
           chunks, chunk >> 20, (t1 - t0) / chunks, (t2 - t1) / chunks, (t3 - t2) / access_calls, access_calls,
           access_calls == 1 ? "" : "s", t4 - t3, (t4 - t3) / chunks, (t5 - t4) / chunks);
    free(handles);
}

/* Where cuMemAddressReserve puts reservations (the sim's vm_reserve models
 * it: best-fit ties between blocks of different reservations follow their
 * addresses), and whether cuMemMap maps part of a handle (an offset, or a
 * smaller size) or a handle a second time. Addresses are printed relative
 * to the first reservation. */
static void probe_vm_reserve(void)
{
    const size_t mib = 1 << 20, big = (size_t)90 << 30;
    CUdeviceptr first, second, small[8], again[3];
    check_cu(cuMemAddressReserve(&first, big, 0, 0, 0), "reserve");
    check_cu(cuMemAddressReserve(&second, big, 0, 0, 0), "reserve");
    printf("vm reserve: 90 GiB at +0, another 90 GiB at %+lld MiB\n", (long long)(second - first) / (long long)mib);
    for (int i = 0; i < 8; i++) {
        size_t size = (i % 2 ? 4 : 2) * mib;
        check_cu(cuMemAddressReserve(&small[i], size, 0, 0, 0), "reserve");
        printf("vm reserve: %zu MiB #%d at %+lld MiB\n", size / mib, i, (long long)(small[i] - first) / (long long)mib);
    }
    check_cu(cuMemAddressFree(small[2], 2 * mib), "address free");
    check_cu(cuMemAddressFree(small[4], 2 * mib), "address free");
    printf("vm reserve: freed #2 and #4\n");
    for (int i = 0; i < 3; i++) {
        size_t size = (i == 2 ? 4 : 2) * mib;
        check_cu(cuMemAddressReserve(&again[i], size, 0, 0, 0), "reserve");
        printf("vm reserve: then %zu MiB at %+lld MiB\n", size / mib, (long long)(again[i] - first) / (long long)mib);
    }
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle handle;
    check_cu(cuMemCreate(&handle, 8 * mib, &prop, 0), "create");
    const char *text = "?";
    CUresult part = cuMemMap(first, 2 * mib, 2 * mib, handle, 0);
    cuGetErrorString(part, &text);
    printf("vm map: 2 MiB of an 8 MiB handle at offset 2 MiB: %s\n", part == CUDA_SUCCESS ? "mapped" : text);
    if (part == CUDA_SUCCESS) check_cu(cuMemUnmap(first, 2 * mib), "unmap");
    CUresult smaller = cuMemMap(first, 2 * mib, 0, handle, 0);
    cuGetErrorString(smaller, &text);
    printf("vm map: the first 2 MiB of an 8 MiB handle: %s\n", smaller == CUDA_SUCCESS ? "mapped" : text);
    if (smaller == CUDA_SUCCESS) check_cu(cuMemUnmap(first, 2 * mib), "unmap");
    check_cu(cuMemMap(first, 8 * mib, 0, handle, 0), "map");
    CUresult twice = cuMemMap(second, 8 * mib, 0, handle, 0);
    cuGetErrorString(twice, &text);
    printf("vm map: the whole handle at a second address while mapped at the first: %s\n",
           twice == CUDA_SUCCESS ? "mapped" : text);
    if (twice == CUDA_SUCCESS) check_cu(cuMemUnmap(second, 8 * mib), "unmap");
    check_cu(cuMemUnmap(first, 8 * mib), "unmap");
    check_cu(cuMemRelease(handle), "release");
    for (int i = 0; i < 8; i++)
        if (i != 2 && i != 4) check_cu(cuMemAddressFree(small[i], (i % 2 ? 4 : 2) * mib), "address free");
    for (int i = 0; i < 3; i++) check_cu(cuMemAddressFree(again[i], (i == 2 ? 4 : 2) * mib), "address free");
    check_cu(cuMemAddressFree(second, big), "address free");
    check_cu(cuMemAddressFree(first, big), "address free");
}

int main(void)
{
    check(cudaFree(0), "context");
    struct cudaDeviceProp prop;
    check(cudaGetDeviceProperties(&prop, 0), "properties");
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    printf("device: %s, driver API %d, runtime %d\n", prop.name, driver, runtime);
    probe_cuda_malloc();
    probe_pool();
    check_cu(cuInit(0), "cuInit");
    probe_vm_reserve();
    probe_vm(2 << 20, 64, 0);
    probe_vm(2 << 20, 64, 1);
    probe_vm(20 << 20, 16, 1);
    probe_vm(2 << 20, 512, 1);
    /* Larger handles: does a call's cost grow with the handle's size? (stitch maps one handle per growth.) */
    probe_vm((size_t)64 << 20, 8, 1);
    probe_vm((size_t)256 << 20, 4, 1);
    probe_vm((size_t)1024 << 20, 2, 1);
    return 0;
}
