/* vrambench lab — cache-footprint: what a random read costs on this host
 * as the memory it is spread over grows, for the replay-speed work of issue
 * 26 (docs/bench.md "Long traces": why a block struct is two cache lines).
 * It links nothing of vrambench.
 *
 *   build/lab/cache-footprint chase MIB STRIDE
 *       A pointer chase over MIB MiB of touched cache lines, one line read
 *       per element of STRIDE bytes (64: the lines are packed; 128, 192:
 *       each touched line has untouched ones beside it). Nanoseconds a
 *       dependent read.
 *   build/lab/cache-footprint replay STRUCT SEAM
 *       The reads of a replayed free, modelled: per step one id-map word
 *       (262,144 of 8 B), one seam record (126,000 of SEAM bytes) and both
 *       ends of three block structs (145,000 of STRUCT bytes: the block and
 *       its two neighbours), all random, each asked for six steps ahead as
 *       replay does. Nanoseconds a step.
 *
 * Figures of the project's build machine are in docs/bench.md. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double seconds_now(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

/* xorshift64: the probe's random numbers. */
static uint64_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* `bytes` of page-aligned memory, every byte 1, or exits. */
static void *take(size_t bytes)
{
    void *memory = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!memory) {
        fprintf(stderr, "cache-footprint: out of memory\n");
        exit(1);
    }
    memset(memory, 1, bytes); /* every page touched before the timing */
    return memory;
}

static int chase(size_t mib, size_t stride)
{
    size_t count = mib * 1024 * 1024 / 64;
    char *elements = take(count * stride);
    size_t *order = take(count * sizeof *order);
    uint64_t state = 1;
    for (size_t i = 0; i < count; i++) order[i] = i;
    for (size_t i = count - 1; i > 0; i--) {
        size_t j = next_random(&state) % (i + 1), kept = order[i];
        order[i] = order[j];
        order[j] = kept;
    }
    for (size_t i = 0; i < count; i++) *(uint64_t *)(elements + order[i] * stride) = order[(i + 1) % count] * stride;
    const size_t steps = 2000000;
    uint64_t at = 0;
    double start = seconds_now();
    for (size_t i = 0; i < steps; i++) at = *(uint64_t *)(elements + at);
    double elapsed = seconds_now() - start;
    printf("chase: %zu MiB of touched lines, one per %zu B: %.1f ns a read (end %llu)\n", mib, stride,
           elapsed / (double)steps * 1e9, (unsigned long long)at);
    return 0;
}

static int replay_model(size_t struct_bytes, size_t seam_bytes)
{
    enum { AHEAD = 6, READS = 5 };
    const size_t structs = 145000, seams = 126000, ids = 262144, steps = 3000000;
    char *blocks = take(structs * struct_bytes), *seam = take(seams * seam_bytes);
    uint64_t *id_map = take(ids * sizeof *id_map);
    size_t coming[AHEAD][READS];
    uint64_t state = 88172645463325252ULL, sum = 0;
    for (int d = 0; d < AHEAD; d++) {
        coming[d][0] = next_random(&state) % ids;
        coming[d][1] = next_random(&state) % seams;
        for (int k = 2; k < READS; k++) coming[d][k] = next_random(&state) % structs;
    }
    double start = seconds_now();
    for (size_t i = 0; i < steps; i++) {
        size_t *now = coming[i % AHEAD];
        sum += id_map[now[0]] + *(uint64_t *)(seam + now[1] * seam_bytes);
        for (int k = 2; k < READS; k++) {
            const char *block = blocks + now[k] * struct_bytes;
            sum += *(const uint64_t *)block + *(const uint64_t *)(block + struct_bytes - 8);
        }
        now[0] = next_random(&state) % ids;
        now[1] = next_random(&state) % seams;
        __builtin_prefetch(&id_map[now[0]]);
        __builtin_prefetch(seam + now[1] * seam_bytes);
        for (int k = 2; k < READS; k++) {
            now[k] = next_random(&state) % structs;
            __builtin_prefetch(blocks + now[k] * struct_bytes);
            __builtin_prefetch(blocks + now[k] * struct_bytes + struct_bytes - 8);
        }
    }
    double elapsed = seconds_now() - start;
    size_t mib = (structs * struct_bytes + seams * seam_bytes + ids * sizeof *id_map) >> 20;
    printf("replay model: structs of %zu B, seam records of %zu B (%zu MiB in all): %.1f ns a step (checksum %llu)\n",
           struct_bytes, seam_bytes, mib, elapsed / (double)steps * 1e9, (unsigned long long)sum);
    return 0;
}

/* A number argument of 1 to 1 << 20, or 0. */
static size_t size_argument(const char *text)
{
    char *end;
    unsigned long long value = strtoull(text, &end, 10);
    return *text >= '0' && *text <= '9' && !*end && value >= 1 && value <= (1u << 20) ? (size_t)value : 0;
}

int main(int argc, char **argv)
{
    size_t first = argc == 4 ? size_argument(argv[2]) : 0, second = argc == 4 ? size_argument(argv[3]) : 0;
    if (argc == 4 && first && second && second % 64 == 0 && strcmp(argv[1], "chase") == 0) return chase(first, second);
    if (argc == 4 && first % 8 == 0 && first >= 16 && second % 8 == 0 && second && strcmp(argv[1], "replay") == 0)
        return replay_model(first, second);
    fprintf(stderr, "usage: cache-footprint chase MIB STRIDE (STRIDE a multiple of 64)\n"
                    "       cache-footprint replay STRUCT SEAM (bytes, multiples of 8, STRUCT at least 16)\n");
    return 2;
}
