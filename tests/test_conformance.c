/* vrambench — the conformance suite every allocator must pass
 * (docs/design.md, "Conformance contract").
 *
 * One suite, run once per entry of vb_allocator_registry at run time, so an
 * allocator added to the registry is covered without touching this file.
 * Each test checks one property of the contract and says which by its name.
 *
 * Device: VB_TEST_DEVICE=sim (default; `make test`) or cuda (`make
 * test-gpu`). Every test opens its own device, wraps it in a counting proxy
 * (tests/counting_device.h) and hands the proxy to the allocator, so the
 * allocator's statistics are compared with what the device itself saw.
 * On sim every figure is exact. On a GPU the memory the device reports as
 * used is compared loosely (GPU_HELD_TOLERANCE below), because other
 * processes and the driver's own bookkeeping move cudaMemGetInfo too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef VB_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "allocators/allocator.h"
#include "allocators/spec.h"
#include "counting_device.h"
#include "ledger.h"
#include "test_random.h"

/* ------------------------------------------------------------------------ */
/* Settings                                                                  */
/* ------------------------------------------------------------------------ */

#define KiB ((uint64_t)1024)

/* The randomized sequence: at least 10,000 operations (docs/design.md asks for
 * thousands), with the program's live requested bytes kept under a cap that
 * fits any GPU we run on. */
#define RANDOM_OPS 20000
#define RANDOM_LIVE_CAP (4 * VB_GiB)
#define DEFAULT_SEED UINT64_C(20240601)

/* The small sim of the out-of-memory tests. */
#define SMALL_SIM_CAPACITY VB_GiB

/* On a GPU, |used by mem_info - reserved| may differ by this much plus an
 * eighth of reserved: the driver may pack small allocations and round others,
 * its context and other processes move the figure. It still catches what
 * matters: a leaked or double-counted segment of real size. */
#define GPU_HELD_TOLERANCE (64 * VB_MiB)

/* How long the work that uses a freed block keeps its stream busy. On a GPU
 * it must outlast the handful of mallocs that follow; nothing asserts on it. */
#define SIM_BUSY_NS (1000 * 1000)
#define GPU_BUSY_NS (200 * 1000 * 1000)

static const char *test_device_kind = "sim"; /* VB_TEST_DEVICE */
static uint64_t test_seed = DEFAULT_SEED;    /* VB_TEST_SEED */
/* On a GPU, reserved bytes are compared with cudaMemGetInfo's used memory,
 * except under compute-sanitizer (VB_TEST_NO_MEMINFO=1, or its injection
 * library found in CUDA_INJECTION64_PATH): its own device allocations
 * change the driver's accounting. */
static int compare_driver_memory = 1;

/* 1 when the suite runs on a real GPU. */
static int on_gpu(void)
{
    return strcmp(test_device_kind, "cuda") == 0;
}

/* ------------------------------------------------------------------------ */
/* Per-allocator context and per-test fixture                                */
/* ------------------------------------------------------------------------ */

/* The properties the randomized sequence decides, one test each. */
enum random_property {
    PROPERTY_NO_OVERLAP,
    PROPERTY_REQUESTED_MATCHES_LEDGER,
    PROPERTY_BYTES_ORDERED,
    PROPERTY_MATCHES_DEVICE,
    PROPERTY_EMPTY_AFTER_RELEASE,
    PROPERTY_COUNT
};

/* What the randomized sequence found: run once per allocator, read by the
 * five tests above. */
typedef struct random_report {
    int ran;
    char stopped[512];                        /* why the sequence could not go on, "" if it finished */
    char violation[PROPERTY_COUNT][512];      /* the first violation of each property, "" if none */
    uint64_t ops, mallocs, frees, record_streams, empty_caches, overlap_checks_while_pending;
} random_report;

typedef struct suite_context {
    const vb_allocator_ops *ops;
    const vb_allocator_spec *spec; /* what is created: name (external:PATH too) and options */
    random_report report;
} suite_context;

#define MAX_TEST_STREAMS 4

/* What one test holds; the teardown releases it even when an assertion
 * stopped the test half-way. */
typedef struct fixture {
    suite_context *suite;
    vb_device *device;          /* the real or simulated device */
    vb_counting_device proxy;   /* what the allocator is given */
    vb_allocator *allocator;
    vb_stream streams[MAX_TEST_STREAMS];
    size_t stream_count;
    vb_event events[MAX_TEST_STREAMS];
    size_t event_count;
    vb_ledger ledger;
    int ledger_open;
} fixture;

/* Gives the test an empty fixture that knows its allocator. */
static int fixture_setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    f->suite = *state;
    *state = f;
    return 0;
}

/* Releases whatever the test opened, in dependency order. */
static int fixture_teardown(void **state)
{
    fixture *f = *state;
    if (f->ledger_open) vb_ledger_clear(&f->ledger);
    vb_allocator_destroy(f->allocator);
    if (f->device) {
        f->device->ops->device_synchronize(f->device);
        for (size_t i = 0; i < f->event_count; i++) f->device->ops->event_destroy(f->device, f->events[i]);
        for (size_t i = 0; i < f->stream_count; i++) f->device->ops->stream_destroy(f->device, f->streams[i]);
        vb_device_close(f->device);
    }
    free(f);
    return 0;
}

/* Opens the test device (a sim of `sim_capacity` bytes, 0 = default) and the
 * allocator under test on its counting proxy. */
static void fixture_open(fixture *f, uint64_t sim_capacity)
{
    vb_device_options options = {.sim_capacity_bytes = sim_capacity};
    vb_status status = vb_device_open(test_device_kind, &options, &f->device);
    if (status != VB_OK) fail_msg("cannot open device '%s': %s", test_device_kind, vb_last_error());
    vb_counting_init(&f->proxy, f->device);
    vb_config config = vb_allocator_spec_config(f->suite->spec);
    status = vb_allocator_create(f->suite->spec->name, &f->proxy.device, &config, &f->allocator);
    if (status != VB_OK) fail_msg("cannot create allocator '%s': %s", f->suite->spec->label, vb_last_error());
    /* An external library may hold memory across our instances (the plug-in
     * keeps one allocator per device for the process) and empties it when an
     * instance is created (allocators/external.c): the driver's used memory is
     * read again after that, so the proxy's baseline and the allocator's are
     * the same moment. */
    if (f->allocator->ops->outside_reserved) f->proxy.baseline_used = vb_device_used_bytes(f->device);
}

/* A new stream on the test device, destroyed by the teardown. */
static vb_stream fixture_stream(fixture *f)
{
    vb_stream stream = NULL;
    assert_true(f->stream_count < MAX_TEST_STREAMS);
    if (f->device->ops->stream_create(f->device, &stream) != VB_OK) fail_msg("stream_create: %s", vb_last_error());
    f->streams[f->stream_count++] = stream;
    return stream;
}

/* A new event on the test device, destroyed by the teardown. */
static vb_event fixture_event(fixture *f)
{
    vb_event event = NULL;
    assert_true(f->event_count < MAX_TEST_STREAMS);
    if (f->device->ops->event_create(f->device, &event) != VB_OK) fail_msg("event_create: %s", vb_last_error());
    f->events[f->event_count++] = event;
    return event;
}

/* The allocator's statistics now. */
static vb_alloc_stats stats_of(fixture *f)
{
    vb_alloc_stats stats;
    vb_allocator_stats(f->allocator, &stats);
    return stats;
}

/* Total bytes of the test device (sim: its capacity). */
static uint64_t device_total(fixture *f)
{
    uint64_t free_bytes = 0, total_bytes = 0;
    if (f->device->ops->mem_info(f->device, &free_bytes, &total_bytes) != VB_OK)
        fail_msg("mem_info: %s", vb_last_error());
    return total_bytes;
}

/* Free bytes of the test device, as it says. */
static uint64_t device_free(fixture *f)
{
    uint64_t free_bytes = 0, total_bytes = 0;
    if (f->device->ops->mem_info(f->device, &free_bytes, &total_bytes) != VB_OK)
        fail_msg("mem_info: %s", vb_last_error());
    return free_bytes;
}

/* Waits until every piece of work on `stream` has run: on sim by moving the
 * logical clock, on a GPU by synchronizing. */
static void complete_stream(fixture *f, vb_stream stream)
{
    if (vb_device_is_sim(f->device)) vb_sim_complete_stream(f->device, stream);
    else assert_int_equal(f->device->ops->stream_synchronize(f->device, stream), VB_OK);
}

/* Names the first field where two stats snapshots differ, or NULL. */
static const char *stats_difference(const vb_alloc_stats *a, const vb_alloc_stats *b)
{
#define COMPARE_FIELD(field) \
    if (a->field != b->field) return #field
    COMPARE_FIELD(requested_bytes);
    COMPARE_FIELD(allocated_bytes);
    COMPARE_FIELD(reserved_bytes);
    COMPARE_FIELD(requested_bytes_peak);
    COMPARE_FIELD(allocated_bytes_peak);
    COMPARE_FIELD(reserved_bytes_peak);
    COMPARE_FIELD(driver_alloc_calls);
    COMPARE_FIELD(driver_free_calls);
    COMPARE_FIELD(alloc_retries);
    COMPARE_FIELD(ooms);
    COMPARE_FIELD(free_cached_bytes);
    COMPARE_FIELD(largest_free_block);
#undef COMPARE_FIELD
    return NULL;
}

/* Fails unless the allocator's driver call counts equal the calls the
 * device saw, failed ones included ("calls into the device layer"). */
static void assert_driver_calls_match_device(fixture *f)
{
    vb_alloc_stats s = stats_of(f);
    if (s.driver_alloc_calls != f->proxy.obtain_calls || s.driver_free_calls != f->proxy.return_calls)
        fail_msg("driver_alloc_calls %" PRIu64 " / driver_free_calls %" PRIu64 ", the device saw %" PRIu64
                 " / %" PRIu64 " calls (%" PRIu64 " of the allocating ones failed)",
                 s.driver_alloc_calls, s.driver_free_calls, f->proxy.obtain_calls, f->proxy.return_calls,
                 f->proxy.failed_obtain_calls);
}

/* Fails the test unless `status` is VB_OK, with the call and its message. */
#define ASSERT_OK(call)                                                                              \
    do {                                                                                             \
        vb_status status_ = (call);                                                                  \
        if (status_ != VB_OK) fail_msg("%s: %s (%s)", #call, vb_status_name(status_), vb_last_error()); \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Alignment                                                                 */
/* ------------------------------------------------------------------------ */

/* Every pointer is aligned to at least VB_MIN_ALIGNMENT (256 B), for sizes
 * from 1 B to hundreds of MiB, odd ones and those next to the boundaries
 * strategies round at (512 B, 1 MiB, 2 MiB, 10 MiB, 20 MiB), all held live
 * together so that blocks carved out of shared segments are covered. */
static void alignment_at_least_256_bytes(void **state)
{
    fixture *f = *state;
    fixture_open(f, 0);
    static const uint64_t boundaries[] = {1, 256, 512, KiB, 4 * KiB, 64 * KiB, VB_MiB, 2 * VB_MiB,
                                          10 * VB_MiB, 20 * VB_MiB, 100 * VB_MiB, 300 * VB_MiB};
    uint64_t sizes[256];
    size_t count = 0;
    for (size_t i = 0; i < sizeof boundaries / sizeof *boundaries; i++) {
        if (boundaries[i] > 1) sizes[count++] = boundaries[i] - 1;
        sizes[count++] = boundaries[i];
        sizes[count++] = boundaries[i] + 1;
    }
    uint64_t rng = test_seed;
    while (count < 200) sizes[count++] = (next_random(&rng) % (4 * VB_MiB)) | 1; /* odd, up to 4 MiB */
    while (count < 220) sizes[count++] = (next_random(&rng) % (64 * VB_MiB)) | 1;

    /* Round 0 gets fresh memory; round 1 asks again after everything was
     * freed, so a strategy with a cache serves it from there. */
    vb_addr addrs[256];
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < count; i++) {
            ASSERT_OK(vb_malloc(f->allocator, sizes[i], NULL, &addrs[i]));
            if (addrs[i] == 0 || addrs[i] % VB_MIN_ALIGNMENT != 0)
                fail_msg("round %d: malloc(%" PRIu64 ") returned 0x%" PRIx64 ", not aligned to %d bytes", round,
                         sizes[i], addrs[i], VB_MIN_ALIGNMENT);
        }
        for (size_t i = 0; i < count; i++) ASSERT_OK(vb_free(f->allocator, addrs[i]));
    }
}

/* ------------------------------------------------------------------------ */
/* The randomized sequence and its shadow ledger                             */
/* ------------------------------------------------------------------------ */

/* A request size: mostly small, some at the boundaries strategies round at,
 * a few of hundreds of MiB. */
static uint64_t random_size(uint64_t *rng)
{
    static const uint64_t boundaries[] = {512, VB_MiB, 2 * VB_MiB, 10 * VB_MiB, 20 * VB_MiB};
    uint64_t kind = next_random(rng) % 100;
    if (kind < 50) return 1 + next_random(rng) % (64 * KiB);
    if (kind < 75) return 64 * KiB + next_random(rng) % (2 * VB_MiB - 64 * KiB);
    if (kind < 90) return 2 * VB_MiB + next_random(rng) % (30 * VB_MiB);
    if (kind < 95) return boundaries[next_random(rng) % 5] + next_random(rng) % 3 - 1;
    return 32 * VB_MiB + next_random(rng) % (288 * VB_MiB);
}

/* Notes the first violation of `property`. */
static void violate(random_report *report, enum random_property property, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static void violate(random_report *report, enum random_property property, const char *format, ...)
{
    if (report->violation[property][0]) return;
    va_list args;
    va_start(args, format);
    vsnprintf(report->violation[property], sizeof report->violation[property], format, args);
    va_end(args);
}

/* Notes why the sequence had to stop. */
static void stop(random_report *report, const char *format, ...) __attribute__((format(printf, 2, 3)));

static void stop(random_report *report, const char *format, ...)
{
    if (report->stopped[0]) return;
    va_list args;
    va_start(args, format);
    vsnprintf(report->stopped, sizeof report->stopped, format, args);
    va_end(args);
}

/* |a - b| */
static uint64_t distance(uint64_t a, uint64_t b)
{
    return a > b ? a - b : b - a;
}

/* Compares the allocator's statistics with the ledger and the device after
 * one operation (`what`, number `op`). */
static void check_after_op(fixture *f, random_report *report, uint64_t op, const char *what)
{
    vb_alloc_stats s = stats_of(f);
    vb_ledger *ledger = &f->ledger;
    vb_ledger_observe(ledger, &s);

    /* The program asked for exactly what the ledger summed. */
    if (s.requested_bytes != ledger->requested_bytes)
        violate(report, PROPERTY_REQUESTED_MATCHES_LEDGER,
                "after op %" PRIu64 " (%s): requested_bytes %" PRIu64 ", the ledger says %" PRIu64, op, what,
                s.requested_bytes, ledger->requested_bytes);
    if (s.requested_bytes_peak != ledger->requested_peak)
        violate(report, PROPERTY_REQUESTED_MATCHES_LEDGER,
                "after op %" PRIu64 " (%s): requested_bytes_peak %" PRIu64 ", the ledger's peak is %" PRIu64, op,
                what, s.requested_bytes_peak, ledger->requested_peak);

    /* requested <= allocated <= reserved; the cached figures fit in the gap;
     * allocated changes only inside a malloc or free, so its peak is the
     * largest value seen between operations; reserved may peak inside one. */
    if (s.requested_bytes > s.allocated_bytes || s.allocated_bytes > s.reserved_bytes)
        violate(report, PROPERTY_BYTES_ORDERED,
                "after op %" PRIu64 " (%s): requested %" PRIu64 ", allocated %" PRIu64 ", reserved %" PRIu64
                " are not in order",
                op, what, s.requested_bytes, s.allocated_bytes, s.reserved_bytes);
    else if (s.largest_free_block > s.free_cached_bytes || s.free_cached_bytes > s.reserved_bytes - s.allocated_bytes)
        violate(report, PROPERTY_BYTES_ORDERED,
                "after op %" PRIu64 " (%s): largest_free_block %" PRIu64 " <= free_cached %" PRIu64
                " <= reserved - allocated %" PRIu64 " does not hold",
                op, what, s.largest_free_block, s.free_cached_bytes, s.reserved_bytes - s.allocated_bytes);
    if (s.allocated_bytes_peak != ledger->allocated_seen_peak)
        violate(report, PROPERTY_BYTES_ORDERED,
                "after op %" PRIu64 " (%s): allocated_bytes_peak %" PRIu64 ", the largest allocated seen is %" PRIu64,
                op, what, s.allocated_bytes_peak, ledger->allocated_seen_peak);
    if (s.reserved_bytes_peak < ledger->reserved_seen_peak)
        violate(report, PROPERTY_BYTES_ORDERED,
                "after op %" PRIu64 " (%s): reserved_bytes_peak %" PRIu64 " is below reserved seen %" PRIu64, op,
                what, s.reserved_bytes_peak, ledger->reserved_seen_peak);

    /* The device's own view: every call counted, every byte it holds. */
    if (s.driver_alloc_calls != f->proxy.obtain_calls || s.driver_free_calls != f->proxy.return_calls)
        violate(report, PROPERTY_MATCHES_DEVICE,
                "after op %" PRIu64 " (%s): driver_alloc_calls %" PRIu64 " / driver_free_calls %" PRIu64
                ", the device saw %" PRIu64 " / %" PRIu64,
                op, what, s.driver_alloc_calls, s.driver_free_calls, f->proxy.obtain_calls, f->proxy.return_calls);
    if (!on_gpu()) {
        uint64_t held = vb_counting_held(&f->proxy);
        if (s.reserved_bytes != held)
            violate(report, PROPERTY_MATCHES_DEVICE,
                    "after op %" PRIu64 " (%s): reserved_bytes %" PRIu64 ", the device holds %" PRIu64, op, what,
                    s.reserved_bytes, held);
        if (s.reserved_bytes_peak != f->proxy.held_peak)
            violate(report, PROPERTY_MATCHES_DEVICE,
                    "after op %" PRIu64 " (%s): reserved_bytes_peak %" PRIu64 ", the device's peak is %" PRIu64, op,
                    what, s.reserved_bytes_peak, f->proxy.held_peak);
    } else if (op % 64 == 0 && compare_driver_memory) {
        uint64_t held = vb_counting_held(&f->proxy);
        if (distance(s.reserved_bytes, held) > GPU_HELD_TOLERANCE + s.reserved_bytes / 8)
            violate(report, PROPERTY_MATCHES_DEVICE,
                    "after op %" PRIu64 " (%s): reserved_bytes %" PRIu64 ", cudaMemGetInfo says %" PRIu64
                    " more are used than at the start (tolerance 64 MiB + reserved/8)",
                    op, what, s.reserved_bytes, held);
    }
}

/* One malloc of a random size on a random stream, checked for overlap. */
static void random_malloc(fixture *f, random_report *report, uint64_t *rng, uint64_t op)
{
    uint64_t size = random_size(rng);
    size_t stream_index = (size_t)(next_random(rng) % f->stream_count);
    vb_addr addr = 0;
    vb_status status = vb_malloc(f->allocator, size, f->streams[stream_index], &addr);
    report->mallocs++;
    if (status != VB_OK) {
        stop(report, "op %" PRIu64 ": malloc(%" PRIu64 ") with %" PRIu64 " bytes live failed: %s (%s)", op, size,
             f->ledger.requested_bytes, vb_status_name(status), vb_last_error());
        return;
    }
    /* Pending blocks whose work completed before this malloc returned may be reused now. */
    vb_ledger_settle(&f->ledger);
    if (addr == 0 || vb_ledger_add(&f->ledger, addr, size, f->streams[stream_index], op) != 0) {
        violate(report, PROPERTY_NO_OVERLAP, "op %" PRIu64 ": malloc(%" PRIu64 "): %s", op, size,
                addr ? f->ledger.overlap : "returned address 0 with VB_OK");
        stop(report, "op %" PRIu64 ": live blocks overlapped (see the no-overlap test)", op);
    }
}

/* Frees a random live block. */
static void random_free(fixture *f, random_report *report, uint64_t *rng, uint64_t op)
{
    vb_ledger_block *block = vb_ledger_live_at(&f->ledger, (size_t)(next_random(rng) % f->ledger.count));
    vb_addr addr = block->addr;
    vb_status status = vb_free(f->allocator, addr);
    report->frees++;
    if (status != VB_OK) {
        stop(report, "op %" PRIu64 ": free(0x%" PRIx64 ") of a live block failed: %s (%s)", op, addr,
             vb_status_name(status), vb_last_error());
        return;
    }
    vb_ledger_release(&f->ledger, addr);
}

/* What "nothing reserved" may read for this allocator: 0, or one driver page
 * for one whose reserved bytes are the driver's word (external allocators:
 * the growth of cudaMemGetInfo's used memory since creation, which other work
 * of the process, its streams and events among them, moves by a page; seen
 * on an H100). */
static uint64_t reserved_when_empty(const fixture *f)
{
    return f->allocator->ops->outside_reserved ? VB_DRIVER_PAGE : 0;
}

/* 0 for an external allocator: PyTorch's pluggable-allocator ABI (malloc,
 * free) carries no record_stream, and PyTorch drops record_stream under a
 * pluggable allocator (README, "PyTorch plug-in"), so a library behind it
 * cannot know a block is in use on another stream. Every other strategy
 * either honours record_stream or frees through a device call that waits
 * (cudaFree). */
static int honours_record_stream(const fixture *f)
{
    return f->allocator->ops != &vb_external_allocator;
}

/* Queues work on another stream that uses a random live block, and tells
 * the allocator with record_stream; the ledger keeps an event after that
 * work, so the block stays off limits until it has run. */
static void random_record_stream(fixture *f, random_report *report, uint64_t *rng, uint64_t op)
{
    if (!honours_record_stream(f)) return;
    vb_device *dev = f->device;
    vb_ledger_block *block = vb_ledger_live_at(&f->ledger, (size_t)(next_random(rng) % f->ledger.count));
    vb_stream other = f->streams[next_random(rng) % f->stream_count];
    for (size_t i = 0; other == block->stream; i++) other = f->streams[i];
    if (block->use_count == VB_LEDGER_MAX_USES) return; /* the ledger could not follow more uses */
    vb_event used = NULL;
    uint64_t busy_ns = 1000 + next_random(rng) % 200000;
    if (dev->ops->enqueue_busy(dev, other, busy_ns) != VB_OK || dev->ops->event_create(dev, &used) != VB_OK) {
        stop(report, "op %" PRIu64 ": enqueue_busy/event_create: %s", op, vb_last_error());
        return;
    }
    if (dev->ops->event_record(dev, used, other) != VB_OK) {
        dev->ops->event_destroy(dev, used);
        stop(report, "op %" PRIu64 ": event_record: %s", op, vb_last_error());
        return;
    }
    vb_ledger_record_use(&f->ledger, block->addr, used);
    vb_status status = vb_record_stream(f->allocator, block->addr, other);
    report->record_streams++;
    if (status != VB_OK)
        stop(report, "op %" PRIu64 ": record_stream(0x%" PRIx64 ") failed: %s (%s)", op, block->addr,
             vb_status_name(status), vb_last_error());
}

/* Lets queued work run: on sim the clock moves by up to 100 us, on a GPU
 * one stream is synchronized. */
static void random_advance(fixture *f, uint64_t *rng)
{
    if (vb_device_is_sim(f->device)) vb_sim_advance(f->device, next_random(rng) % 100000);
    else f->device->ops->stream_synchronize(f->device, f->streams[next_random(rng) % f->stream_count]);
}

/* Frees everything, empties the cache and checks that nothing is held. */
static void release_everything(fixture *f, random_report *report, uint64_t op)
{
    while (f->ledger.live_count > 0 && !report->stopped[0]) {
        vb_ledger_block *block = vb_ledger_live_at(&f->ledger, 0);
        vb_addr addr = block->addr;
        vb_status status = vb_free(f->allocator, addr);
        if (status != VB_OK) {
            stop(report, "final free(0x%" PRIx64 ") failed: %s (%s)", addr, vb_status_name(status), vb_last_error());
            return;
        }
        vb_ledger_release(&f->ledger, addr);
        check_after_op(f, report, op++, "final free");
    }
    vb_status status = vb_empty_cache(f->allocator);
    if (status != VB_OK) {
        stop(report, "final empty_cache failed: %s (%s)", vb_status_name(status), vb_last_error());
        return;
    }
    check_after_op(f, report, op, "final empty_cache");

    vb_alloc_stats s = stats_of(f);
    uint64_t held = vb_counting_held(&f->proxy);
    if (s.reserved_bytes > reserved_when_empty(f) || s.allocated_bytes != 0 || s.requested_bytes != 0)
        violate(report, PROPERTY_EMPTY_AFTER_RELEASE,
                "after freeing everything and empty_cache: reserved %" PRIu64 ", allocated %" PRIu64
                ", requested %" PRIu64 " (all should be 0)",
                s.reserved_bytes, s.allocated_bytes, s.requested_bytes);
    else if (!on_gpu() && held != 0)
        violate(report, PROPERTY_EMPTY_AFTER_RELEASE,
                "after freeing everything and empty_cache the sim device still holds %" PRIu64 " bytes", held);
    else if (on_gpu() && compare_driver_memory && held > GPU_HELD_TOLERANCE)
        violate(report, PROPERTY_EMPTY_AFTER_RELEASE,
                "after freeing everything and empty_cache cudaMemGetInfo shows %" PRIu64
                " bytes more used than at the start (tolerance 64 MiB)",
                held);
}

/* Runs the randomized sequence once per allocator and keeps what it found:
 * RANDOM_OPS operations (malloc 50%, free 38%, record_stream with work on
 * another stream 7%, letting work run 4%, empty_cache 1%) over three streams,
 * every one checked against the ledger and the device. */
static const random_report *random_report_of(fixture *f)
{
    random_report *report = &f->suite->report;
    if (report->ran) return report;
    report->ran = 1;
    /* Said by the other tests of the group if opening fails the first one. */
    stop(report, "the device or the allocator could not be opened");
    fixture_open(f, 0);
    report->stopped[0] = '\0';
    f->streams[f->stream_count++] = NULL; /* the default stream */
    fixture_stream(f);
    fixture_stream(f);
    vb_ledger_init(&f->ledger, f->device);
    f->ledger_open = 1;

    static const char *const names[] = {"malloc", "free", "record_stream", "advance", "empty_cache"};
    uint64_t rng = test_seed;
    uint64_t op = 0;
    for (; op < RANDOM_OPS && !report->stopped[0]; op++) {
        uint64_t roll = next_random(&rng) % 100;
        if (f->ledger.requested_bytes > RANDOM_LIVE_CAP && roll < 50) roll = 50;
        int kind = f->ledger.live_count == 0 ? 0 : roll < 50 ? 0 : roll < 88 ? 1 : roll < 95 ? 2 : roll < 99 ? 3 : 4;
        switch (kind) {
        case 0: random_malloc(f, report, &rng, op); break;
        case 1: random_free(f, report, &rng, op); break;
        case 2: random_record_stream(f, report, &rng, op); break;
        case 3: random_advance(f, &rng); break;
        default: {
            vb_status status = vb_empty_cache(f->allocator);
            report->empty_caches++;
            if (status != VB_OK)
                stop(report, "op %" PRIu64 ": empty_cache failed: %s (%s)", op, vb_status_name(status), vb_last_error());
        }
        }
        if (!report->stopped[0]) check_after_op(f, report, op, names[kind]);
    }
    report->ops = op;
    if (!report->stopped[0]) release_everything(f, report, op);
    return report;
}

/* Fails when the sequence stopped early or `property` was violated. */
static void assert_random_property(void **state, enum random_property property)
{
    fixture *f = *state;
    const random_report *report = random_report_of(f);
    if (report->violation[property][0]) fail_msg("seed %" PRIu64 ": %s", test_seed, report->violation[property]);
    if (report->stopped[0])
        fail_msg("seed %" PRIu64 ": the randomized sequence stopped: %s", test_seed, report->stopped);
    assert_true(report->ops >= 10000);
}

/* Live blocks never overlap, and a freed block still in use on another
 * stream is not handed out before that work completed. */
static void random_ops_live_blocks_never_overlap(void **state)
{
    assert_random_property(state, PROPERTY_NO_OVERLAP);
}

/* requested_bytes and its peak equal the ledger's own sums at every step. */
static void random_ops_requested_bytes_match_ledger(void **state)
{
    assert_random_property(state, PROPERTY_REQUESTED_MATCHES_LEDGER);
}

/* requested <= allocated <= reserved at every step, with consistent peaks
 * and cached-byte figures. */
static void random_ops_requested_le_allocated_le_reserved(void **state)
{
    assert_random_property(state, PROPERTY_BYTES_ORDERED);
}

/* reserved_bytes, its peak and the driver call counts equal what the device
 * saw (sim: exactly; GPU: calls exactly, bytes within the tolerance). */
static void random_ops_reserved_and_driver_calls_match_device(void **state)
{
    assert_random_property(state, PROPERTY_MATCHES_DEVICE);
}

/* After the sequence, freeing everything and empty_cache leaves nothing
 * reserved, and the device holds nothing for the allocator. */
static void reserved_zero_after_free_all_and_empty_cache(void **state)
{
    assert_random_property(state, PROPERTY_EMPTY_AFTER_RELEASE);
}

/* ------------------------------------------------------------------------ */
/* Stream safety                                                             */
/* ------------------------------------------------------------------------ */

/* 1 if [a, a+a_size) and [b, b+b_size) share a byte (sizes > 0). */
static int overlaps(vb_addr a, uint64_t a_size, vb_addr b, uint64_t b_size)
{
    return a <= b ? b - a < a_size : a - b < b_size;
}

/* A block malloc'd on stream A, used by work queued on stream B
 * (record_stream) and freed while that work is still queued, is not handed
 * out again, to any stream, until B's work completed, unless to a stream
 * made to wait for B's work (a stream-ordered pool's internal dependency). Afterwards it is
 * returned to the device by empty_cache like any other block. */
static void record_stream_defers_reuse_until_stream_work_completes(void **state)
{
    fixture *f = *state;
    fixture_open(f, 0);
    if (!honours_record_stream(f)) {
        print_message("      skipped: '%s' is reached through PyTorch's pluggable-allocator ABI, which has no "
                      "record_stream\n", f->allocator->ops->name);
        skip();
    }
    vb_device *dev = f->device;
    vb_stream a = fixture_stream(f), b = fixture_stream(f);
    const uint64_t size = VB_MiB;
    vb_addr freed = 0;
    ASSERT_OK(vb_malloc(f->allocator, size, a, &freed));
    ASSERT_OK(dev->ops->enqueue_busy(dev, b, on_gpu() ? GPU_BUSY_NS : SIM_BUSY_NS));
    vb_event b_done = fixture_event(f);
    ASSERT_OK(dev->ops->event_record(dev, b_done, b));
    ASSERT_OK(vb_record_stream(f->allocator, freed, b));
    ASSERT_OK(vb_free(f->allocator, freed));

    /* Requests a cache would serve from the freed block: its size and
     * smaller, on A, on B and on the default stream. */
    static const uint64_t sizes[] = {VB_MiB, VB_MiB - 1, 512 * KiB, 4 * KiB, 256, VB_MiB, 700 * KiB, 1};
    vb_stream streams[] = {a, b, NULL};
    vb_addr later[48];
    uint64_t later_size[48];
    size_t checked_while_pending = 0, taken = 0;
    for (size_t i = 0; i < 48; i++) {
        later_size[i] = sizes[i % (sizeof sizes / sizeof *sizes)];
        ASSERT_OK(vb_malloc(f->allocator, later_size[i], streams[i % 3], &later[i]));
        taken = i + 1;
        /* Queried after the malloc returned: pending now means pending then. */
        if (dev->ops->event_query(dev, b_done)) continue;
        checked_while_pending++;
        if (!overlaps(later[i], later_size[i], freed, size)) continue;
        /* Reuse is safe when the allocating stream was made to wait for B
         * (a stream-ordered pool's internal dependency): then finishing
         * that stream's work finishes B's too. */
        ASSERT_OK(dev->ops->stream_synchronize(dev, streams[i % 3]));
        if (!dev->ops->event_query(dev, b_done))
            fail_msg("malloc(%" PRIu64 ") returned 0x%" PRIx64 ", inside the block 0x%" PRIx64
                     " freed while stream B's work using it was still queued, to a stream not ordered after it",
                     later_size[i], later[i], freed);
        print_message("      note: the freed block was handed out again to a stream made to wait for B's work\n");
        break;
    }
    if (checked_while_pending == 0)
        print_message("      note: free waited for stream B's work (as cudaFree does), so no block could be "
                      "handed out early\n");

    complete_stream(f, b);
    assert_true(dev->ops->event_query(dev, b_done));
    vb_addr reused = 0;
    ASSERT_OK(vb_malloc(f->allocator, size, a, &reused)); /* may be the freed block now */
    ASSERT_OK(vb_free(f->allocator, reused));
    for (size_t i = 0; i < taken; i++) ASSERT_OK(vb_free(f->allocator, later[i]));
    ASSERT_OK(vb_empty_cache(f->allocator));
    vb_alloc_stats s = stats_of(f);
    if (s.reserved_bytes != 0)
        fail_msg("after B's work completed, everything freed and empty_cache, %" PRIu64 " bytes stay reserved",
                 s.reserved_bytes);
}

/* ------------------------------------------------------------------------ */
/* Out of memory                                                             */
/* ------------------------------------------------------------------------ */

/* A request larger than the device returns VB_ERR_OOM, never a pointer,
 * counts one oom per request, and the allocator keeps working: a 1 GiB sim
 * (on a GPU: its total memory) is asked for total + 1 B and 2 x total. */
static void oom_larger_than_device_returns_oom_and_stays_usable(void **state)
{
    fixture *f = *state;
    fixture_open(f, SMALL_SIM_CAPACITY);
    uint64_t total = device_total(f);
    vb_addr kept = 0;
    ASSERT_OK(vb_malloc(f->allocator, 3 * VB_MiB, NULL, &kept)); /* something live across the failures */
    const uint64_t requests[] = {total + 1, 2 * total};
    for (size_t i = 0; i < 2; i++) {
        vb_alloc_stats before = stats_of(f);
        const vb_addr sentinel = 0xbad0bad0bad0ULL;
        vb_addr out = sentinel;
        vb_status status = vb_malloc(f->allocator, requests[i], NULL, &out);
        if (status != VB_ERR_OOM)
            fail_msg("malloc(%" PRIu64 ") on a device of %" PRIu64 " bytes: %s, expected out of memory", requests[i],
                     total, vb_status_name(status));
        if (out != sentinel && out != 0) fail_msg("a failed malloc wrote address 0x%" PRIx64, out);
        vb_alloc_stats after = stats_of(f);
        assert_int_equal(after.ooms, before.ooms + 1);
        assert_int_equal(after.requested_bytes, before.requested_bytes);
        assert_int_equal(after.allocated_bytes, before.allocated_bytes);
        assert_driver_calls_match_device(f);
    }
    /* Still usable: new blocks, the old one freed, nothing left behind. */
    vb_addr more[8];
    for (size_t i = 0; i < 8; i++) ASSERT_OK(vb_malloc(f->allocator, 16 * VB_MiB + i, NULL, &more[i]));
    for (size_t i = 0; i < 8; i++) ASSERT_OK(vb_free(f->allocator, more[i]));
    ASSERT_OK(vb_free(f->allocator, kept));
    ASSERT_OK(vb_empty_cache(f->allocator));
    assert_int_equal(stats_of(f).reserved_bytes, 0);
}

/* A strategy that caches frees its cache and retries before failing: fill
 * the device to three quarters with blocks on stream A, free them all (the
 * cache now holds them), then ask on stream B for a block bigger than both
 * the device's free memory and the cache's largest free block. It fits once
 * the cache is released, so it must succeed; and alloc_retries ("mallocs
 * that freed cached memory and tried again") must count it exactly when the
 * malloc gave memory back to the device. On a 1 GiB sim with 8 MiB blocks
 * that is about 768 MiB cached, 256 MiB free, a request of about 258 MiB.
 * Stream B keeps strategies with per-stream pools (PyTorch's) from serving
 * it out of A's cache; a strategy that serves it without giving anything
 * back (it grew a cached range in place, or stitched cached pieces) never
 * needed the retry, and the test says so instead of passing. */
static void oom_frees_cache_and_retries(void **state)
{
    fixture *f = *state;
    fixture_open(f, SMALL_SIM_CAPACITY);
    vb_stream a = fixture_stream(f), b = fixture_stream(f);
    uint64_t free_at_start = device_free(f);
    uint64_t piece = vb_round_up(free_at_start / 128 > 8 * VB_MiB ? free_at_start / 128 : 8 * VB_MiB, VB_DRIVER_PAGE);
    vb_addr *blocks = calloc(1024, sizeof *blocks);
    assert_non_null(blocks);
    size_t count = 0;
    while (count < 1024 && stats_of(f).reserved_bytes < free_at_start / 4 * 3) {
        if (vb_malloc(f->allocator, piece, a, &blocks[count]) != VB_OK) break; /* the strategy over-reserves */
        count++;
    }
    for (size_t i = 0; i < count; i++) ASSERT_OK(vb_free(f->allocator, blocks[i]));
    free(blocks);

    vb_alloc_stats cached = stats_of(f);
    if (cached.reserved_bytes <= cached.allocated_bytes) {
        print_message("      skipped: '%s' keeps no cache (reserved %" PRIu64 " == allocated after freeing "
                      "everything), so there is nothing to free and retry\n",
                      f->suite->ops->name, cached.reserved_bytes);
        skip();
    }
    uint64_t device_free_now = device_free(f);
    uint64_t larger = device_free_now > cached.largest_free_block ? device_free_now : cached.largest_free_block;
    uint64_t request = vb_round_up(larger + 1, VB_DRIVER_PAGE);
    if (request > free_at_start - VB_DRIVER_PAGE) {
        print_message("      skipped: the cache's largest free block (%" PRIu64 " bytes) already serves any "
                      "request the device could hold\n",
                      cached.largest_free_block);
        skip();
    }
    uint64_t returns_before = f->proxy.return_calls;
    vb_addr big = 0;
    vb_status status = vb_malloc(f->allocator, request, b, &big);
    vb_alloc_stats after = stats_of(f);
    if (status != VB_OK)
        fail_msg("malloc(%" PRIu64 ") with %" PRIu64 " bytes cached and %" PRIu64 " free on the device: %s (%s); "
                 "it fits once the cache is released",
                 request, cached.reserved_bytes, device_free_now, vb_status_name(status), vb_last_error());
    int gave_back = f->proxy.return_calls > returns_before;
    if (gave_back && after.alloc_retries < cached.alloc_retries + 1)
        fail_msg("malloc(%" PRIu64 ") gave cached memory back to the device and succeeded, but alloc_retries "
                 "stayed %" PRIu64, request, after.alloc_retries);
    if (!gave_back && after.alloc_retries != cached.alloc_retries)
        fail_msg("alloc_retries went from %" PRIu64 " to %" PRIu64 " though nothing was given back to the device",
                 cached.alloc_retries, after.alloc_retries);
    assert_driver_calls_match_device(f);
    ASSERT_OK(vb_free(f->allocator, big));
    ASSERT_OK(vb_empty_cache(f->allocator));
    if (stats_of(f).reserved_bytes > reserved_when_empty(f))
        fail_msg("after freeing the large block and empty_cache, %" PRIu64 " bytes stay reserved",
                 stats_of(f).reserved_bytes);
    if (!gave_back) {
        print_message("      skipped: '%s' served %" PRIu64 " bytes on another stream with %" PRIu64
                      " cached without giving memory back, so it never needed to free its cache and retry\n",
                      f->suite->ops->name, request, cached.reserved_bytes);
        skip();
    }
}

/* ------------------------------------------------------------------------ */
/* Bad input                                                                 */
/* ------------------------------------------------------------------------ */

/* Calls vb_free(addr), expects VB_ERR_INVALID with a message, and that no
 * statistic moved. */
static void expect_invalid_free(fixture *f, vb_addr addr, const char *what)
{
    vb_alloc_stats before = stats_of(f);
    vb_clear_error();
    vb_status status = vb_free(f->allocator, addr);
    if (status != VB_ERR_INVALID)
        fail_msg("free of %s (0x%" PRIx64 "): %s, expected invalid argument", what, addr, vb_status_name(status));
    if (vb_last_error()[0] == '\0') fail_msg("free of %s returned VB_ERR_INVALID without a message", what);
    vb_alloc_stats after = stats_of(f);
    const char *changed = stats_difference(&before, &after);
    if (changed) fail_msg("free of %s changed %s", what, changed);
}

/* Freeing a pointer the allocator never returned (an address out of the
 * blue, and one inside a live block) is VB_ERR_INVALID and changes nothing;
 * the live block is intact and frees normally afterwards. */
static void free_unknown_pointer_is_invalid(void **state)
{
    fixture *f = *state;
    fixture_open(f, 0);
    vb_addr live = 0;
    ASSERT_OK(vb_malloc(f->allocator, VB_MiB, NULL, &live));
    expect_invalid_free(f, 0x123456789a00ULL, "an address never handed out");
    expect_invalid_free(f, live + VB_MIN_ALIGNMENT, "an address inside a live block");
    ASSERT_OK(vb_free(f->allocator, live));
}

/* A second free of the same pointer is VB_ERR_INVALID and changes nothing. */
static void double_free_is_invalid(void **state)
{
    fixture *f = *state;
    fixture_open(f, 0);
    vb_addr block = 0, other = 0;
    ASSERT_OK(vb_malloc(f->allocator, 64 * KiB, NULL, &block));
    ASSERT_OK(vb_malloc(f->allocator, 64 * KiB, NULL, &other)); /* a neighbour a wrong free could hit */
    ASSERT_OK(vb_free(f->allocator, block));
    expect_invalid_free(f, block, "a pointer already freed");
    ASSERT_OK(vb_free(f->allocator, other));
}

/* Size 0 succeeds with address 0 and counts nothing; freeing 0 is a no-op. */
static void size_zero_returns_address_zero(void **state)
{
    fixture *f = *state;
    fixture_open(f, 0);
    vb_alloc_stats before = stats_of(f);
    vb_addr out = 0xbad0bad0bad0ULL;
    ASSERT_OK(vb_malloc(f->allocator, 0, NULL, &out));
    assert_int_equal(out, 0);
    ASSERT_OK(vb_free(f->allocator, 0));
    vb_alloc_stats after = stats_of(f);
    const char *changed = stats_difference(&before, &after);
    if (changed) fail_msg("malloc(0) + free(0) changed %s", changed);
}

/* Sizes near UINT64_MAX, where rounding overflows, are VB_ERR_OOM with one
 * oom counted each, no memory accounted, and the allocator still works. */
static void absurd_sizes_return_oom(void **state)
{
    fixture *f = *state;
    fixture_open(f, 0);
    static const uint64_t sizes[] = {UINT64_MAX, UINT64_MAX - 1, UINT64_C(1) << 63, UINT64_MAX - 511,
                                     UINT64_MAX - VB_DRIVER_PAGE + 2};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        vb_alloc_stats before = stats_of(f);
        vb_addr out = 0xbad0bad0bad0ULL;
        vb_status status = vb_malloc(f->allocator, sizes[i], NULL, &out);
        if (status != VB_ERR_OOM)
            fail_msg("malloc(%" PRIu64 "): %s, expected out of memory", sizes[i], vb_status_name(status));
        if (out != 0xbad0bad0bad0ULL && out != 0) fail_msg("a failed malloc wrote address 0x%" PRIx64, out);
        vb_alloc_stats after = stats_of(f);
        assert_int_equal(after.ooms, before.ooms + 1);
        assert_int_equal(after.requested_bytes, before.requested_bytes);
        assert_int_equal(after.allocated_bytes, before.allocated_bytes);
        assert_int_equal(after.reserved_bytes, before.reserved_bytes);
    }
    vb_addr block = 0;
    ASSERT_OK(vb_malloc(f->allocator, VB_MiB, NULL, &block));
    ASSERT_OK(vb_free(f->allocator, block));
}

/* ------------------------------------------------------------------------ */
/* Usable (GPU only)                                                         */
/* ------------------------------------------------------------------------ */

/* Every block of a randomized sequence holds what was written to it: each
 * is filled with its own pattern on its stream, and read back before it is
 * freed and at the end; an overlap or an unmapped page shows as mismatches. */
static void usable_blocks_read_back_written_pattern(void **state)
{
    fixture *f = *state;
    if (!on_gpu()) {
        print_message("      skipped: sim memory holds no data, so blocks cannot be written and read back; "
                      "`make test-gpu` checks this property\n");
        skip();
    }
    fixture_open(f, 0);
    vb_device *dev = f->device;
    if (!dev->ops->fill_pattern || !dev->ops->verify_pattern) fail_msg("the cuda device has no fill/verify_pattern");
    f->streams[f->stream_count++] = NULL;
    fixture_stream(f);
    vb_ledger_init(&f->ledger, dev);
    f->ledger_open = 1;

    uint64_t rng = test_seed ^ 0x5a5a5a5aULL;
    for (uint64_t op = 0; op < 1500; op++) {
        int do_free = f->ledger.live_count > 0 &&
                      (f->ledger.requested_bytes > VB_GiB || next_random(&rng) % 100 < 40);
        if (do_free) {
            vb_ledger_block *block = vb_ledger_live_at(&f->ledger, (size_t)(next_random(&rng) % f->ledger.count));
            uint64_t mismatched = 0;
            ASSERT_OK(dev->ops->verify_pattern(dev, block->addr, block->size, block->tag, &mismatched));
            if (mismatched)
                fail_msg("op %" PRIu64 ": block 0x%" PRIx64 "+%" PRIu64 ": %" PRIu64 " bytes read back differ", op,
                         block->addr, block->size, mismatched);
            vb_addr addr = block->addr;
            ASSERT_OK(vb_free(f->allocator, addr));
            vb_ledger_release(&f->ledger, addr);
            continue;
        }
        uint64_t size = random_size(&rng) % (64 * VB_MiB) + 1;
        vb_stream stream = f->streams[next_random(&rng) % f->stream_count];
        vb_addr addr = 0;
        ASSERT_OK(vb_malloc(f->allocator, size, stream, &addr));
        if (vb_ledger_add(&f->ledger, addr, size, stream, op + 1) != 0) fail_msg("op %" PRIu64 ": %s", op, f->ledger.overlap);
        ASSERT_OK(dev->ops->fill_pattern(dev, stream, addr, size, op + 1));
    }
    for (size_t i = 0; i < f->ledger.count; i++) {
        vb_ledger_block *block = &f->ledger.blocks[i];
        uint64_t mismatched = 0;
        ASSERT_OK(dev->ops->verify_pattern(dev, block->addr, block->size, block->tag, &mismatched));
        if (mismatched)
            fail_msg("block 0x%" PRIx64 "+%" PRIu64 ": %" PRIu64 " bytes read back differ", block->addr, block->size,
                     mismatched);
    }
}

/* ------------------------------------------------------------------------ */
/* Threads                                                                   */
/* ------------------------------------------------------------------------ */

#define THREADS 4
#define THREAD_OPS 2500
#define THREAD_MAX_LIVE 64

/* What the threads share: the fixture (its allocator and ledger), the
 * ledger's mutex, the first failure. */
typedef struct thread_shared {
    fixture *f;
    pthread_mutex_t ledger_lock;
    char failure[512];
} thread_shared;

typedef struct thread_work {
    thread_shared *shared;
    unsigned index;
    vb_stream stream;
    uint64_t live_peak;   /* the most bytes this thread held at once */
} thread_work;

/* Notes the first failure of any thread. */
static void thread_fail(thread_shared *shared, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void thread_fail(thread_shared *shared, const char *format, ...)
{
    pthread_mutex_lock(&shared->ledger_lock);
    if (!shared->failure[0]) {
        va_list args;
        va_start(args, format);
        vsnprintf(shared->failure, sizeof shared->failure, format, args);
        va_end(args);
    }
    pthread_mutex_unlock(&shared->ledger_lock);
}

/* One thread's random operations on its own stream: malloc 55%, free 43%,
 * empty_cache 1%, a stats read 1%. Each block it gets enters the shared
 * ledger (which catches an overlap with any thread's live block) after
 * malloc returns, and leaves it before free is called, so the ledger never
 * holds an address the allocator may hand out again. */
static void *thread_main(void *argument)
{
    thread_work *work = argument;
    thread_shared *shared = work->shared;
    fixture *f = shared->f;
    vb_addr live[THREAD_MAX_LIVE];
    size_t live_count = 0;
    uint64_t live_bytes = 0;
    uint64_t rng = test_seed ^ (0x7468726561640000ULL + work->index);
    for (unsigned op = 0; op < THREAD_OPS; op++) {
        uint64_t roll = next_random(&rng) % 100;
        if (live_count == 0 || (roll < 55 && live_count < THREAD_MAX_LIVE && live_bytes < RANDOM_LIVE_CAP / THREADS)) {
            uint64_t size = random_size(&rng);
            vb_addr addr = 0;
            vb_status status = vb_malloc(f->allocator, size, work->stream, &addr);
            if (status != VB_OK) {
                thread_fail(shared, "thread %u op %u: malloc(%" PRIu64 "): %s (%s)", work->index, op, size,
                            vb_status_name(status), vb_last_error());
                break;
            }
            char overlap[sizeof f->ledger.overlap] = "";
            pthread_mutex_lock(&shared->ledger_lock);
            if (addr == 0) snprintf(overlap, sizeof overlap, "address 0 with VB_OK");
            else if (vb_ledger_add(&f->ledger, addr, size, work->stream, work->index) != 0)
                memcpy(overlap, f->ledger.overlap, sizeof overlap);
            pthread_mutex_unlock(&shared->ledger_lock);
            if (overlap[0]) {
                thread_fail(shared, "thread %u op %u: malloc(%" PRIu64 ") returned 0x%" PRIx64 ": %s", work->index,
                            op, size, addr, overlap);
                break;
            }
            live[live_count++] = addr;
            live_bytes += size;
            if (live_bytes > work->live_peak) work->live_peak = live_bytes;
        } else if (roll < 98) {
            size_t pick = (size_t)(next_random(&rng) % live_count);
            vb_addr addr = live[pick];
            live[pick] = live[--live_count];
            pthread_mutex_lock(&shared->ledger_lock);
            vb_ledger_block *block = vb_ledger_find(&f->ledger, addr);
            uint64_t size = block ? block->size : 0;
            vb_ledger_release(&f->ledger, addr);
            pthread_mutex_unlock(&shared->ledger_lock);
            vb_status status = vb_free(f->allocator, addr);
            live_bytes -= size;
            if (status != VB_OK) {
                thread_fail(shared, "thread %u op %u: free(0x%" PRIx64 "): %s (%s)", work->index, op, addr,
                            vb_status_name(status), vb_last_error());
                break;
            }
        } else if (roll < 99) {
            vb_status status = vb_empty_cache(f->allocator);
            if (status != VB_OK) {
                thread_fail(shared, "thread %u op %u: empty_cache: %s (%s)", work->index, op, vb_status_name(status),
                            vb_last_error());
                break;
            }
        } else {
            vb_alloc_stats stats = stats_of(f);
            if (stats.requested_bytes > stats.allocated_bytes || stats.allocated_bytes > stats.reserved_bytes) {
                thread_fail(shared, "thread %u op %u: requested %" PRIu64 ", allocated %" PRIu64 ", reserved %" PRIu64
                            " are not in order", work->index, op, stats.requested_bytes, stats.allocated_bytes,
                            stats.reserved_bytes);
                break;
            }
        }
    }
    return NULL;
}

/* THREADS threads, each on its own stream, run THREAD_OPS random
 * operations on one allocator at once (PyTorch calls its allocator from
 * several threads). No live blocks of any two threads overlap; afterwards the
 * requested bytes equal the ledger's sum exactly, the driver calls equal what
 * the device saw, and after freeing everything and empty_cache nothing is
 * reserved or held. Run under ThreadSanitizer in CI (make test SANITIZER=thread). */
static void threads_random_ops_no_overlap_ledger_exact(void **state)
{
    fixture *f = *state;
    fixture_open(f, 0);
    vb_ledger_init(&f->ledger, f->device);
    f->ledger_open = 1;
    thread_shared shared = {.f = f};
    pthread_mutex_init(&shared.ledger_lock, NULL);
    thread_work work[THREADS];
    pthread_t threads[THREADS];
    for (unsigned i = 0; i < THREADS; i++) {
        work[i] = (thread_work){&shared, i, fixture_stream(f), 0};
        if (pthread_create(&threads[i], NULL, thread_main, &work[i]) != 0) fail_msg("pthread_create failed");
    }
    for (unsigned i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
    pthread_mutex_destroy(&shared.ledger_lock);
    if (shared.failure[0]) fail_msg("%s", shared.failure);

    vb_alloc_stats s = stats_of(f);
    if (s.requested_bytes != f->ledger.requested_bytes)
        fail_msg("after %d threads: requested_bytes %" PRIu64 ", the ledger says %" PRIu64, THREADS, s.requested_bytes,
                 f->ledger.requested_bytes);
    if (s.requested_bytes > s.allocated_bytes || s.allocated_bytes > s.reserved_bytes)
        fail_msg("after %d threads: requested %" PRIu64 ", allocated %" PRIu64 ", reserved %" PRIu64 " are not in order",
                 THREADS, s.requested_bytes, s.allocated_bytes, s.reserved_bytes);
    /* The peak lies between the ledger's own (the ledger drops a block just
     * before its free) and the sum of what each thread held at most. */
    uint64_t threads_peak = 0;
    for (unsigned i = 0; i < THREADS; i++) threads_peak += work[i].live_peak;
    if (s.requested_bytes_peak < f->ledger.requested_peak || s.requested_bytes_peak > threads_peak)
        fail_msg("requested_bytes_peak %" PRIu64 " outside [the ledger's peak %" PRIu64 ", the threads' peaks summed %"
                 PRIu64 "]", s.requested_bytes_peak, f->ledger.requested_peak, threads_peak);
    assert_driver_calls_match_device(f);
    while (f->ledger.live_count > 0) {
        vb_addr addr = vb_ledger_live_at(&f->ledger, 0)->addr;
        vb_ledger_release(&f->ledger, addr);
        ASSERT_OK(vb_free(f->allocator, addr));
    }
    ASSERT_OK(vb_empty_cache(f->allocator));
    s = stats_of(f);
    if (s.reserved_bytes > reserved_when_empty(f) || s.allocated_bytes != 0 || s.requested_bytes != 0)
        fail_msg("after freeing everything and empty_cache: reserved %" PRIu64 ", allocated %" PRIu64
                 ", requested %" PRIu64 " (all should be 0)", s.reserved_bytes, s.allocated_bytes, s.requested_bytes);
    uint64_t held = vb_counting_held(&f->proxy);
    if (on_gpu() ? held > GPU_HELD_TOLERANCE : held != 0)
        fail_msg("after freeing everything and empty_cache the device still holds %" PRIu64 " bytes", held);
    assert_driver_calls_match_device(f);
}

/* ------------------------------------------------------------------------ */
/* Main: the suite once per registered allocator                             */
/* ------------------------------------------------------------------------ */

#define CONFORMANCE_TEST(function, context) \
    cmocka_unit_test_prestate_setup_teardown(function, fixture_setup, fixture_teardown, context)

/* Reads VB_TEST_DEVICE and VB_TEST_SEED; 0, or -1 after an error line. */
static int read_environment(void)
{
    const char *kind = getenv("VB_TEST_DEVICE");
    if (kind && kind[0]) test_device_kind = kind;
    if (strcmp(test_device_kind, "sim") != 0 && strcmp(test_device_kind, "cuda") != 0) {
        fprintf(stderr, "test_conformance: VB_TEST_DEVICE must be sim or cuda, not '%s'\n", test_device_kind);
        return -1;
    }
    const char *no_meminfo = getenv("VB_TEST_NO_MEMINFO"), *injection = getenv("CUDA_INJECTION64_PATH");
    if ((no_meminfo && strcmp(no_meminfo, "1") == 0) || (injection && strstr(injection, "sanitizer"))) {
        compare_driver_memory = 0;
        if (on_gpu()) fprintf(stderr, "test_conformance: under compute-sanitizer: cudaMemGetInfo comparisons skipped\n");
    }
    const char *seed = getenv("VB_TEST_SEED");
    if (seed && seed[0]) {
        char *end = NULL;
        test_seed = strtoull(seed, &end, 10);
        if (*end != '\0') {
            fprintf(stderr, "test_conformance: VB_TEST_SEED must be a decimal number, not '%s'\n", seed);
            return -1;
        }
    }
    if (on_gpu()) {
        vb_device *dev = NULL;
        if (vb_device_open("cuda", NULL, &dev) != VB_OK) {
            fprintf(stderr, "test_conformance: VB_TEST_DEVICE=cuda: %s\n", vb_last_error());
            return -1;
        }
        vb_device_close(dev);
    }
    return 0;
}

/* Runs the suite once per registered allocator and once for stitch with
 * stitched ranges (or per allocator spec of VB_TEST_ALLOCATORS:
 * "stitch,external:/path/lib.so"); non-zero if any test failed. */
int main(void)
{
    if (read_environment() != 0) return 2;
    const char *selection = getenv("VB_TEST_ALLOCATORS");
    vb_allocator_spec *specs = NULL;
    size_t allocator_count = 0;
    /* Every registered strategy with its defaults, and stitch's stitched
     * ranges, which its defaults leave off. */
    const char *everything = "all,stitch[chunk_mb=2,handle_max_mb=4,stitch_max_maps=64]";
    if (vb_allocator_spec_list_parse(selection && selection[0] ? selection : everything, &specs, &allocator_count) !=
        VB_OK) {
        fprintf(stderr, "test_conformance: VB_TEST_ALLOCATORS: %s\n", vb_last_error());
        return 2;
    }
    suite_context *contexts = calloc(allocator_count ? allocator_count : 1, sizeof *contexts);
    if (!contexts) return 1;

    int failed = 0;
    for (size_t i = 0; i < allocator_count; i++) {
        suite_context *context = &contexts[i];
        context->spec = &specs[i];
        context->ops = vb_allocator_find(specs[i].name);
        const struct CMUnitTest tests[] = {
            CONFORMANCE_TEST(alignment_at_least_256_bytes, context),
            CONFORMANCE_TEST(random_ops_live_blocks_never_overlap, context),
            CONFORMANCE_TEST(random_ops_requested_bytes_match_ledger, context),
            CONFORMANCE_TEST(random_ops_requested_le_allocated_le_reserved, context),
            CONFORMANCE_TEST(random_ops_reserved_and_driver_calls_match_device, context),
            CONFORMANCE_TEST(reserved_zero_after_free_all_and_empty_cache, context),
            CONFORMANCE_TEST(record_stream_defers_reuse_until_stream_work_completes, context),
            CONFORMANCE_TEST(oom_larger_than_device_returns_oom_and_stays_usable, context),
            CONFORMANCE_TEST(oom_frees_cache_and_retries, context),
            CONFORMANCE_TEST(free_unknown_pointer_is_invalid, context),
            CONFORMANCE_TEST(double_free_is_invalid, context),
            CONFORMANCE_TEST(size_zero_returns_address_zero, context),
            CONFORMANCE_TEST(absurd_sizes_return_oom, context),
            CONFORMANCE_TEST(usable_blocks_read_back_written_pattern, context),
            CONFORMANCE_TEST(threads_random_ops_no_overlap_ledger_exact, context),
        };
        char group[700];
        snprintf(group, sizeof group, "conformance/%s on %s (seed %" PRIu64 ")", context->spec->label,
                 test_device_kind, test_seed);
        print_message("[----------] %s\n", group);
        failed += cmocka_run_group_tests_name(group, tests, NULL, NULL);
    }
    free(contexts);
    vb_allocator_spec_list_free(specs, allocator_count);
#ifdef VB_HAVE_CUDA
    /* compute-sanitizer's leak check reports what is still allocated when
     * the context is destroyed: destroy it here, after every device closed. */
    if (on_gpu()) cudaDeviceReset();
#endif
    return failed ? 1 : 0;
}
