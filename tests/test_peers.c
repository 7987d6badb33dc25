/* vrambench — conformance across devices: what every strategy must do on a
 * machine of several devices (issue 25, "Many GPUs"), and the simulated
 * machine that `make test` checks it on.
 *
 * Each strategy runs once per pair of devices, one instance on each device
 * (as the PyTorch plug-in has one per device), each given a counting proxy
 * of its own device (tests/counting_device.h):
 *   - each device serves requests from its own memory, never from another
 *     device's cache;
 *   - empty_cache releases its own device's cache only;
 *   - each instance's statistics count its own device's calls only;
 *   - the memory a strategy hands out on one device is usable by the other
 *     when the hardware lets it access that device's memory: after growth,
 *     after the stranding sequence (a remap for stitch, a stitched range
 *     with stitch_max_maps) and after a release and regrowth, the other
 *     device copies from the block and into it, and reads it directly;
 *   - the same whichever device was opened first;
 *   - record_stream follows the streams of the block's own device.
 *
 * Device: VB_TEST_DEVICE=sim (default, `make test`: a simulated machine of
 * two devices that can access each other) or cuda (`make test-gpu`: every
 * pair of the GPUs, in both directions; on a machine of one GPU the suite
 * is skipped with a note). VB_TEST_ALLOCATORS selects strategies as in
 * test_conformance. On sim, a direct read is vb_sim_peer_read and every
 * device-to-device copy is checked by the sim against whom the memory was
 * opened to; on a GPU the bytes are written on one device and read back on
 * the other. The simulated machine's own rules (a peer matrix with a pair
 * that are no peers, staged copies, mappings not opened) are tested once,
 * on sim. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef VB_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "allocators/allocator.h"
#include "allocators/spec.h"
#include "counting_device.h"

#define MiB VB_MiB

#define ASSERT_OK(call)                                                                              \
    do {                                                                                             \
        vb_status status_ = (call);                                                                  \
        if (status_ != VB_OK) fail_msg("%s: %s (%s)", #call, vb_status_name(status_), vb_last_error()); \
    } while (0)

/* On a GPU the busy work on a stream must outlast a handful of mallocs;
 * nothing asserts on its length. */
#define SIM_BUSY_NS (1000 * 1000)
#define GPU_BUSY_NS (200 * 1000 * 1000)

static const char *test_device_kind = "sim"; /* VB_TEST_DEVICE */

static int on_gpu(void)
{
    return strcmp(test_device_kind, "cuda") == 0;
}

/* ------------------------------------------------------------------------ */
/* A pair of devices, a strategy on each                                     */
/* ------------------------------------------------------------------------ */

/* One strategy on one pair of device ordinals. */
typedef struct pair_context {
    const vb_allocator_spec *spec;
    int ordinals[2];
} pair_context;

typedef struct fixture {
    const pair_context *context;
    vb_sim_machine *machine;     /* sim: the machine of the two devices */
    vb_device *dev[2];
    vb_counting_device proxy[2];
    vb_allocator *alloc[2];
    vb_stream streams[2][2];     /* two streams of each device */
    vb_addr blocks[2][8];        /* live blocks of each allocator, freed by the teardown */
    uint64_t block_sizes[2][8];
    size_t block_count[2];
} fixture;

static int fixture_setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    f->context = *state;
    *state = f;
    return 0;
}

static int fixture_teardown(void **state)
{
    fixture *f = *state;
    for (int d = 0; d < 2; d++) {
        for (size_t i = 0; i < f->block_count[d]; i++)
            if (f->blocks[d][i]) vb_free(f->alloc[d], f->blocks[d][i]);
        vb_allocator_destroy(f->alloc[d]);
    }
    for (int d = 0; d < 2; d++) {
        if (!f->dev[d]) continue;
        f->dev[d]->ops->device_synchronize(f->dev[d]);
        for (int s = 0; s < 2; s++)
            if (f->streams[d][s]) f->dev[d]->ops->stream_destroy(f->dev[d], f->streams[d][s]);
        vb_device_close(f->dev[d]);
    }
    vb_sim_machine_release(f->machine);
    free(f);
    return 0;
}

/* Opens device `which` of the pair (0 or 1). */
static void open_device(fixture *f, int which)
{
    vb_device_options options = {.ordinal = f->context->ordinals[which], .sim_machine = f->machine};
    if (vb_device_open(test_device_kind, &options, &f->dev[which]) != VB_OK)
        fail_msg("cannot open %s device %d: %s", test_device_kind, options.ordinal, vb_last_error());
    for (int s = 0; s < 2; s++) ASSERT_OK(f->dev[which]->ops->stream_create(f->dev[which], &f->streams[which][s]));
}

/* Opens both devices (`first` before the other) and the strategy on each,
 * through its own counting proxy. */
static void fixture_open(fixture *f, int first)
{
    if (!on_gpu()) ASSERT_OK(vb_sim_machine_create(2, NULL, &f->machine));
    open_device(f, first);
    open_device(f, 1 - first);
    vb_config config = vb_allocator_spec_config(f->context->spec);
    for (int d = 0; d < 2; d++) {
        vb_counting_init(&f->proxy[d], f->dev[d]);
        if (vb_allocator_create(f->context->spec->name, &f->proxy[d].device, &config, &f->alloc[d]) != VB_OK)
            fail_msg("cannot create '%s' on device %d: %s", f->context->spec->label, f->context->ordinals[d],
                     vb_last_error());
    }
}

/* A block of `size` from device d's strategy on its first stream, kept for the teardown. */
static vb_addr take(fixture *f, int d, uint64_t size)
{
    vb_addr addr = 0;
    ASSERT_OK(vb_malloc(f->alloc[d], size, f->streams[d][0], &addr));
    size_t slot = 0;
    while (slot < f->block_count[d] && f->blocks[d][slot]) slot++;
    assert_true(slot < 8);
    if (slot == f->block_count[d]) f->block_count[d]++;
    f->blocks[d][slot] = addr;
    f->block_sizes[d][slot] = size;
    return addr;
}

/* Frees a block take() gave. */
static void give(fixture *f, int d, vb_addr addr)
{
    for (size_t i = 0; i < f->block_count[d]; i++)
        if (f->blocks[d][i] == addr) {
            ASSERT_OK(vb_free(f->alloc[d], addr));
            f->blocks[d][i] = 0;
            return;
        }
    fail_msg("0x%" PRIx64 " was not taken on device %d", addr, d);
}

/* Frees every block device d holds. */
static void give_all(fixture *f, int d)
{
    for (size_t i = 0; i < f->block_count[d]; i++)
        if (f->blocks[d][i]) give(f, d, f->blocks[d][i]);
    f->block_count[d] = 0;
}

static vb_alloc_stats stats_of(fixture *f, int d)
{
    vb_alloc_stats stats;
    vb_allocator_stats(f->alloc[d], &stats);
    return stats;
}

/* Says the pointer's owner cannot be told (the driver's answer for it). */
#define OWNER_UNKNOWN (-2)

/* The ordinal of the device whose memory holds `addr`, -1 for none, or
 * OWNER_UNKNOWN where a GPU driver does not say (cudaPointerGetAttributes
 * of a VM mapping or pool block on some drivers). */
static int owner_of(fixture *f, vb_addr addr)
{
#ifdef VB_HAVE_CUDA
    if (on_gpu()) {
        struct cudaPointerAttributes attributes;
        if (cudaPointerGetAttributes(&attributes, (const void *)(uintptr_t)addr) != cudaSuccess) {
            (void)cudaGetLastError();
            return OWNER_UNKNOWN;
        }
        return attributes.type == cudaMemoryTypeDevice ? attributes.device : OWNER_UNKNOWN;
    }
#endif
    return vb_sim_owner(f->dev[0], addr);
}

/* 0 for an external allocator (PyTorch's pluggable ABI has no
 * record_stream, as test_conformance says). */
static int honours_record_stream(const fixture *f)
{
    return f->alloc[0]->ops != &vb_external_allocator;
}

/* ------------------------------------------------------------------------ */
/* Each device on its own                                                    */
/* ------------------------------------------------------------------------ */

static const uint64_t sizes[] = {4096, MiB, 8 * MiB, 24 * MiB, 64 * MiB};
#define SIZE_COUNT (sizeof sizes / sizeof *sizes)

/* Device 0's strategy caches freed blocks; device 1's then serves the same
 * requests with its own device's memory (its own driver calls), and device
 * 0's statistics do not move. */
static void each_device_serves_requests_from_its_own_memory(void **state)
{
    fixture *f = *state;
    fixture_open(f, 0);
    for (size_t i = 0; i < SIZE_COUNT; i++) take(f, 0, sizes[i]);
    give_all(f, 0);
    vb_alloc_stats before = stats_of(f, 0);
    uint64_t device0_calls = f->proxy[0].obtain_calls;
    for (size_t i = 0; i < SIZE_COUNT; i++) {
        vb_addr addr = take(f, 1, sizes[i]);
        int owner = owner_of(f, addr);
        if (owner == OWNER_UNKNOWN)
            print_message("      note: the driver does not say which device holds 0x%" PRIx64 "; the statistics "
                          "below decide\n", addr);
        else if (owner != f->context->ordinals[1])
            fail_msg("device %d's strategy handed out 0x%" PRIx64 " (%" PRIu64 " bytes), memory of device %d",
                     f->context->ordinals[1], addr, sizes[i], owner);
    }
    vb_alloc_stats after = stats_of(f, 0);
    if (after.reserved_bytes != before.reserved_bytes || after.free_cached_bytes != before.free_cached_bytes ||
        f->proxy[0].obtain_calls != device0_calls)
        fail_msg("device %d's requests moved device %d's cache: reserved %" PRIu64 " -> %" PRIu64
                 ", its device calls %" PRIu64 " -> %" PRIu64, f->context->ordinals[1], f->context->ordinals[0],
                 before.reserved_bytes, after.reserved_bytes, device0_calls, f->proxy[0].obtain_calls);
    if (f->proxy[1].obtain_calls == 0 || stats_of(f, 1).reserved_bytes == 0)
        fail_msg("device %d served its requests without memory of its own", f->context->ordinals[1]);
}

/* Both devices cache; empty_cache on device 0's strategy leaves device 1's
 * cache, and its device's memory, as they were. */
static void empty_cache_releases_only_its_own_devices_cache(void **state)
{
    fixture *f = *state;
    fixture_open(f, 0);
    for (int d = 0; d < 2; d++) {
        for (size_t i = 0; i < SIZE_COUNT; i++) take(f, d, sizes[i]);
        give_all(f, d);
    }
    vb_alloc_stats cached1 = stats_of(f, 1);
    uint64_t held1 = vb_counting_held(&f->proxy[1]), returns1 = f->proxy[1].return_calls;
    ASSERT_OK(vb_empty_cache(f->alloc[0]));
    if (stats_of(f, 0).reserved_bytes != 0 && !f->alloc[0]->ops->outside_reserved)
        fail_msg("device %d keeps %" PRIu64 " bytes reserved after its empty_cache", f->context->ordinals[0],
                 stats_of(f, 0).reserved_bytes);
    vb_alloc_stats still1 = stats_of(f, 1);
    if (still1.reserved_bytes != cached1.reserved_bytes || f->proxy[1].return_calls != returns1 ||
        (!on_gpu() && vb_counting_held(&f->proxy[1]) != held1))
        fail_msg("device %d's empty_cache released device %d's cache: reserved %" PRIu64 " -> %" PRIu64,
                 f->context->ordinals[0], f->context->ordinals[1], cached1.reserved_bytes, still1.reserved_bytes);
    ASSERT_OK(vb_empty_cache(f->alloc[1]));
}

/* Interleaved traffic on both devices: each strategy's requested bytes are
 * what was asked of it, its driver calls are those its own device saw, and
 * (on sim, exactly) its reserved bytes are what its device holds. */
static void statistics_count_each_device_apart(void **state)
{
    fixture *f = *state;
    fixture_open(f, 0);
    uint64_t asked[2] = {0, 0};
    for (size_t i = 0; i < SIZE_COUNT; i++)
        for (int d = 0; d < 2; d++) {
            uint64_t size = sizes[(i + (size_t)d) % SIZE_COUNT];
            take(f, d, size);
            asked[d] += size;
        }
    for (int d = 0; d < 2; d++) {
        vb_alloc_stats s = stats_of(f, d);
        int ordinal = f->context->ordinals[d];
        if (s.requested_bytes != asked[d])
            fail_msg("device %d: requested_bytes %" PRIu64 ", %" PRIu64 " were asked of it", ordinal,
                     s.requested_bytes, asked[d]);
        if (s.driver_alloc_calls != f->proxy[d].obtain_calls || s.driver_free_calls != f->proxy[d].return_calls)
            fail_msg("device %d: driver calls %" PRIu64 "/%" PRIu64 ", its device saw %" PRIu64 "/%" PRIu64, ordinal,
                     s.driver_alloc_calls, s.driver_free_calls, f->proxy[d].obtain_calls, f->proxy[d].return_calls);
        if (!on_gpu() && !f->alloc[d]->ops->outside_reserved && s.reserved_bytes != vb_counting_held(&f->proxy[d]))
            fail_msg("device %d: reserved %" PRIu64 ", its device holds %" PRIu64, ordinal, s.reserved_bytes,
                     vb_counting_held(&f->proxy[d]));
    }
}

/* ------------------------------------------------------------------------ */
/* Peer access                                                               */
/* ------------------------------------------------------------------------ */

/* 1 if the device of pair member `reader` may access `owner`'s memory (the
 * hardware's answer, as the owner's device reports it). */
static int may_access(fixture *f, int owner, int reader)
{
    return f->dev[owner]->ops->peer_access(f->dev[owner], f->context->ordinals[reader]);
}

/* Device `reader` uses [addr, addr+size), a block of device `owner`'s
 * strategy (`what` names it in failures): it copies the block into a block
 * of its own and back on its own stream, and, where it may access the
 * owner's memory, reads it directly. On a GPU the bytes written on the
 * owner are read back on the reader. */
static void check_peer_use(fixture *f, int owner, int reader, vb_addr addr, uint64_t size, const char *what)
{
    vb_device *odev = f->dev[owner], *rdev = f->dev[reader];
    vb_stream ostream = f->streams[owner][0], rstream = f->streams[reader][0];
    uint64_t seed = addr ^ size;
    vb_addr mine = take(f, reader, size);
    if (on_gpu()) {
        ASSERT_OK(odev->ops->fill_pattern(odev, ostream, addr, size, seed));
        ASSERT_OK(odev->ops->stream_synchronize(odev, ostream));
    }
    vb_status status = rdev->ops->memcpy_async(rdev, (void *)(uintptr_t)addr, mine, size, VB_COPY_DEVICE_TO_DEVICE,
                                               rstream);
    if (status == VB_OK) status = rdev->ops->stream_synchronize(rdev, rstream);
    if (status != VB_OK)
        fail_msg("device %d copying %s of device %d (0x%" PRIx64 ", %" PRIu64 " bytes): %s (%s)",
                 f->context->ordinals[reader], what, f->context->ordinals[owner], addr, size, vb_status_name(status),
                 vb_last_error());
    uint64_t mismatched = 0;
    if (on_gpu()) {
        ASSERT_OK(rdev->ops->verify_pattern(rdev, mine, size, seed, &mismatched));
        if (mismatched)
            fail_msg("device %d's copy of %s of device %d: %" PRIu64 " bytes differ", f->context->ordinals[reader],
                     what, f->context->ordinals[owner], mismatched);
    }
    if (may_access(f, owner, reader)) {
        status = on_gpu() ? rdev->ops->verify_pattern(rdev, addr, size, seed, &mismatched)
                          : vb_sim_peer_read(rdev, addr, size);
        if (status != VB_OK || mismatched)
            fail_msg("device %d reading %s of device %d directly: %s (%s), %" PRIu64 " bytes differ",
                     f->context->ordinals[reader], what, f->context->ordinals[owner], vb_status_name(status),
                     vb_last_error(), mismatched);
    } else {
        print_message("      note: device %d cannot access device %d's memory (no peer access): copies only\n",
                      f->context->ordinals[reader], f->context->ordinals[owner]);
    }
    status = rdev->ops->memcpy_async(rdev, (void *)(uintptr_t)mine, addr, size, VB_COPY_DEVICE_TO_DEVICE, rstream);
    if (status == VB_OK) status = rdev->ops->stream_synchronize(rdev, rstream);
    if (status != VB_OK)
        fail_msg("device %d copying into %s of device %d: %s (%s)", f->context->ordinals[reader], what,
                 f->context->ordinals[owner], vb_status_name(status), vb_last_error());
    give(f, reader, mine);
}

/* Device `owner`'s strategy grows (five 20 MiB blocks), strands memory and
 * serves a 60 MiB request from it (stitch: a remap; with stitch_max_maps a
 * stitched range), then releases everything and grows again: the other
 * device uses a block of each. */
static void check_owner(fixture *f, int owner)
{
    int reader = 1 - owner;
    vb_addr block[5];
    for (int i = 0; i < 5; i++) block[i] = take(f, owner, 20 * MiB);
    check_peer_use(f, owner, reader, block[1], 20 * MiB, "a block after growth");
    give(f, owner, block[0]);
    give(f, owner, block[2]);
    give(f, owner, block[4]);
    vb_addr stranded = take(f, owner, 60 * MiB);
    check_peer_use(f, owner, reader, stranded, 60 * MiB, "a block from stranded memory (remapped or stitched)");
    give_all(f, owner);
    ASSERT_OK(vb_empty_cache(f->alloc[owner]));
    vb_addr regrown = take(f, owner, 40 * MiB);
    check_peer_use(f, owner, reader, regrown, 40 * MiB, "a block after a release and regrowth");
    give_all(f, owner);
}

static void peers_use_blocks_after_growth_remap_and_stitching(void **state)
{
    fixture *f = *state;
    fixture_open(f, 0);
    check_owner(f, 0);
    check_owner(f, 1);
}

/* The same devices opened the other way round: each device's answer about
 * the other is the same, and the blocks are as usable. */
static void peer_access_does_not_depend_on_which_device_opened_first(void **state)
{
    fixture *f = *state;
    fixture_open(f, 0);
    int forward[2] = {may_access(f, 0, 1), may_access(f, 1, 0)};
    for (int d = 0; d < 2; d++) {
        vb_allocator_destroy(f->alloc[d]);
        f->alloc[d] = NULL;
        for (int s = 0; s < 2; s++) f->dev[d]->ops->stream_destroy(f->dev[d], f->streams[d][s]);
        memset(f->streams[d], 0, sizeof f->streams[d]);
        vb_device_close(f->dev[d]);
        f->dev[d] = NULL;
    }
    vb_sim_machine_release(f->machine);
    f->machine = NULL;
    fixture_open(f, 1);
    if (may_access(f, 0, 1) != forward[0] || may_access(f, 1, 0) != forward[1])
        fail_msg("peer access changed with the order the devices were opened in: %d/%d, then %d/%d", forward[0],
                 forward[1], may_access(f, 0, 1), may_access(f, 1, 0));
    vb_addr addr = take(f, 0, 20 * MiB);
    check_peer_use(f, 0, 1, addr, 20 * MiB, "a block");
    give_all(f, 0);
}

/* ------------------------------------------------------------------------ */
/* Streams of each device                                                    */
/* ------------------------------------------------------------------------ */

/* A block of device 1's strategy, freed while recorded on device 1's second
 * stream with work queued there, is not handed out again while that work
 * is pending, however idle device 0 is; once it completes, all is
 * released. */
static void record_stream_waits_for_its_own_devices_stream(void **state)
{
    fixture *f = *state;
    fixture_open(f, 0);
    if (!honours_record_stream(f)) {
        print_message("      skipped: '%s' has no record_stream (PyTorch's pluggable-allocator ABI)\n",
                      f->alloc[0]->ops->name);
        skip();
    }
    vb_device *dev1 = f->dev[1], *dev0 = f->dev[0];
    vb_stream s1 = f->streams[1][0], busy = f->streams[1][1];
    const uint64_t size = MiB;
    vb_addr freed = 0;
    ASSERT_OK(vb_malloc(f->alloc[1], size, s1, &freed));
    ASSERT_OK(dev1->ops->enqueue_busy(dev1, busy, on_gpu() ? GPU_BUSY_NS : SIM_BUSY_NS));
    vb_event done = NULL;
    ASSERT_OK(dev1->ops->event_create(dev1, &done));
    ASSERT_OK(dev1->ops->event_record(dev1, done, busy));
    ASSERT_OK(vb_record_stream(f->alloc[1], freed, busy));
    ASSERT_OK(vb_free(f->alloc[1], freed));
    /* Device 0 finishes everything it has: that says nothing of device 1. */
    ASSERT_OK(dev0->ops->device_synchronize(dev0));
    vb_addr later[8];
    for (size_t i = 0; i < 8; i++) {
        ASSERT_OK(vb_malloc(f->alloc[1], size, s1, &later[i]));
        if (dev1->ops->event_query(dev1, done) || later[i] >= freed + size || freed >= later[i] + size) continue;
        ASSERT_OK(dev1->ops->stream_synchronize(dev1, s1)); /* reuse is fine where s1 was made to wait */
        if (!dev1->ops->event_query(dev1, done))
            fail_msg("device %d's block 0x%" PRIx64 " was handed out again while the work recorded on its "
                     "stream was pending", f->context->ordinals[1], freed);
    }
    ASSERT_OK(dev1->ops->event_synchronize(dev1, done));
    if (!on_gpu()) vb_sim_complete_stream(dev1, busy);
    for (size_t i = 0; i < 8; i++) ASSERT_OK(vb_free(f->alloc[1], later[i]));
    ASSERT_OK(vb_empty_cache(f->alloc[1]));
    dev1->ops->event_destroy(dev1, done);
    if (stats_of(f, 1).reserved_bytes != 0 && !f->alloc[1]->ops->outside_reserved)
        fail_msg("device %d keeps %" PRIu64 " bytes reserved after its work completed and empty_cache",
                 f->context->ordinals[1], stats_of(f, 1).reserved_bytes);
}

/* ------------------------------------------------------------------------ */
/* The simulated machine (sim only)                                          */
/* ------------------------------------------------------------------------ */

/* A machine of three devices where device 2 cannot access device 0's
 * memory (the others can access each other's). */
static const unsigned char three_devices[9] = {
    1, 1, 1, /* device 0 accesses 0, 1, 2 */
    1, 1, 1, /* device 1 */
    0, 1, 1, /* device 2: not device 0 */
};

typedef struct sim_machine_fixture {
    vb_sim_machine *machine;
    vb_device *dev[3];
} sim_machine_fixture;

static void open_three(sim_machine_fixture *m)
{
    ASSERT_OK(vb_sim_machine_create(3, three_devices, &m->machine));
    for (int k = 0; k < 3; k++) {
        vb_device_options options = {.ordinal = k, .sim_machine = m->machine, .sim_capacity_bytes = VB_GiB};
        ASSERT_OK(vb_device_open("sim", &options, &m->dev[k]));
    }
}

static void close_three(sim_machine_fixture *m)
{
    for (int k = 0; k < 3; k++) vb_device_close(m->dev[k]);
    vb_sim_machine_release(m->machine);
}

/* A mapping of 2 MiB on `dev`, accessible when `open` (vm_set_access). */
static vb_addr sim_mapping(vb_device *dev, int open, vb_phys *handle)
{
    vb_addr addr = 0;
    ASSERT_OK(dev->ops->vm_reserve(dev, 2 * MiB, &addr));
    ASSERT_OK(dev->ops->vm_create(dev, 2 * MiB, handle));
    ASSERT_OK(dev->ops->vm_map(dev, addr, 2 * MiB, *handle));
    if (open) ASSERT_OK(dev->ops->vm_set_access(dev, addr, 2 * MiB));
    return addr;
}

/* Device `by` copies `size` bytes from `theirs` into `mine` and back. */
static void copies_both_ways(vb_device *by, vb_addr theirs, vb_addr mine, uint64_t size)
{
    ASSERT_OK(by->ops->memcpy_async(by, (void *)(uintptr_t)theirs, mine, size, VB_COPY_DEVICE_TO_DEVICE, NULL));
    ASSERT_OK(by->ops->memcpy_async(by, (void *)(uintptr_t)mine, theirs, size, VB_COPY_DEVICE_TO_DEVICE, NULL));
}

static void sim_unmapping(vb_device *dev, vb_addr addr, vb_phys handle)
{
    ASSERT_OK(dev->ops->vm_unmap(dev, addr, 2 * MiB));
    ASSERT_OK(dev->ops->vm_release(dev, handle));
    ASSERT_OK(dev->ops->vm_free(dev, addr, 2 * MiB));
}

/* Each device knows its ordinal and its machine, and its peers are the
 * devices the matrix lets access it (itself included). */
static void sim_peer_access_follows_the_machines_matrix(void **state)
{
    (void)state;
    sim_machine_fixture m;
    open_three(&m);
    for (int d = 0; d < 3; d++) {
        vb_device_info info;
        m.dev[d]->ops->info(m.dev[d], &info);
        assert_int_equal(info.ordinal, d);
        assert_int_equal(info.device_count, 3);
        for (int p = 0; p < 3; p++) assert_int_equal(m.dev[d]->ops->peer_access(m.dev[d], p), three_devices[p * 3 + d]);
    }
    assert_int_equal(m.dev[0]->ops->peer_access(m.dev[0], 3), 0);
    close_three(&m);
}

/* Each device's memory (cudaMalloc, pool, mapping) is its own: its owner is
 * its ordinal, and freed memory is no one's. */
static void sim_devices_have_addresses_of_their_own(void **state)
{
    (void)state;
    sim_machine_fixture m;
    open_three(&m);
    for (int d = 0; d < 3; d++) {
        vb_device *dev = m.dev[d];
        vb_addr block = 0, pooled = 0;
        vb_pool pool = NULL;
        vb_phys handle = 0;
        ASSERT_OK(dev->ops->mem_alloc(dev, 3 * MiB, &block));
        ASSERT_OK(dev->ops->pool_create(dev, 0, &pool));
        ASSERT_OK(dev->ops->pool_malloc(dev, pool, MiB, NULL, &pooled));
        vb_addr mapped = sim_mapping(dev, 1, &handle);
        assert_int_equal(vb_sim_owner(m.dev[0], block + MiB), d);
        assert_int_equal(vb_sim_owner(m.dev[0], pooled), d);
        assert_int_equal(vb_sim_owner(m.dev[0], mapped), d);
        ASSERT_OK(dev->ops->mem_free(dev, block));
        assert_int_equal(vb_sim_owner(m.dev[0], block + MiB), -1);
        ASSERT_OK(dev->ops->pool_free(dev, pool, pooled, NULL));
        dev->ops->pool_destroy(dev, pool);
        sim_unmapping(dev, mapped, handle);
    }
    close_three(&m);
}

/* The three devices, a 2 MiB mapping of device 0 (opened to its peers when
 * `open`) and a 2 MiB cudaMalloc block of device `reader`, its own. */
typedef struct copy_setup {
    sim_machine_fixture m;
    vb_device *owner, *reader;
    vb_addr mapped, mine;
    vb_phys handle;
} copy_setup;

static void open_copy_setup(copy_setup *c, int reader, int open)
{
    open_three(&c->m);
    c->owner = c->m.dev[0];
    c->reader = c->m.dev[reader];
    ASSERT_OK(c->reader->ops->mem_alloc(c->reader, 2 * MiB, &c->mine));
    c->mapped = sim_mapping(c->owner, open, &c->handle);
}

static void close_copy_setup(copy_setup *c)
{
    sim_unmapping(c->owner, c->mapped, c->handle);
    ASSERT_OK(c->reader->ops->mem_free(c->reader, c->mine));
    close_three(&c->m);
}

/* A mapping its device did not open (no vm_set_access) is refused to a
 * peer's copy and direct read, as on the GPU ("invalid argument"); once
 * opened, both work. Pool and cudaMalloc memory are open to peers from the
 * start. */
static void sim_peer_copy_needs_the_mapping_opened(void **state)
{
    (void)state;
    copy_setup c;
    open_copy_setup(&c, 1, 0);
    vb_device *owner = c.owner, *peer = c.reader;
    vb_addr mapped = c.mapped, mine = c.mine;
    assert_int_equal(peer->ops->memcpy_async(peer, (void *)(uintptr_t)mapped, mine, MiB, VB_COPY_DEVICE_TO_DEVICE,
                                             NULL),
                     VB_ERR_INVALID);
    assert_non_null(strstr(vb_last_error(), "was not opened to it"));
    assert_int_equal(vb_sim_peer_read(peer, mapped, MiB), VB_ERR_INVALID);
    ASSERT_OK(owner->ops->vm_set_access(owner, mapped, 2 * MiB));
    copies_both_ways(peer, mapped, mine, MiB);
    ASSERT_OK(vb_sim_peer_read(peer, mapped, 2 * MiB));
    vb_pool pool = NULL;
    vb_addr pooled = 0, block = 0;
    ASSERT_OK(owner->ops->pool_create(owner, 0, &pool));
    ASSERT_OK(owner->ops->pool_malloc(owner, pool, MiB, NULL, &pooled));
    ASSERT_OK(owner->ops->mem_alloc(owner, MiB, &block));
    ASSERT_OK(vb_sim_peer_read(peer, pooled, MiB));
    ASSERT_OK(vb_sim_peer_read(peer, block, MiB));
    ASSERT_OK(owner->ops->mem_free(owner, block));
    ASSERT_OK(owner->ops->pool_free(owner, pool, pooled, NULL));
    owner->ops->pool_destroy(owner, pool);
    close_copy_setup(&c);
}

/* Device 2 is no peer of device 0: it cannot read device 0's memory
 * directly, even opened, but copies still work (the driver stages them
 * through the host). */
static void sim_copies_between_devices_that_are_no_peers_are_staged(void **state)
{
    (void)state;
    copy_setup c;
    open_copy_setup(&c, 2, 1);
    assert_int_equal(vb_sim_peer_read(c.reader, c.mapped, MiB), VB_ERR_INVALID);
    assert_non_null(strstr(vb_last_error(), "is no peer of it"));
    copies_both_ways(c.reader, c.mapped, c.mine, MiB);
    close_copy_setup(&c);
}

/* A device of a machine opens once, within the machine; a machine has 1 to
 * VB_SIM_MAX_DEVICES devices. */
static void sim_machine_rejects_bad_devices(void **state)
{
    (void)state;
    vb_sim_machine *machine = NULL;
    assert_int_equal(vb_sim_machine_create(0, NULL, &machine), VB_ERR_INVALID);
    assert_int_equal(vb_sim_machine_create(VB_SIM_MAX_DEVICES + 1, NULL, &machine), VB_ERR_INVALID);
    ASSERT_OK(vb_sim_machine_create(2, NULL, &machine));
    vb_device *dev = NULL, *again = NULL;
    vb_device_options options = {.ordinal = 1, .sim_machine = machine};
    ASSERT_OK(vb_device_open("sim", &options, &dev));
    assert_int_equal(vb_device_open("sim", &options, &again), VB_ERR_INVALID);
    assert_non_null(strstr(vb_last_error(), "open already"));
    options.ordinal = 2;
    assert_int_equal(vb_device_open("sim", &options, &again), VB_ERR_INVALID);
    assert_non_null(strstr(vb_last_error(), "device 2 asked of a simulated machine of 2 devices"));
    vb_sim_machine_release(machine); /* the open device keeps it */
    vb_device *peer = NULL;
    ASSERT_OK(vb_device_open_peer(dev, 0, &peer));
    vb_device_info info;
    peer->ops->info(peer, &info);
    assert_int_equal(info.ordinal, 0);
    vb_device_close(peer);
    vb_device_close(dev);
}

/* ------------------------------------------------------------------------ */
/* Main                                                                      */
/* ------------------------------------------------------------------------ */

#define PAIR_TEST(function, context) \
    cmocka_unit_test_prestate_setup_teardown(function, fixture_setup, fixture_teardown, context)

/* Devices of the machine: 2 on sim, the GPUs on cuda (-1 after an error). */
static int device_count(void)
{
    if (!on_gpu()) return 2;
    vb_device *dev = NULL;
    if (vb_device_open("cuda", NULL, &dev) != VB_OK) {
        fprintf(stderr, "test_peers: VB_TEST_DEVICE=cuda: %s\n", vb_last_error());
        return -1;
    }
    vb_device_info info;
    dev->ops->info(dev, &info);
    vb_device_close(dev);
    return info.device_count;
}

/* The properties of one strategy on one pair. */
static int run_pair(pair_context *context)
{
    const struct CMUnitTest tests[] = {
        PAIR_TEST(each_device_serves_requests_from_its_own_memory, context),
        PAIR_TEST(empty_cache_releases_only_its_own_devices_cache, context),
        PAIR_TEST(statistics_count_each_device_apart, context),
        PAIR_TEST(peers_use_blocks_after_growth_remap_and_stitching, context),
        PAIR_TEST(peer_access_does_not_depend_on_which_device_opened_first, context),
        PAIR_TEST(record_stream_waits_for_its_own_devices_stream, context),
    };
    char group[700];
    snprintf(group, sizeof group, "peers/%s on %s devices %d and %d", context->spec->label, test_device_kind,
             context->ordinals[0], context->ordinals[1]);
    print_message("[----------] %s\n", group);
    return cmocka_run_group_tests_name(group, tests, NULL, NULL);
}

int main(void)
{
    const char *kind = getenv("VB_TEST_DEVICE");
    if (kind && kind[0]) test_device_kind = kind;
    if (strcmp(test_device_kind, "sim") != 0 && strcmp(test_device_kind, "cuda") != 0) {
        fprintf(stderr, "test_peers: VB_TEST_DEVICE must be sim or cuda, not '%s'\n", test_device_kind);
        return 2;
    }
    int devices = device_count();
    if (devices < 0) return 2;
    int failed = 0;
    if (!on_gpu()) {
        const struct CMUnitTest sim_tests[] = {
            cmocka_unit_test(sim_peer_access_follows_the_machines_matrix),
            cmocka_unit_test(sim_devices_have_addresses_of_their_own),
            cmocka_unit_test(sim_peer_copy_needs_the_mapping_opened),
            cmocka_unit_test(sim_copies_between_devices_that_are_no_peers_are_staged),
            cmocka_unit_test(sim_machine_rejects_bad_devices),
        };
        failed += cmocka_run_group_tests_name("peers/the simulated machine", sim_tests, NULL, NULL);
    }
    if (devices < 2) {
        printf("test_peers: skipped: this machine has %d GPU; the properties across devices need two\n", devices);
        return failed ? 1 : 0;
    }
    const char *selection = getenv("VB_TEST_ALLOCATORS");
    vb_allocator_spec *specs = NULL;
    size_t spec_count = 0;
    const char *everything = "all,stitch[chunk_mb=2,handle_max_mb=4,stitch_max_maps=64]";
    if (vb_allocator_spec_list_parse(selection && selection[0] ? selection : everything, &specs, &spec_count) !=
        VB_OK) {
        fprintf(stderr, "test_peers: VB_TEST_ALLOCATORS: %s\n", vb_last_error());
        return 2;
    }
    for (size_t i = 0; i < spec_count; i++)
        for (int a = 0; a < devices; a++)
            for (int b = a + 1; b < devices; b++) {
                pair_context context = {&specs[i], {a, b}};
                failed += run_pair(&context);
            }
    vb_allocator_spec_list_free(specs, spec_count);
    return failed ? 1 : 0;
}
