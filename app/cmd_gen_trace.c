/* vrambench — `vrambench gen-trace random ...`: writes a random allocation
 * trace in vrambench's format (docs/trace-format.md), in the manner of RMM's
 * random_allocations benchmark (rapidsai/rmm
 * benchmarks/random_allocations/random_allocations.cpp): at each step an
 * allocation of a uniform size in [1, max-size] with probability 73%, unless
 * it would take the live bytes past max-live; otherwise a free of a live
 * allocation chosen uniformly. Every allocation is freed by the end (the
 * last ones in random order), so the trace has exactly --events events, or
 * one fewer when that is odd (said on stderr: an allocation has its free).
 *
 * The generator is our own xoshiro256** seeded through splitmix64, so the same
 * seed gives the same trace on every machine. A name ending in .gz is written
 * gzip-compressed. A trace that cannot fit its file system's free space is
 * refused before it is written (its size is worked out from the options). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/closest.h"
#include "cli.h"
#include "output_file.h"

#define ALLOCATION_PERCENT 73
#define WRITE_BUFFER_BYTES (64 * 1024)
#define HEADER_BYTES 256
/* The most --events: a plain trace of 1e12 events is about 20 TB, more than
 * a disk holds; past it a count is a typo, not a plan. */
#define MAX_EVENTS 1000000000000ull
#define MAX_EVENTS_TEXT "1e12"
/* gzip makes gen-trace's text 22% to 37% of its size (measured at 1e6 and
 * 1e7 events, --max-size 1 to 64MiB): an eighth is well below all of them,
 * so a .gz refused for its size would not have fit either. */
#define GZIP_SHRINKS_AT_MOST 8

/* ------------------------------------------------------------------------ */
/* Random numbers                                                            */
/* ------------------------------------------------------------------------ */

typedef struct rng {
    uint64_t s[4];
} rng;

/* Rotates left by k (0 < k < 64). */
static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* Seeds the four words from one number with splitmix64 (never all zero). */
static void rng_seed(rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) {
        uint64_t z = (seed += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        r->s[i] = z ^ (z >> 31);
    }
}

/* xoshiro256**: the next 64 random bits. */
static uint64_t rng_next(rng *r)
{
    uint64_t result = rotl(r->s[1] * 5, 7) * 9;
    uint64_t t = r->s[1] << 17;
    r->s[2] ^= r->s[0];
    r->s[3] ^= r->s[1];
    r->s[1] ^= r->s[2];
    r->s[0] ^= r->s[3];
    r->s[2] ^= t;
    r->s[3] = rotl(r->s[3], 45);
    return result;
}

/* Uniform in [0, bound) for bound > 0, without modulo bias (rejection). */
static uint64_t rng_below(rng *r, uint64_t bound)
{
    uint64_t threshold = (0 - bound) % bound;
    for (;;) {
        uint64_t value = rng_next(r);
        if (value >= threshold) return value % bound;
    }
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct writer {
    gzFile file;
    char buffer[WRITE_BUFFER_BYTES];
    size_t used;
    int failed;
} writer;

/* Hands the buffer to zlib (which writes plain text when opened with "T"). */
static void writer_flush(writer *w)
{
    if (w->used && !w->failed && gzwrite(w->file, w->buffer, (unsigned)w->used) != (int)w->used) w->failed = 1;
    w->used = 0;
}

/* Appends a line (at most 64 bytes) to the buffer. */
static void write_event(writer *w, char action, uint64_t id, uint64_t size, int with_size)
{
    if (w->used + 64 > sizeof w->buffer) writer_flush(w);
    int length = with_size ? snprintf(w->buffer + w->used, 64, "%c %llu %llu\n", action, (unsigned long long)id,
                                      (unsigned long long)size)
                           : snprintf(w->buffer + w->used, 64, "%c %llu\n", action, (unsigned long long)id);
    w->used += (size_t)length;
}

/* ------------------------------------------------------------------------ */
/* The generator                                                             */
/* ------------------------------------------------------------------------ */

typedef struct live_allocation {
    uint64_t id, size;
} live_allocation;

typedef struct random_options {
    uint64_t seed, events, max_size, max_live;
    const char *out;
    int quiet;
} random_options;

/* Frees the live allocation at `index` (swap-remove, as RMM does). */
static void free_at(writer *w, live_allocation *live, uint64_t *live_count, uint64_t *live_bytes, uint64_t index)
{
    write_event(w, 'f', live[index].id, 0, 0);
    *live_bytes -= live[index].size;
    live[index] = live[--*live_count];
}

/* The trace's first two lines (the format, then how it was made) into
 * `out` (HEADER_BYTES); their length. */
static size_t format_header(char *out, const random_options *options)
{
    int length = snprintf(out, HEADER_BYTES,
                          "vbtrace 1\n# vrambench gen-trace random --seed %llu --events %llu --max-size %llu "
                          "--max-live %llu\n",
                          (unsigned long long)options->seed, (unsigned long long)options->events,
                          (unsigned long long)options->max_size, (unsigned long long)options->max_live);
    return (size_t)length;
}

/* Writes the whole trace; returns 0, or -1 on a write or memory failure. */
static int generate(writer *w, const random_options *options)
{
    rng r;
    rng_seed(&r, options->seed);
    live_allocation *live = NULL;
    uint64_t live_count = 0, live_capacity = 0, live_bytes = 0, written = 0, next_id = 0;
    char header[HEADER_BYTES];
    size_t header_length = format_header(header, options);
    memcpy(w->buffer, header, header_length);
    w->used = header_length;
    /* Each live allocation still owes its free: stop when they fill the rest. */
    while (written + live_count < options->events && !w->failed) {
        uint64_t size = 1 + rng_below(&r, options->max_size);
        /* live_bytes <= max_live always; size <= max_live - live_bytes never wraps (live_bytes + size
         * would, with a max-live near 2^64). */
        int allocate = live_count == 0 ||
                       (rng_below(&r, 100) < ALLOCATION_PERCENT && size <= options->max_live - live_bytes);
        if (written + live_count + 2 > options->events) allocate = 0; /* no room for its free */
        if (allocate) {
            if (live_count == live_capacity) {
                uint64_t capacity = live_capacity ? live_capacity * 2 : 1024;
                live_allocation *grown = realloc(live, capacity * sizeof *live);
                if (!grown) {
                    free(live);
                    return -1;
                }
                live = grown;
                live_capacity = capacity;
            }
            live[live_count++] = (live_allocation){next_id, size};
            write_event(w, 'a', next_id++, size, 1);
            live_bytes += size;
        } else if (live_count > 0) {
            free_at(w, live, &live_count, &live_bytes, rng_below(&r, live_count));
        } else {
            break; /* one event left and nothing live: an odd count */
        }
        written++;
    }
    while (live_count > 0) free_at(w, live, &live_count, &live_bytes, rng_below(&r, live_count));
    free(live);
    writer_flush(w);
    return w->failed ? -1 : 0;
}

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

enum { OPT_SEED, OPT_EVENTS, OPT_MAX_SIZE, OPT_MAX_LIVE, OPT_OUT, OPT_QUIET, OPTION_COUNT };
static const vb_cli_option options[OPTION_COUNT + 1] = {
    [OPT_SEED] = {"--seed", NULL, "N", "the random seed (0 to 2^64-1; default 1): the same seed, the same trace", 0},
    [OPT_EVENTS] = {"--events", NULL, "N",
                    "events in the trace, allocations and frees (2 to " MAX_EVENTS_TEXT "; every allocation has its free, so an odd count writes one fewer), e.g. --events 10000; a "
                    "trace that would not fit\nits file system's free space is refused before it is written",
                    0},
    [OPT_MAX_SIZE] = {"--max-size", NULL, "SIZE",
                      "the largest allocation (sizes are uniform in 1 .. SIZE bytes), e.g. --max-size 64MiB. "
                      VB_CLI_SIZE_RULE,
                      0},
    [OPT_MAX_LIVE] = {"--max-live", NULL, "SIZE",
                      "the most bytes live at once (at least --max-size), e.g. --max-live 2GiB; a size as for\n"
                      "--max-size",
                      0},
    [OPT_OUT] = {"--out", "-o", "FILE", "the trace file (replaced if it exists); a name ending in .gz is gzip'd", 0},
    [OPT_QUIET] = {"--quiet", NULL, NULL, "errors only: no 'wrote FILE'", 0},
    [OPTION_COUNT] = {NULL, NULL, NULL, NULL, 0},
};

static const vb_cli_usage usage = {
    "gen-trace", "random",
    "Writes a random allocation trace (docs/trace-format.md) in the manner of RMM's random_allocations\n"
    "benchmark: an allocation of a uniform size with probability 73% while --max-live allows, else a free of\n"
    "a live allocation; everything is freed by the end. The generator: random (the only one).\n"
    "Required: --events, --max-size, --max-live and --out.",
    options, 0,
    "example:\n  vrambench gen-trace random --seed 7 --events 100000 --max-size 64MiB --max-live 8GiB -o random.trace.gz"};

/* Reads the options of `gen-trace random`; prints one error and returns 2
 * on bad ones (VB_EXIT_HELP after --help). */
static int parse_random_options(int argc, char **argv, random_options *options)
{
    int have_events = 0, have_max_size = 0, have_max_live = 0;
    const char *generator = NULL;
    *options = (random_options){.seed = 1};
    vb_cli_parser parser;
    vb_cli_parser_init(&parser, &usage, argc, argv);
    const char *value;
    for (int option; (option = vb_cli_next(&parser, &value)) != VB_CLI_END;) {
        switch (option) {
        case VB_CLI_STOP: return vb_cli_stopped(&parser);
        case VB_CLI_ARGUMENT:
            if (generator) return vb_cli_error(VB_EXIT_USAGE, "gen-trace: one generator only ('%s', then '%s')",
                                               generator, value);
            if (strcmp(value, "random") != 0) {
                static const char *const generators[] = {"random", NULL};
                char hint[64];
                return vb_cli_error(VB_EXIT_USAGE, "gen-trace: unknown generator '%s'%s (known: random)", value,
                                    vb_did_you_mean(value, generators, hint, sizeof hint));
            }
            generator = value;
            break;
        case OPT_SEED:
            if (vb_cli_parse_whole(value, 0, UINT64_MAX, &options->seed) != 0)
                return vb_cli_error(VB_EXIT_USAGE, "gen-trace: bad --seed '%s' (a whole number from 0 to 2^64-1)", value);
            break;
        case OPT_EVENTS:
            if (vb_cli_parse_whole(value, 0, MAX_EVENTS, &options->events) != 0)
                return vb_cli_error(VB_EXIT_USAGE, "gen-trace: bad --events '%s' (a whole number, 2 to " MAX_EVENTS_TEXT ")",
                                    value);
            have_events = 1;
            break;
        case OPT_MAX_SIZE:
            if (vb_cli_size_option("gen-trace", "--max-size", value, &options->max_size) != VB_EXIT_OK)
                return VB_EXIT_USAGE;
            have_max_size = 1;
            break;
        case OPT_MAX_LIVE:
            if (vb_cli_size_option("gen-trace", "--max-live", value, &options->max_live) != VB_EXIT_OK)
                return VB_EXIT_USAGE;
            have_max_live = 1;
            break;
        case OPT_OUT:
            if (!*value) return vb_cli_error(VB_EXIT_USAGE, "gen-trace: --out needs a file name");
            options->out = value;
            break;
        case OPT_QUIET: options->quiet = 1; break;
        }
    }
    if (!generator) return vb_cli_error(VB_EXIT_USAGE, "gen-trace: which generator? (random; vrambench gen-trace --help)");
    if (!have_events || !have_max_size || !have_max_live || !options->out)
        return vb_cli_error(VB_EXIT_USAGE, "gen-trace random: --events, --max-size, --max-live and -o are required");
    if (options->events < 2) /* one event would be an allocation never freed: the trace would hold none */
        return vb_cli_error(VB_EXIT_USAGE, "gen-trace: --events %llu is too few: every allocation has its free, so a "
                                           "trace has at least 2 events",
                            (unsigned long long)options->events);
    if (options->max_size == 0) return vb_cli_error(VB_EXIT_USAGE, "gen-trace: --max-size must be at least 1 byte");
    if (options->max_live < options->max_size)
        return vb_cli_error(VB_EXIT_USAGE, "gen-trace: --max-live (%llu) must be at least --max-size (%llu)",
                            (unsigned long long)options->max_live, (unsigned long long)options->max_size);
    return VB_EXIT_OK;
}

/* ------------------------------------------------------------------------ */
/* Output size                                                               */
/* ------------------------------------------------------------------------ */

/* The decimal digits of all the numbers 0 .. n-1 together (n <= 1e18). */
static uint64_t digits_below(uint64_t n)
{
    uint64_t total = 0;
    for (uint64_t low = 0, high = 10, digits = 1; low < n; low = high, high *= 10, digits++)
        total += ((n < high ? n : high) - low) * digits;
    return total;
}

/* The mean number of decimal digits of a size uniform in 1 .. max_size. */
static double mean_size_digits(uint64_t max_size)
{
    double total = 0;
    for (uint64_t low = 1, digits = 1;; digits++) {
        uint64_t high = low > UINT64_MAX / 10 ? UINT64_MAX : low * 10 - 1;
        if (high > max_size) high = max_size;
        total += (double)(high - low + 1) * (double)digits;
        if (high == max_size) break;
        low = high + 1;
    }
    return total / (double)max_size;
}

/* The bytes the trace will take: worked out from what generate() writes,
 * not by writing it. events/2 allocations, ids 0, 1, ..., each on an
 * "a ID SIZE\n" and an "f ID\n" line (7 bytes besides the numbers), sizes
 * taken as uniform (--max-live refusing some large ones makes the real file
 * at most a few percent smaller). A .gz name: the text shrunk by the most
 * gzip was seen to shrink it (GZIP_SHRINKS_AT_MOST), a low estimate. */
static uint64_t estimated_bytes(const random_options *options, int gzip)
{
    char header[HEADER_BYTES];
    uint64_t allocations = options->events / 2;
    double bytes = (double)format_header(header, options) + 7.0 * (double)allocations +
                   2.0 * (double)digits_below(allocations) + (double)allocations * mean_size_digits(options->max_size);
    return (uint64_t)(gzip ? bytes / GZIP_SHRINKS_AT_MOST : bytes);
}

/* One error line and 2 when the trace cannot fit the free space of its
 * file system; 0 when it can, or when the file system cannot say (a full
 * disk then still fails cleanly as it writes). */
static int check_room(const random_options *options)
{
    uint64_t room;
    if (vb_output_room(options->out, &room) != VB_OK) return VB_EXIT_OK;
    int gzip = vb_output_is_gzip_name(options->out);
    uint64_t need = estimated_bytes(options, gzip);
    if (need <= room) return VB_EXIT_OK;
    char need_text[32], room_text[32];
    vb_cli_format_bytes(need, need_text, sizeof need_text);
    vb_cli_format_bytes(room, room_text, sizeof room_text);
    return vb_cli_error(VB_EXIT_USAGE, "gen-trace: %llu events need about %s%s; the file system of '%s' has %s free",
                        (unsigned long long)options->events, need_text, gzip ? " gzip'd" : "", options->out,
                        room_text);
}

/* `vrambench gen-trace random ...`: checks every option and the output
 * path before it writes; the trace goes through a vb_output (app/output_file.h),
 * so a failed write leaves the target as it was. */
int vb_cmd_gen_trace(int argc, char **argv)
{
    random_options options;
    int exit_status = parse_random_options(argc, argv, &options);
    if (exit_status != VB_EXIT_OK) return exit_status == VB_EXIT_HELP ? VB_EXIT_OK : exit_status;
    if (vb_output_check(options.out) != VB_OK) return vb_cli_error(VB_EXIT_USAGE, "gen-trace: %s", vb_last_error());
    if ((exit_status = check_room(&options)) != VB_EXIT_OK) return exit_status;
    vb_output out;
    if (vb_output_open(&out, options.out) != VB_OK) return vb_cli_error(VB_EXIT_FAILURE, "gen-trace: %s", vb_last_error());
    writer *w = calloc(1, sizeof *w);
    /* zlib closes the descriptor it is given: it gets a copy, and the output
     * keeps its own for the fsync and rename. "T" writes plain text. */
    int copy = w ? dup(out.fd) : -1;
    if (w && copy >= 0) w->file = gzdopen(copy, vb_output_is_gzip_name(options.out) ? "wb6" : "wbT");
    if (!w || !w->file) {
        if (copy >= 0) close(copy);
        free(w);
        vb_output_abandon(&out);
        return vb_cli_error(VB_EXIT_FAILURE, "gen-trace: cannot write '%s': %s", options.out,
                            copy < 0 && w ? strerror(errno) : "out of host memory");
    }
    int failed = generate(w, &options);
    int zlib_error = Z_OK;
    if (failed) gzerror(w->file, &zlib_error);
    int saved_errno = errno;
    if (gzclose(w->file) != Z_OK && !failed) failed = -1, zlib_error = Z_ERRNO, saved_errno = errno;
    free(w);
    if (failed) {
        vb_output_abandon(&out);
        return vb_cli_error(VB_EXIT_FAILURE, "gen-trace: cannot write '%s': %s", options.out,
                            zlib_error == Z_ERRNO ? strerror(saved_errno) : "compression failed");
    }
    if (vb_output_commit(&out) != VB_OK) return vb_cli_error(VB_EXIT_FAILURE, "gen-trace: %s", vb_last_error());
    if (!options.quiet && options.events % 2)
        vb_cli_line(stderr, "vrambench: wrote %s: %llu events, one fewer than --events (every allocation has its free)",
                    options.out, (unsigned long long)(options.events - 1));
    else if (!options.quiet) vb_cli_line(stderr, "vrambench: wrote %s", options.out);
    return VB_EXIT_OK;
}
