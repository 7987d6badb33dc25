/* vrambench — unit tests of the simulated device (base/device_sim.c):
 * driver rounding, capacity and out-of-memory, determinism, streams and
 * events on the logical clock, and the virtual-memory rules. Expected
 * figures follow from docs/design.md's description of the sim. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "base/device.h"

#define MiB VB_MiB
#define GiB VB_GiB

/* ------------------------------------------------------------------------ */
/* Fixture: the devices a test opened, closed even when it fails             */
/* ------------------------------------------------------------------------ */

typedef struct opened {
    vb_device *devices[2];
    size_t count;
} opened;

/* An empty list of devices for the test to open. */
static int open_setup(void **state)
{
    *state = calloc(1, sizeof(opened));
    return *state ? 0 : -1;
}

/* Closes every device the test opened. */
static int open_teardown(void **state)
{
    opened *o = *state;
    for (size_t i = 0; i < o->count; i++) vb_device_close(o->devices[i]);
    free(o);
    return 0;
}

/* Opens a sim of `capacity` bytes (0 = default) that the teardown closes. */
static vb_device *open_sim(void **state, uint64_t capacity)
{
    opened *o = *state;
    assert_true(o->count < 2);
    vb_device *dev = NULL;
    assert_int_equal(vb_sim_open(capacity, &dev), VB_OK);
    o->devices[o->count++] = dev;
    return dev;
}

/* Bytes the sim says are used, by its mem_info. */
static uint64_t used_of(vb_device *dev)
{
    uint64_t free_bytes = 0, total_bytes = 0;
    assert_int_equal(dev->ops->mem_info(dev, &free_bytes, &total_bytes), VB_OK);
    assert_true(free_bytes <= total_bytes);
    return total_bytes - free_bytes;
}

/* A new stream on `dev` (closing the device frees it). */
static vb_stream new_stream(vb_device *dev)
{
    vb_stream stream = NULL;
    assert_int_equal(dev->ops->stream_create(dev, &stream), VB_OK);
    return stream;
}

/* A new event on `dev`, not yet recorded; the test destroys it. */
static vb_event new_event(vb_device *dev)
{
    vb_event event = NULL;
    assert_int_equal(dev->ops->event_create(dev, &event), VB_OK);
    return event;
}

/* A stream with `nanoseconds` of work queued and an event after it. */
static vb_event busy_event(vb_device *dev, vb_stream stream, uint64_t nanoseconds)
{
    assert_int_equal(dev->ops->enqueue_busy(dev, stream, nanoseconds), VB_OK);
    vb_event event = new_event(dev);
    assert_int_equal(dev->ops->event_record(dev, event, stream), VB_OK);
    return event;
}

/* ------------------------------------------------------------------------ */
/* Raw memory: rounding, capacity, errors                                    */
/* ------------------------------------------------------------------------ */

/* Driver allocations round up to 2 MiB: 1 B takes 2 MiB, 2 MiB takes 2 MiB,
 * 2 MiB + 1 takes 4 MiB, so 8 MiB in all; mem_info and vb_sim_used_bytes
 * agree, and freeing gives each rounded size back. */
static void mem_alloc_rounds_to_2_mib(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_addr a, b, c;
    assert_int_equal(dev->ops->mem_alloc(dev, 1, &a), VB_OK);
    assert_int_equal(used_of(dev), 2 * MiB);
    assert_int_equal(dev->ops->mem_alloc(dev, 2 * MiB, &b), VB_OK);
    assert_int_equal(used_of(dev), 4 * MiB);
    assert_int_equal(dev->ops->mem_alloc(dev, 2 * MiB + 1, &c), VB_OK);
    assert_int_equal(used_of(dev), 8 * MiB);
    assert_int_equal(vb_sim_used_bytes(dev), 8 * MiB);
    assert_int_equal(dev->ops->mem_free(dev, c), VB_OK);
    assert_int_equal(used_of(dev), 4 * MiB);
    assert_int_equal(dev->ops->mem_free(dev, a), VB_OK);
    assert_int_equal(dev->ops->mem_free(dev, b), VB_OK);
    assert_int_equal(used_of(dev), 0);
}

/* Zero bytes is not an allocation the driver makes. */
static void mem_alloc_of_zero_is_invalid(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_addr addr = 0;
    assert_int_equal(dev->ops->mem_alloc(dev, 0, &addr), VB_ERR_INVALID);
    assert_int_equal(used_of(dev), 0);
}

/* On a 64 MiB sim, 62 MiB + 2 MiB fill it exactly; one more byte (2 MiB
 * rounded) is out of memory and changes nothing; after a free it fits. */
static void mem_alloc_past_capacity_is_oom(void **state)
{
    vb_device *dev = open_sim(state, 64 * MiB);
    vb_addr big, small, extra;
    assert_int_equal(dev->ops->mem_alloc(dev, 62 * MiB, &big), VB_OK);
    assert_int_equal(dev->ops->mem_alloc(dev, 2 * MiB, &small), VB_OK);
    assert_int_equal(used_of(dev), 64 * MiB);
    assert_int_equal(dev->ops->mem_alloc(dev, 1, &extra), VB_ERR_OOM);
    assert_int_equal(used_of(dev), 64 * MiB);
    assert_int_equal(dev->ops->mem_free(dev, small), VB_OK);
    assert_int_equal(dev->ops->mem_alloc(dev, 1, &extra), VB_OK);
}

/* Sizes whose 2 MiB rounding would overflow, or that exceed any capacity,
 * are out of memory, not a wrapped small allocation. */
static void mem_alloc_of_absurd_size_is_oom(void **state)
{
    vb_device *dev = open_sim(state, 0);
    static const uint64_t sizes[] = {UINT64_MAX, UINT64_MAX - 2 * MiB + 2, UINT64_C(1) << 63};
    for (size_t i = 0; i < 3; i++) {
        vb_addr addr = 0;
        assert_int_equal(dev->ops->mem_alloc(dev, sizes[i], &addr), VB_ERR_OOM);
    }
    assert_int_equal(used_of(dev), 0);
}

/* The capacity is 80 GiB by default and whatever the opener sets, as
 * info, mem_info and vb_device_open with options all report. */
static void capacity_defaults_to_80_gib_and_is_settable(void **state)
{
    vb_device *default_sim = open_sim(state, 0);
    vb_device_info info;
    default_sim->ops->info(default_sim, &info);
    assert_int_equal(info.total_bytes, 80 * GiB);
    assert_int_equal(info.kind, VB_DEVICE_SIM);
    assert_int_equal(info.simulated, 1);

    opened *o = *state;
    vb_device_options options = {.sim_capacity_bytes = 3 * GiB};
    assert_int_equal(vb_device_open("sim", &options, &o->devices[o->count]), VB_OK);
    vb_device *small = o->devices[o->count++];
    uint64_t free_bytes = 0, total_bytes = 0;
    assert_int_equal(small->ops->mem_info(small, &free_bytes, &total_bytes), VB_OK);
    assert_int_equal(total_bytes, 3 * GiB);
    assert_int_equal(free_bytes, 3 * GiB);
    assert_true(vb_device_is_sim(small));
}

/* The most a sim device can have is VB_SIM_MAX_CAPACITY (56 TiB): at it,
 * expandable segments' reservation of 1.125 x the capacity still fits one
 * vm_reserve; past it, opening is refused naming the limit, and a
 * reservation past 64 TiB says so (not "not a multiple of 2 MiB"). */
static void capacity_past_the_sim_maximum_is_refused(void **state)
{
    vb_device *largest = open_sim(state, VB_SIM_MAX_CAPACITY);
    vb_addr range = 0;
    uint64_t reservation = VB_SIM_MAX_CAPACITY + VB_SIM_MAX_CAPACITY / 8;
    assert_int_equal(largest->ops->vm_reserve(largest, (reservation + 20 * MiB - 1) / (20 * MiB) * (20 * MiB), &range),
                     VB_OK);
    assert_int_equal(largest->ops->vm_reserve(largest, ((uint64_t)64 << 40) + 2 * MiB, &range), VB_ERR_INVALID);
    assert_non_null(strstr(vb_last_error(), "64 TiB"));
    vb_device *dev = NULL;
    vb_device_options options = {.sim_capacity_bytes = VB_SIM_MAX_CAPACITY + 1};
    vb_clear_error();
    assert_int_equal(vb_device_open("sim", &options, &dev), VB_ERR_INVALID);
    assert_null(dev);
    assert_non_null(strstr(vb_last_error(), VB_SIM_MAX_CAPACITY_TEXT));
    assert_int_equal(vb_sim_open(UINT64_MAX, &dev), VB_ERR_INVALID);
}

/* A name that is no device kind is invalid. */
static void device_open_of_unknown_kind_is_invalid(void **state)
{
    (void)state;
    vb_device *dev = NULL;
    assert_int_equal(vb_device_open("tpu", NULL, &dev), VB_ERR_INVALID);
}

/* Freeing an address never handed out, one inside a block, or one already
 * freed is invalid and gives nothing back. */
static void mem_free_of_unknown_address_is_invalid(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_addr a, b;
    assert_int_equal(dev->ops->mem_alloc(dev, 4 * MiB, &a), VB_OK);
    assert_int_equal(dev->ops->mem_alloc(dev, 2 * MiB, &b), VB_OK);
    assert_int_equal(dev->ops->mem_free(dev, 0x1234500), VB_ERR_INVALID);
    assert_int_equal(dev->ops->mem_free(dev, a + 2 * MiB), VB_ERR_INVALID);
    assert_int_equal(dev->ops->mem_free(dev, b), VB_OK);
    assert_int_equal(dev->ops->mem_free(dev, b), VB_ERR_INVALID);
    assert_int_equal(used_of(dev), 4 * MiB);
}

/* Blocks are aligned to 512 B (so to 256 B too) and never overlap while
 * live, and a freed block's address is handed out again, as the driver does
 * (base/device_sim_memory.c): 200 alloc/free pairs of 1 B each get one
 * address, at the start of a 2 MiB page; 200 live 3 MiB blocks never
 * overlap. (Until the sim modelled the driver's reuse, addresses were never
 * reused and this test asked for 200 distinct ones.) */
static void addresses_are_aligned_and_freed_ones_reused(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_addr first = 0;
    for (int i = 0; i < 200; i++) {
        vb_addr addr = 0;
        assert_int_equal(dev->ops->mem_alloc(dev, 1, &addr), VB_OK);
        assert_int_equal(addr % VB_DRIVER_PAGE, 0);
        if (i == 0) first = addr;
        assert_int_equal(addr, first);
        assert_int_equal(dev->ops->mem_free(dev, addr), VB_OK);
    }
    vb_addr live[200];
    for (int i = 0; i < 200; i++) {
        assert_int_equal(dev->ops->mem_alloc(dev, 3 * MiB, &live[i]), VB_OK);
        assert_int_equal(live[i] % VB_DRIVER_PAGE, 0);
        for (int j = 0; j < i; j++) assert_true(live[i] >= live[j] + 4 * MiB || live[j] >= live[i] + 4 * MiB);
    }
    for (int i = 0; i < 200; i++) assert_int_equal(dev->ops->mem_free(dev, live[i]), VB_OK);
    assert_int_equal(used_of(dev), 0);
}

/* The driver's small-block packing (H100: 64 x 40,000 B at a 40,448 B
 * stride, 51 in the first page, a second page for the 52nd; a page goes
 * back when its last block is freed). */
static void small_blocks_pack_into_shared_pages(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_addr blocks[64];
    for (int i = 0; i < 64; i++) {
        assert_int_equal(dev->ops->mem_alloc(dev, 40000, &blocks[i]), VB_OK);
        if (i > 0 && i < 51) assert_int_equal(blocks[i], blocks[0] + 40448 * (uint64_t)i);
        assert_int_equal(used_of(dev), (i < 51 ? 2 : 4) * MiB);
    }
    assert_int_equal(blocks[51] % VB_DRIVER_PAGE, 0);
    for (int i = 0; i < 64; i++) {
        assert_int_equal(dev->ops->mem_free(dev, blocks[i]), VB_OK);
        /* Freeing in order: the first page goes back with block 50, the second with block 63. */
        assert_int_equal(used_of(dev), (i < 50 ? 4 : i < 63 ? 2 : 0) * MiB);
    }
}

/* The driver's address reuse (H100): 8 MiB freed, then 8 MiB again gets
 * the same address; 8 MiB freed, then 4 MiB gets its start and another
 * 4 MiB start + 4 MiB. */
static void freed_ranges_are_reused_lowest_first(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_addr a, b, guard, c, d;
    assert_int_equal(dev->ops->mem_alloc(dev, 8 * MiB, &a), VB_OK);
    assert_int_equal(dev->ops->mem_alloc(dev, 2 * MiB, &guard), VB_OK); /* keeps a's range from the top */
    assert_int_equal(dev->ops->mem_free(dev, a), VB_OK);
    assert_int_equal(dev->ops->mem_alloc(dev, 8 * MiB, &b), VB_OK);
    assert_int_equal(b, a);
    assert_int_equal(dev->ops->mem_free(dev, b), VB_OK);
    assert_int_equal(dev->ops->mem_alloc(dev, 4 * MiB, &c), VB_OK);
    assert_int_equal(dev->ops->mem_alloc(dev, 4 * MiB, &d), VB_OK);
    assert_int_equal(c, a);
    assert_int_equal(d, a + 4 * MiB);
    assert_int_equal(used_of(dev), 10 * MiB);
}

/* Fresh addresses go below all others by default and above them placed
 * rising; freed ranges are reused lowest first either way; the placement
 * is fixed once cudaMalloc has handed out addresses. */
static void placement_orders_fresh_addresses(void **state)
{
    vb_device *down = open_sim(state, 0), *up = open_sim(state, 0);
    assert_int_equal(vb_sim_placement_of(down), VB_SIM_PLACE_TOP_DOWN);
    assert_int_equal(vb_sim_set_placement(up, VB_SIM_PLACE_RISING), VB_OK);
    assert_int_equal(vb_sim_placement_of(up), VB_SIM_PLACE_RISING);
    vb_device *devices[2] = {down, up};
    for (int i = 0; i < 2; i++) {
        vb_device *dev = devices[i];
        vb_addr first, second, third, again;
        assert_int_equal(dev->ops->mem_alloc(dev, 20 * MiB, &first), VB_OK);
        assert_int_equal(dev->ops->mem_alloc(dev, 20 * MiB, &second), VB_OK);
        assert_int_equal(dev->ops->mem_alloc(dev, 4 * MiB, &third), VB_OK);
        if (i == 0) assert_true(third < second && second < first);
        else assert_true(first < second && second < third);
        assert_int_equal(second > first ? second - first : first - second, 20 * MiB); /* adjacent */
        assert_int_equal(dev->ops->mem_free(dev, first), VB_OK);
        assert_int_equal(dev->ops->mem_free(dev, second), VB_OK);
        assert_int_equal(dev->ops->mem_alloc(dev, 8 * MiB, &again), VB_OK);
        assert_int_equal(again, first < second ? first : second); /* the freed range's start */
        assert_int_equal(vb_sim_owner(dev, again), 0); /* the machine knows whose memory it is */
        vb_clear_error();
        assert_int_equal(vb_sim_set_placement(dev, VB_SIM_PLACE_TOP_DOWN), VB_ERR_INVALID);
        assert_non_null(strstr(vb_last_error(), "first cudaMalloc"));
    }
}

/* ------------------------------------------------------------------------ */
/* Determinism                                                               */
/* ------------------------------------------------------------------------ */

/* Runs a fixed mix of allocations, frees, virtual memory and timed work on
 * `dev`, writing every address and figure it sees into `trace`. */
static size_t run_fixed_sequence(vb_device *dev, uint64_t *trace)
{
    size_t n = 0;
    vb_addr addrs[16];
    vb_stream stream = new_stream(dev);
    for (int i = 0; i < 16; i++) {
        assert_int_equal(dev->ops->mem_alloc(dev, (uint64_t)(i + 1) * 3 * MiB + 7, &addrs[i]), VB_OK);
        trace[n++] = addrs[i];
        assert_int_equal(dev->ops->enqueue_busy(dev, stream, (uint64_t)(i + 1) * 1000), VB_OK);
        if (i % 3 == 0) {
            assert_int_equal(dev->ops->mem_free(dev, addrs[i / 2]), VB_OK);
            addrs[i / 2] = 0;
        }
        trace[n++] = used_of(dev);
        trace[n++] = vb_sim_now(dev);
    }
    vb_addr range = 0;
    vb_phys handle = 0;
    assert_int_equal(dev->ops->vm_reserve(dev, 64 * MiB, &range), VB_OK);
    assert_int_equal(dev->ops->vm_create(dev, 4 * MiB, &handle), VB_OK);
    assert_int_equal(dev->ops->vm_map(dev, range + 2 * MiB, 4 * MiB, handle), VB_OK);
    trace[n++] = range;
    trace[n++] = handle;
    trace[n++] = used_of(dev);
    vb_sim_advance(dev, 12345);
    trace[n++] = vb_sim_now(dev);
    for (int i = 0; i < 16; i++)
        if (addrs[i]) assert_int_equal(dev->ops->mem_free(dev, addrs[i]), VB_OK);
    trace[n++] = vb_sim_now(dev);
    return n;
}

/* Two sims given the same calls hand out the same addresses and report the
 * same memory and clock figures. */
static void same_sequence_gives_same_addresses_and_figures(void **state)
{
    uint64_t first[128], second[128];
    size_t first_count = run_fixed_sequence(open_sim(state, 0), first);
    size_t second_count = run_fixed_sequence(open_sim(state, 0), second);
    assert_int_equal(first_count, second_count);
    assert_memory_equal(first, second, first_count * sizeof *first);
}

/* ------------------------------------------------------------------------ */
/* Streams and events on the logical clock                                   */
/* ------------------------------------------------------------------------ */

/* Work of 1000 ns completes exactly when the clock reaches its end: not
 * after 999 ns, but after one more. */
static void event_completes_when_the_clock_reaches_the_work_end(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_stream stream = new_stream(dev);
    vb_event done = busy_event(dev, stream, 1000);
    assert_false(dev->ops->event_query(dev, done));
    vb_sim_advance(dev, 999);
    assert_false(dev->ops->event_query(dev, done));
    vb_sim_advance(dev, 1);
    assert_true(dev->ops->event_query(dev, done));
    assert_int_equal(vb_sim_now(dev), 1000);
    dev->ops->event_destroy(dev, done);
}

/* Work on one stream runs in order: 1000 ns then 1000 ns end at 2000, so
 * after 1500 ns the second is still queued; completing the stream moves the
 * clock to 2000. */
static void work_on_one_stream_runs_in_order(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_stream stream = new_stream(dev);
    vb_event first = busy_event(dev, stream, 1000);
    vb_event second = busy_event(dev, stream, 1000);
    vb_sim_advance(dev, 1500);
    assert_true(dev->ops->event_query(dev, first));
    assert_false(dev->ops->event_query(dev, second));
    vb_sim_complete_stream(dev, stream);
    assert_true(dev->ops->event_query(dev, second));
    assert_int_equal(vb_sim_now(dev), 2000);
    dev->ops->event_destroy(dev, first);
    dev->ops->event_destroy(dev, second);
}

/* Streams run side by side: 1000 ns on A and 1000 ns on B both end at
 * 1000, so synchronizing the device moves the clock to 1000, not 2000. */
static void streams_run_concurrently(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_stream a = new_stream(dev), b = new_stream(dev);
    assert_int_equal(dev->ops->enqueue_busy(dev, a, 1000), VB_OK);
    assert_int_equal(dev->ops->enqueue_busy(dev, b, 1000), VB_OK);
    assert_int_equal(dev->ops->device_synchronize(dev), VB_OK);
    assert_int_equal(vb_sim_now(dev), 1000);
}

/* Synchronizing stream A (1000 ns) waits for A only: B's 5000 ns of work
 * is still queued at 1000; device_synchronize completes it at 5000. */
static void stream_synchronize_waits_for_that_stream_only(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_stream a = new_stream(dev), b = new_stream(dev);
    assert_int_equal(dev->ops->enqueue_busy(dev, a, 1000), VB_OK);
    vb_event b_done = busy_event(dev, b, 5000);
    assert_int_equal(dev->ops->stream_synchronize(dev, a), VB_OK);
    assert_int_equal(vb_sim_now(dev), 1000);
    assert_false(dev->ops->event_query(dev, b_done));
    assert_int_equal(dev->ops->device_synchronize(dev), VB_OK);
    assert_true(dev->ops->event_query(dev, b_done));
    assert_int_equal(vb_sim_now(dev), 5000);
    dev->ops->event_destroy(dev, b_done);
}

/* The default stream (NULL) is a stream like the others: its work is
 * waited for by device_synchronize. */
static void default_stream_work_is_synchronized(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_event done = busy_event(dev, NULL, 3000);
    assert_false(dev->ops->event_query(dev, done));
    assert_int_equal(dev->ops->device_synchronize(dev), VB_OK);
    assert_true(dev->ops->event_query(dev, done));
    assert_int_equal(vb_sim_now(dev), 3000);
    dev->ops->event_destroy(dev, done);
}

/* An event never recorded, or recorded on an idle stream, is complete. */
static void event_without_pending_work_is_complete(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_event never = new_event(dev);
    assert_true(dev->ops->event_query(dev, never));
    vb_event idle = new_event(dev);
    assert_int_equal(dev->ops->event_record(dev, idle, NULL), VB_OK);
    assert_true(dev->ops->event_query(dev, idle));
    dev->ops->event_destroy(dev, never);
    dev->ops->event_destroy(dev, idle);
}

/* Work queued on a stream that went idle starts now, not when the stream
 * last had work: after 10,000 ns idle, 1000 ns of work ends at 11,000. */
static void work_on_an_idle_stream_starts_now(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_stream stream = new_stream(dev);
    vb_sim_advance(dev, 10000);
    vb_event done = busy_event(dev, stream, 1000);
    assert_int_equal(dev->ops->event_synchronize(dev, done), VB_OK);
    assert_int_equal(vb_sim_now(dev), 11000);
    dev->ops->event_destroy(dev, done);
}

/* Elapsed time between two completed events is on the logical clock:
 * 2,000,000 ns of work between them is 2.0 ms. Before they complete it is
 * an error. */
static void event_elapsed_time_is_logical(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_stream stream = new_stream(dev);
    vb_event start = new_event(dev);
    assert_int_equal(dev->ops->event_record(dev, start, stream), VB_OK);
    vb_event end = busy_event(dev, stream, 2000000);
    double ms = -1;
    assert_int_equal(dev->ops->event_elapsed_ms(dev, start, end, &ms), VB_ERR_INVALID);
    assert_int_equal(dev->ops->event_synchronize(dev, end), VB_OK);
    assert_int_equal(dev->ops->event_elapsed_ms(dev, start, end, &ms), VB_OK);
    assert_true(ms == 2.0);
    dev->ops->event_destroy(dev, start);
    dev->ops->event_destroy(dev, end);
}

/* mem_free waits for the device, like cudaFree: work queued on any stream
 * has completed when it returns. */
static void mem_free_synchronizes_the_device(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_stream stream = new_stream(dev);
    vb_addr addr = 0;
    assert_int_equal(dev->ops->mem_alloc(dev, MiB, &addr), VB_OK);
    vb_event done = busy_event(dev, stream, 5000);
    assert_int_equal(dev->ops->mem_free(dev, addr), VB_OK);
    assert_true(dev->ops->event_query(dev, done));
    assert_int_equal(vb_sim_now(dev), 5000);
    dev->ops->event_destroy(dev, done);
}

/* A failed mem_free (unknown address) does not synchronize: the queued
 * work is still pending afterwards. */
static void failed_mem_free_does_not_synchronize(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_event done = busy_event(dev, NULL, 5000);
    assert_int_equal(dev->ops->mem_free(dev, 0x4200000), VB_ERR_INVALID);
    assert_false(dev->ops->event_query(dev, done));
    dev->ops->event_destroy(dev, done);
}

/* ------------------------------------------------------------------------ */
/* Virtual memory                                                            */
/* ------------------------------------------------------------------------ */

/* The mapping granularity is the driver page, 2 MiB. */
static void vm_granularity_is_2_mib(void **state)
{
    vb_device *dev = open_sim(state, 0);
    assert_int_equal(dev->ops->vm_granularity(dev), 2 * MiB);
}

/* Reserving address space takes no memory; sizes must be positive
 * multiples of 2 MiB; reservations are disjoint and do not touch. */
static void vm_reserve_rules(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_addr first = 0, second = 0, bad = 0;
    assert_int_equal(dev->ops->vm_reserve(dev, 0, &bad), VB_ERR_INVALID);
    assert_int_equal(dev->ops->vm_reserve(dev, 3 * MiB, &bad), VB_ERR_INVALID);
    assert_int_equal(dev->ops->vm_reserve(dev, 64 * MiB, &first), VB_OK);
    assert_int_equal(dev->ops->vm_reserve(dev, 2 * MiB, &second), VB_OK);
    assert_int_equal(first % (2 * MiB), 0);
    assert_true(second > first + 64 * MiB || second + 2 * MiB < first);
    assert_int_equal(used_of(dev), 0);
}

/* Physical memory counts against the capacity from vm_create to
 * vm_release; sizes must be multiples of 2 MiB; past capacity is OOM. */
static void vm_create_takes_memory_until_released(void **state)
{
    vb_device *dev = open_sim(state, 8 * MiB);
    vb_phys a = 0, b = 0, bad = 0;
    assert_int_equal(dev->ops->vm_create(dev, 3 * MiB, &bad), VB_ERR_INVALID);
    assert_int_equal(dev->ops->vm_create(dev, 0, &bad), VB_ERR_INVALID);
    assert_int_equal(dev->ops->vm_create(dev, 6 * MiB, &a), VB_OK);
    assert_int_equal(used_of(dev), 6 * MiB);
    assert_int_equal(dev->ops->vm_create(dev, 4 * MiB, &bad), VB_ERR_OOM);
    assert_int_equal(dev->ops->vm_create(dev, 2 * MiB, &b), VB_OK);
    assert_int_equal(dev->ops->vm_release(dev, a), VB_OK);
    assert_int_equal(used_of(dev), 2 * MiB);
    assert_int_equal(dev->ops->vm_release(dev, a), VB_ERR_INVALID); /* released already */
    assert_int_equal(dev->ops->vm_release(dev, b), VB_OK);
    assert_int_equal(used_of(dev), 0);
}

/* vm_map maps a whole handle at a granular address inside a reservation,
 * never over another mapping; everything else is invalid. */
static void vm_map_rules(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_addr range = 0;
    vb_phys four = 0, two = 0;
    assert_int_equal(dev->ops->vm_reserve(dev, 16 * MiB, &range), VB_OK);
    assert_int_equal(dev->ops->vm_create(dev, 4 * MiB, &four), VB_OK);
    assert_int_equal(dev->ops->vm_create(dev, 2 * MiB, &two), VB_OK);
    assert_int_equal(dev->ops->vm_map(dev, range + 14 * MiB, 4 * MiB, four), VB_ERR_INVALID); /* runs past the end */
    assert_int_equal(dev->ops->vm_map(dev, range - 2 * MiB, 2 * MiB, two), VB_ERR_INVALID);   /* before it */
    assert_int_equal(dev->ops->vm_map(dev, range + 1, 2 * MiB, two), VB_ERR_INVALID);         /* not granular */
    assert_int_equal(dev->ops->vm_map(dev, range, 2 * MiB, four), VB_ERR_INVALID);            /* part of a handle */
    assert_int_equal(dev->ops->vm_map(dev, range, 2 * MiB, 999), VB_ERR_INVALID);             /* unknown handle */
    assert_int_equal(dev->ops->vm_map(dev, range + 2 * MiB, 4 * MiB, four), VB_OK);
    assert_int_equal(dev->ops->vm_map(dev, range + 4 * MiB, 2 * MiB, two), VB_ERR_INVALID);   /* over [2, 6) MiB */
    assert_int_equal(dev->ops->vm_map(dev, range, 2 * MiB, two), VB_OK);                      /* right before it */
    assert_int_equal(dev->ops->vm_unmap(dev, range, 2 * MiB), VB_OK);
    assert_int_equal(dev->ops->vm_unmap(dev, range + 2 * MiB, 4 * MiB), VB_OK);
}

/* vm_unmap takes whole mappings only, once, and waits for the device's
 * queued work first. */
static void vm_unmap_rules(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_addr range = 0;
    vb_phys handle = 0;
    assert_int_equal(dev->ops->vm_reserve(dev, 16 * MiB, &range), VB_OK);
    assert_int_equal(dev->ops->vm_create(dev, 4 * MiB, &handle), VB_OK);
    assert_int_equal(dev->ops->vm_map(dev, range, 4 * MiB, handle), VB_OK);
    assert_int_equal(dev->ops->vm_unmap(dev, range, 2 * MiB), VB_ERR_INVALID);           /* half of it */
    assert_int_equal(dev->ops->vm_unmap(dev, range + 2 * MiB, 2 * MiB), VB_ERR_INVALID); /* the other half */
    vb_event done = busy_event(dev, NULL, 7000);
    assert_int_equal(dev->ops->vm_unmap(dev, range, 4 * MiB), VB_OK);
    assert_true(dev->ops->event_query(dev, done));
    assert_int_equal(dev->ops->vm_unmap(dev, range, 4 * MiB), VB_ERR_INVALID); /* twice */
    dev->ops->event_destroy(dev, done);
}

/* One vm_unmap may take several adjacent whole mappings, not a part of
 * one: [2, 8) MiB is mappings of 4 and 2 MiB, [0, 2) a third. A range
 * ending inside a mapping or covering an unmapped page changes nothing. */
static void vm_unmap_spans_whole_mappings(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_addr range = 0;
    vb_phys four = 0, two = 0, other = 0;
    assert_int_equal(dev->ops->vm_reserve(dev, 16 * MiB, &range), VB_OK);
    assert_int_equal(dev->ops->vm_create(dev, 4 * MiB, &four), VB_OK);
    assert_int_equal(dev->ops->vm_create(dev, 2 * MiB, &two), VB_OK);
    assert_int_equal(dev->ops->vm_create(dev, 2 * MiB, &other), VB_OK);
    assert_int_equal(dev->ops->vm_map(dev, range, 2 * MiB, other), VB_OK);
    assert_int_equal(dev->ops->vm_map(dev, range + 2 * MiB, 4 * MiB, four), VB_OK);
    assert_int_equal(dev->ops->vm_map(dev, range + 6 * MiB, 2 * MiB, two), VB_OK);
    assert_int_equal(dev->ops->vm_unmap(dev, range + 2 * MiB, 4 * MiB + 2 * MiB + 2 * MiB), VB_ERR_INVALID); /* past */
    assert_int_equal(dev->ops->vm_unmap(dev, range, 4 * MiB), VB_ERR_INVALID); /* ends inside `four` */
    assert_int_equal(dev->ops->vm_release(dev, four), VB_ERR_INVALID);         /* still mapped */
    assert_int_equal(dev->ops->vm_unmap(dev, range + 2 * MiB, 6 * MiB), VB_OK);
    assert_int_equal(dev->ops->vm_release(dev, four), VB_OK);
    assert_int_equal(dev->ops->vm_release(dev, two), VB_OK);
    assert_int_equal(dev->ops->vm_unmap(dev, range, 2 * MiB), VB_OK);
    assert_int_equal(dev->ops->vm_release(dev, other), VB_OK);
    assert_int_equal(used_of(dev), 0);
}

/* Mapped memory is not accessible until vm_set_access covers it; one call
 * may cover several mappings, none of the range may be unmapped; unmapping
 * takes the access away with the mapping. */
static void vm_set_access_rules(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_addr range = 0;
    vb_phys a = 0, b = 0;
    assert_int_equal(dev->ops->vm_reserve(dev, 16 * MiB, &range), VB_OK);
    assert_int_equal(dev->ops->vm_create(dev, 4 * MiB, &a), VB_OK);
    assert_int_equal(dev->ops->vm_create(dev, 2 * MiB, &b), VB_OK);
    assert_int_equal(dev->ops->vm_map(dev, range, 4 * MiB, a), VB_OK);
    assert_int_equal(dev->ops->vm_map(dev, range + 4 * MiB, 2 * MiB, b), VB_OK);
    assert_false(vb_sim_accessible(dev, range, 1));
    assert_int_equal(dev->ops->vm_set_access(dev, range, 8 * MiB), VB_ERR_INVALID); /* [6, 8) unmapped */
    assert_false(vb_sim_accessible(dev, range, 1));
    assert_int_equal(dev->ops->vm_set_access(dev, range + 1, 2 * MiB), VB_ERR_INVALID); /* not granular */
    assert_int_equal(dev->ops->vm_set_access(dev, range, 6 * MiB), VB_OK);
    assert_true(vb_sim_accessible(dev, range, 6 * MiB));
    assert_false(vb_sim_accessible(dev, range, 6 * MiB + 1));
    assert_int_equal(dev->ops->vm_unmap(dev, range + 4 * MiB, 2 * MiB), VB_OK);
    assert_false(vb_sim_accessible(dev, range + 4 * MiB, 1));
    assert_int_equal(dev->ops->vm_map(dev, range + 4 * MiB, 2 * MiB, b), VB_OK);
    assert_false(vb_sim_accessible(dev, range + 4 * MiB, 1)); /* a new mapping needs access again */
    assert_true(vb_sim_accessible(dev, range, 4 * MiB));
    assert_int_equal(dev->ops->vm_unmap(dev, range, 6 * MiB), VB_OK);
}

/* Physical memory that is mapped cannot be released, nor its reservation
 * freed; after unmapping both work and nothing is held. */
static void vm_release_and_free_refuse_mapped_memory(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_addr range = 0;
    vb_phys handle = 0;
    assert_int_equal(dev->ops->vm_reserve(dev, 8 * MiB, &range), VB_OK);
    assert_int_equal(dev->ops->vm_create(dev, 2 * MiB, &handle), VB_OK);
    assert_int_equal(dev->ops->vm_map(dev, range + 6 * MiB, 2 * MiB, handle), VB_OK);
    assert_int_equal(dev->ops->vm_release(dev, handle), VB_ERR_INVALID);
    assert_int_equal(dev->ops->vm_free(dev, range, 8 * MiB), VB_ERR_INVALID);
    assert_int_equal(used_of(dev), 2 * MiB);
    assert_int_equal(dev->ops->vm_unmap(dev, range + 6 * MiB, 2 * MiB), VB_OK);
    assert_int_equal(dev->ops->vm_release(dev, handle), VB_OK);
    assert_int_equal(dev->ops->vm_free(dev, range, 8 * MiB), VB_OK);
    assert_int_equal(used_of(dev), 0);
}

/* vm_free needs exactly a reservation (address and size), once. */
static void vm_free_of_unknown_reservation_is_invalid(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_addr range = 0;
    assert_int_equal(dev->ops->vm_reserve(dev, 8 * MiB, &range), VB_OK);
    assert_int_equal(dev->ops->vm_free(dev, range, 4 * MiB), VB_ERR_INVALID);
    assert_int_equal(dev->ops->vm_free(dev, range + 2 * MiB, 6 * MiB), VB_ERR_INVALID);
    assert_int_equal(dev->ops->vm_free(dev, range, 8 * MiB), VB_OK);
    assert_int_equal(dev->ops->vm_free(dev, range, 8 * MiB), VB_ERR_INVALID);
}

/* The same handle mapped in two places counts once against the capacity
 * (physical memory is what is held) and must be unmapped from both before
 * it can be released. */
static void one_handle_mapped_twice_counts_once(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_addr range = 0;
    vb_phys handle = 0;
    assert_int_equal(dev->ops->vm_reserve(dev, 8 * MiB, &range), VB_OK);
    assert_int_equal(dev->ops->vm_create(dev, 2 * MiB, &handle), VB_OK);
    assert_int_equal(dev->ops->vm_map(dev, range, 2 * MiB, handle), VB_OK);
    assert_int_equal(dev->ops->vm_map(dev, range + 4 * MiB, 2 * MiB, handle), VB_OK);
    assert_int_equal(used_of(dev), 2 * MiB);
    assert_int_equal(dev->ops->vm_unmap(dev, range, 2 * MiB), VB_OK);
    assert_int_equal(dev->ops->vm_release(dev, handle), VB_ERR_INVALID);
    assert_int_equal(dev->ops->vm_unmap(dev, range + 4 * MiB, 2 * MiB), VB_OK);
    assert_int_equal(dev->ops->vm_release(dev, handle), VB_OK);
    assert_int_equal(used_of(dev), 0);
}

/* Reserved address space never overlaps what mem_alloc hands out, so an
 * allocator mixing both cannot get one address twice. */
static void vm_ranges_do_not_overlap_mem_alloc(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_addr range = 0, block = 0;
    assert_int_equal(dev->ops->vm_reserve(dev, 1024 * MiB, &range), VB_OK);
    assert_int_equal(dev->ops->mem_alloc(dev, 1024 * MiB, &block), VB_OK);
    assert_true(block >= range + 1024 * MiB || block + 1024 * MiB <= range);
}

/* ------------------------------------------------------------------------ */
/* Data                                                                      */
/* ------------------------------------------------------------------------ */

/* Sim memory holds no bytes: reading a pattern back is unsupported, with a
 * message, while writing one is modelled work. */
static void verify_pattern_is_unsupported(void **state)
{
    vb_device *dev = open_sim(state, 0);
    vb_addr addr = 0;
    uint64_t mismatched = 0;
    assert_int_equal(dev->ops->mem_alloc(dev, MiB, &addr), VB_OK);
    assert_int_equal(dev->ops->fill_pattern(dev, NULL, addr, MiB, 1), VB_OK);
    vb_clear_error();
    assert_int_equal(dev->ops->verify_pattern(dev, addr, MiB, 1, &mismatched), VB_ERR_UNSUPPORTED);
    assert_true(vb_last_error()[0] != '\0');
}

#define SIM_TEST(function) cmocka_unit_test_setup_teardown(function, open_setup, open_teardown)

/* Runs every sim device test. */
int main(void)
{
    const struct CMUnitTest tests[] = {
        SIM_TEST(mem_alloc_rounds_to_2_mib),
        SIM_TEST(mem_alloc_of_zero_is_invalid),
        SIM_TEST(mem_alloc_past_capacity_is_oom),
        SIM_TEST(mem_alloc_of_absurd_size_is_oom),
        SIM_TEST(capacity_defaults_to_80_gib_and_is_settable),
        SIM_TEST(capacity_past_the_sim_maximum_is_refused),
        SIM_TEST(device_open_of_unknown_kind_is_invalid),
        SIM_TEST(mem_free_of_unknown_address_is_invalid),
        SIM_TEST(addresses_are_aligned_and_freed_ones_reused),
        SIM_TEST(small_blocks_pack_into_shared_pages),
        SIM_TEST(freed_ranges_are_reused_lowest_first),
        SIM_TEST(placement_orders_fresh_addresses),
        SIM_TEST(same_sequence_gives_same_addresses_and_figures),
        SIM_TEST(event_completes_when_the_clock_reaches_the_work_end),
        SIM_TEST(work_on_one_stream_runs_in_order),
        SIM_TEST(streams_run_concurrently),
        SIM_TEST(stream_synchronize_waits_for_that_stream_only),
        SIM_TEST(default_stream_work_is_synchronized),
        SIM_TEST(event_without_pending_work_is_complete),
        SIM_TEST(work_on_an_idle_stream_starts_now),
        SIM_TEST(event_elapsed_time_is_logical),
        SIM_TEST(mem_free_synchronizes_the_device),
        SIM_TEST(failed_mem_free_does_not_synchronize),
        SIM_TEST(vm_granularity_is_2_mib),
        SIM_TEST(vm_reserve_rules),
        SIM_TEST(vm_create_takes_memory_until_released),
        SIM_TEST(vm_map_rules),
        SIM_TEST(vm_unmap_rules),
        SIM_TEST(vm_unmap_spans_whole_mappings),
        SIM_TEST(vm_set_access_rules),
        SIM_TEST(vm_release_and_free_refuse_mapped_memory),
        SIM_TEST(vm_free_of_unknown_reservation_is_invalid),
        SIM_TEST(one_handle_mapped_twice_counts_once),
        SIM_TEST(vm_ranges_do_not_overlap_mem_alloc),
        SIM_TEST(verify_pattern_is_unsupported),
    };
    return cmocka_run_group_tests_name("sim_device", tests, NULL, NULL);
}
