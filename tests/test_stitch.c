/* vrambench — unit tests of `stitch` (virtual-memory stitching, GMLake-style)
 * on the simulated device (2 MiB mapping granularity).
 *
 * Every expected number is worked out in the comments from the rules of
 * allocators/stitch.c, with the default options (2 MiB chunks, reuse slack
 * 25% and 20 MiB):
 *   small:  a request of at most 1 MiB (half a chunk) is rounded to 512 B and
 *           carved, best fit, out of a one-chunk small segment of its stream;
 *   large:  a larger request takes ceil(size / 2 MiB) chunks, one range;
 *   reuse:  the best-fit idle range of the stream serves it whole when at most
 *           min(25% of the rounded size, 20 MiB) larger; up to twice the
 *           rounded size it is shrunk (its tail unmapped); else the largest
 *           smaller idle range of the stream grows in place if its
 *           reservation (the size it was built for, rounded up to a power of
 *           two of chunks) has room, or a new range is built;
 *   chunks: a range grows or is built from unmapped chunks, then the excess
 *           chunks of used ranges, then the tails of idle ranges (oldest
 *           first), and only then vm_create, one call per chunk.
 * vm_map and vm_unmap calls are counted by a proxy of the sim's ops table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "allocators/allocator.h"
#include "alloc_fixture.h"

#define MiB VB_MiB

/* ------------------------------------------------------------------------ */
/* A sim whose vm_map / vm_unmap calls are counted                           */
/* ------------------------------------------------------------------------ */

/* The sim's ops reach their state through dev->state only, so a device with
 * the sim's state and a copy of its ops table behaves as the sim itself. */
static vb_device counted_device;
static vb_device_ops counted_ops;
static const vb_device_ops *sim_ops;
static uint64_t map_calls, unmap_calls;

static vb_status counted_vm_map(vb_device *dev, vb_addr addr, uint64_t size, vb_phys handle)
{
    map_calls++;
    return sim_ops->vm_map(dev, addr, size, handle);
}

static vb_status counted_vm_unmap(vb_device *dev, vb_addr addr, uint64_t size)
{
    unmap_calls++;
    return sim_ops->vm_unmap(dev, addr, size);
}

/* `stitch` (default options) on a sim of `capacity` bytes (0: 80 GiB) seen
 * through the counting proxy; the counts start at 0. */
static vb_alloc_fixture *open_stitch(uint64_t capacity)
{
    vb_alloc_fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(vb_sim_open(capacity, &f->dev), VB_OK);
    sim_ops = f->dev->ops;
    counted_ops = *sim_ops;
    counted_ops.vm_map = counted_vm_map;
    counted_ops.vm_unmap = counted_vm_unmap;
    counted_device.ops = &counted_ops;
    counted_device.state = f->dev->state;
    map_calls = unmap_calls = 0;
    assert_int_equal(vb_allocator_create("stitch", &counted_device, NULL, &f->alloc), VB_OK);
    return f;
}

/* ------------------------------------------------------------------------ */
/* Fragmentation: free memory in non-adjacent pieces                         */
/* ------------------------------------------------------------------------ */

/* Peak reserved bytes of the stranding sequence on `name`:
 *   a..e = 20 MiB each (live together, 100 MiB); free a, c, e (60 MiB free
 *   in three pieces, each between live blocks); f = 60 MiB.
 * caching: 20 MiB >= 10 MiB is its own segment rounded to 2 MiB, so five
 *   20 MiB segments (100). The free 20 MiB blocks cannot hold 60: a new
 *   60 MiB segment. Peak 100 + 60 = 160 MiB.
 * expandable: one range, 20 MiB chunks: a..e map chunks 0-4 (100). f finds
 *   no free block of 60; the free block e at the mapped end [80,100) grows
 *   by two chunks into [80,140). Peak 140 MiB; a and c stay stranded.
 * stitch: a..e are five ranges of 10 chunks (50 vm_create, 100). f needs 30
 *   chunks: no idle range is large enough, and none can grow (reservations
 *   of 16 chunks < 30), so a new range is built from the 30 idle chunks of
 *   a, c and e, unmapped and mapped again. Peak 100 MiB. */
static uint64_t stranding_sequence_peak(vb_alloc_fixture *f)
{
    vb_addr block[5];
    for (int i = 0; i < 5; i++) block[i] = vb_must_malloc(f, 20 * MiB);
    vb_must_free(f, block[0]);
    vb_must_free(f, block[2]);
    vb_must_free(f, block[4]);
    vb_must_malloc(f, 60 * MiB);
    uint64_t peak = vb_fixture_stats(f).reserved_bytes_peak;
    vb_fixture_close(f);
    return peak;
}

static void test_caching_strands_the_free_pieces_peak_160mib(void **state)
{
    (void)state;
    assert_int_equal(stranding_sequence_peak(vb_fixture_open("caching", 0, NULL)), 160 * MiB);
}

static void test_expandable_strands_the_inner_pieces_peak_140mib(void **state)
{
    (void)state;
    assert_int_equal(stranding_sequence_peak(vb_fixture_open("expandable", 0, NULL)), 140 * MiB);
}

static void test_stitch_serves_the_big_request_from_the_pieces_peak_100mib(void **state)
{
    (void)state;
    assert_int_equal(stranding_sequence_peak(open_stitch(0)), 100 * MiB);
}

/* The same sequence's driver calls: 50 chunks created for a..e, none for f,
 * which maps the 30 chunks it took from a, c and e (30 unmaps, 30 maps). */
static void test_stitched_request_takes_no_new_device_memory(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_addr block[5];
    for (int i = 0; i < 5; i++) block[i] = vb_must_malloc(f, 20 * MiB);
    vb_must_free(f, block[0]);
    vb_must_free(f, block[2]);
    vb_must_free(f, block[4]);
    vb_must_malloc(f, 60 * MiB);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.driver_alloc_calls, 50);
    assert_int_equal(stats.driver_free_calls, 0);
    assert_int_equal(unmap_calls, 30);
    assert_int_equal(map_calls, 50 + 30);
    vb_fixture_close(f);
}

/* After a, c, e are freed, all 60 MiB free are one stitchable block:
 * the stats say free 60 MiB, largest 60 MiB (caching would say 20). */
static void test_largest_free_block_is_every_idle_chunk(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_addr block[5];
    for (int i = 0; i < 5; i++) block[i] = vb_must_malloc(f, 20 * MiB);
    vb_must_free(f, block[0]);
    vb_must_free(f, block[2]);
    vb_must_free(f, block[4]);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.free_cached_bytes, 60 * MiB);
    assert_int_equal(stats.largest_free_block, 60 * MiB);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Reuse of cached ranges                                                    */
/* ------------------------------------------------------------------------ */

/* 100 MiB = 50 chunks, 50 maps. Freed, it serves 90 MiB (45 chunks): 10
 * chunks more is 20 MiB <= min(25% of 90, 20) = 20 MiB, so the whole range
 * is handed out again: same address, no map, allocated 100 MiB. */
static void test_cached_range_is_reused_without_vm_map(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_addr first = vb_must_malloc(f, 100 * MiB);
    vb_must_free(f, first);
    assert_int_equal(map_calls, 50);
    vb_addr again = vb_must_malloc(f, 90 * MiB);
    assert_int_equal(again, first);
    assert_int_equal(map_calls, 50);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.driver_alloc_calls, 50);
    assert_int_equal(stats.allocated_bytes, 100 * MiB);
    assert_int_equal(stats.requested_bytes, 90 * MiB);
    vb_fixture_close(f);
}

/* A 100 MiB range for 60 MiB: 40 MiB more than 60 > min(15, 20) MiB of
 * slack, but <= 60: the range is shrunk to 30 chunks by unmapping its last
 * 20; no map. Allocated 60 MiB, reserved still 100 MiB. */
static void test_range_too_large_by_less_than_the_request_is_shrunk(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_addr first = vb_must_malloc(f, 100 * MiB);
    vb_must_free(f, first);
    assert_int_equal(vb_must_malloc(f, 60 * MiB), first);
    assert_int_equal(map_calls, 50);
    assert_int_equal(unmap_calls, 20);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.allocated_bytes, 60 * MiB);
    assert_int_equal(stats.reserved_bytes, 100 * MiB);
    vb_fixture_close(f);
}

/* A 100 MiB range for 40 MiB: 60 MiB more is more than the request, so the
 * range stays cached and a new 20-chunk range is stitched from its last 20
 * chunks: 20 unmaps, 20 maps, no vm_create; two segments, 60 MiB idle and
 * 40 MiB in use. */
static void test_range_more_than_twice_the_request_gives_its_tail(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_addr first = vb_must_malloc(f, 100 * MiB);
    vb_must_free(f, first);
    vb_addr second = vb_must_malloc(f, 40 * MiB);
    assert_true(second != first);
    assert_int_equal(unmap_calls, 20);
    assert_int_equal(map_calls, 50 + 20);
    assert_int_equal(vb_fixture_stats(f).driver_alloc_calls, 50);
    vb_block_list list = vb_fixture_blocks(f);
    assert_int_equal(list.count, 2);
    uint64_t idle = list.blocks[0].allocated ? list.blocks[1].block_size : list.blocks[0].block_size;
    uint64_t used = list.blocks[0].allocated ? list.blocks[0].block_size : list.blocks[1].block_size;
    assert_int_equal(idle, 60 * MiB);
    assert_int_equal(used, 40 * MiB);
    vb_fixture_close(f);
}

/* 20 MiB = 10 chunks in a reservation of 16. Freed, a 30 MiB request (15
 * chunks) finds no idle range that large; the 20 MiB one grows in place by
 * 5 chunks: same address, 15 maps and 15 chunks created in all. */
static void test_idle_range_grows_in_place(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_addr first = vb_must_malloc(f, 20 * MiB);
    vb_must_free(f, first);
    assert_int_equal(vb_must_malloc(f, 30 * MiB), first);
    assert_int_equal(map_calls, 15);
    assert_int_equal(unmap_calls, 0);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.driver_alloc_calls, 15);
    assert_int_equal(stats.reserved_bytes, 30 * MiB);
    vb_fixture_close(f);
}

/* A 40 MiB range (20 chunks) serves 34 MiB (17 chunks): 6 MiB more is
 * within min(8.5, 20) MiB of slack, so it is handed out whole (allocated
 * 40 MiB) with 3 excess chunks. A 6 MiB request (3 chunks) then takes those
 * 3 chunks (3 unmaps) instead of device memory: reserved stays 40 MiB,
 * allocated is 34 + 6 = 40 MiB, still 20 chunks created. */
static void test_reuse_slack_is_taken_back_before_device_memory(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_must_free(f, vb_must_malloc(f, 40 * MiB));
    vb_must_malloc(f, 34 * MiB);
    assert_int_equal(vb_fixture_stats(f).allocated_bytes, 40 * MiB);
    vb_must_malloc(f, 6 * MiB);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(unmap_calls, 3);
    assert_int_equal(stats.reserved_bytes, 40 * MiB);
    assert_int_equal(stats.allocated_bytes, 40 * MiB);
    assert_int_equal(stats.driver_alloc_calls, 20);
    vb_fixture_close(f);
}

/* An idle range is reused whole only by its own stream: 20 MiB freed on
 * stream A, 20 MiB asked on stream B gets a new range stitched from A's 10
 * chunks (10 unmaps; vm_unmap waits for A's work), no new device memory. */
static void test_idle_range_of_another_stream_is_stitched_not_reused(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_stream a = vb_fixture_stream(f), b = vb_fixture_stream(f);
    vb_addr on_a = vb_must_malloc_on(f, 20 * MiB, a);
    vb_must_free(f, on_a);
    assert_true(vb_must_malloc_on(f, 20 * MiB, b) != on_a);
    assert_int_equal(unmap_calls, 10);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.driver_alloc_calls, 10);
    assert_int_equal(stats.reserved_bytes, 20 * MiB);
    vb_fixture_close(f);
}

/* A range freed after record_stream on a busy stream is held, neither
 * reused nor stitched: a second 20 MiB takes 10 new chunks (reserved 40). */
static void test_range_held_for_record_stream_is_not_stitched(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_addr held = vb_must_malloc(f, 20 * MiB);
    vb_free_while_used_on_busy_stream(f, held, 1000000);
    assert_true(vb_must_malloc(f, 20 * MiB) != held);
    assert_int_equal(unmap_calls, 0);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 40 * MiB);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Small requests                                                            */
/* ------------------------------------------------------------------------ */

/* 1000 B -> 1024, 3000 B -> 3072 and 1 MiB share one 2 MiB small segment:
 * reserved 2 MiB, allocated 1 MiB + 4 KiB, one segment. */
static void test_small_requests_share_one_chunk(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_must_malloc(f, 1000);
    vb_must_malloc(f, 3000);
    vb_must_malloc(f, MiB);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.reserved_bytes, 2 * MiB);
    assert_int_equal(stats.allocated_bytes, MiB + 4096);
    vb_block_list list = vb_fixture_blocks(f);
    assert_int_equal(vb_block_list_segment_count(&list), 1);
    vb_fixture_close(f);
}

/* 1 MiB + 1 B is more than half a chunk: a one-chunk range, allocated 2 MiB. */
static void test_just_over_half_a_chunk_is_a_range(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_must_malloc(f, MiB + 1);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.allocated_bytes, 2 * MiB);
    assert_int_equal(stats.reserved_bytes, 2 * MiB);
    vb_fixture_close(f);
}

/* Three 512 KiB pieces freed middle first then the sides coalesce: the
 * segment shows one free block of 2 MiB. */
static void test_small_pieces_coalesce_when_freed(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_addr piece[3];
    for (int i = 0; i < 3; i++) piece[i] = vb_must_malloc(f, 512 * 1024);
    vb_must_free(f, piece[1]);
    vb_must_free(f, piece[0]);
    vb_must_free(f, piece[2]);
    vb_block_list list = vb_fixture_blocks(f);
    assert_int_equal(list.count, 1);
    assert_int_equal(list.blocks[0].block_size, 2 * MiB);
    assert_int_equal(list.blocks[0].allocated, 0);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* empty_cache                                                               */
/* ------------------------------------------------------------------------ */

/* Small pieces, ranges, a shrunk and a grown range, all freed: empty_cache
 * releases every chunk it created and the sim holds nothing. */
static void test_empty_cache_returns_reserved_to_zero(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_must_free(f, vb_must_malloc(f, 100 * MiB));
    vb_addr shrunk = vb_must_malloc(f, 60 * MiB);
    vb_addr small = vb_must_malloc(f, 4096);
    vb_addr other = vb_must_malloc(f, 30 * MiB);
    vb_must_free(f, shrunk);
    vb_must_free(f, small);
    vb_must_free(f, other);
    assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.reserved_bytes, 0);
    assert_int_equal(stats.driver_free_calls, stats.driver_alloc_calls);
    assert_int_equal(vb_sim_used_bytes(f->dev), 0);
    vb_fixture_close(f);
}

/* What is in use stays: a live 4 KiB piece keeps its 2 MiB segment, a live
 * 10 MiB range its 5 chunks; the freed 50 MiB goes. Reserved 12 MiB. */
static void test_empty_cache_keeps_chunks_in_use(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_must_malloc(f, 4096);
    vb_must_malloc(f, 10 * MiB);
    vb_must_free(f, vb_must_malloc(f, 50 * MiB));
    assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 12 * MiB);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Out of memory                                                             */
/* ------------------------------------------------------------------------ */

/* On a 64 MiB sim, 40 MiB (20 chunks) is freed while another stream uses
 * it (held). Another 40 MiB: no idle chunk, so 20 are asked of the device,
 * which has 24 MiB = 12 left: the 13th vm_create fails, the 12 go back,
 * the malloc waits for the held range and tries again (alloc_retries 1),
 * and the range, idle now, serves it: same address, no oom. Driver calls:
 * 20 + 13 created, 12 released. */
static void test_oom_waits_for_held_blocks_and_retries(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(64 * MiB);
    vb_addr held = vb_must_malloc(f, 40 * MiB);
    vb_free_while_used_on_busy_stream(f, held, 1000000);
    assert_int_equal(vb_must_malloc(f, 40 * MiB), held);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.alloc_retries, 1);
    assert_int_equal(stats.ooms, 0);
    assert_int_equal(stats.driver_alloc_calls, 33);
    assert_int_equal(stats.driver_free_calls, 12);
    assert_int_equal(stats.reserved_bytes, 40 * MiB);
    vb_fixture_close(f);
}

/* With nothing held there is nothing to retry: a second 40 MiB on the 64
 * MiB sim is one oom, no retry, and the 12 chunks it created go back. */
static void test_oom_with_nothing_held_fails_at_once(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(64 * MiB);
    vb_must_malloc(f, 40 * MiB);
    vb_addr out = 0;
    assert_int_equal(vb_malloc(f->alloc, 40 * MiB, NULL, &out), VB_ERR_OOM);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.ooms, 1);
    assert_int_equal(stats.alloc_retries, 0);
    assert_int_equal(stats.reserved_bytes, 40 * MiB);
    vb_fixture_close(f);
}

/* 65 MiB on a 64 MiB sim (32 chunks) needs 33 chunks: refused before any
 * driver call. */
static void test_request_larger_than_device_makes_no_driver_call(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(64 * MiB);
    vb_addr out = 0;
    assert_int_equal(vb_malloc(f->alloc, 65 * MiB, NULL, &out), VB_ERR_OOM);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.ooms, 1);
    assert_int_equal(stats.driver_alloc_calls, 0);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

/* chunk_mb=20: half a chunk is 10 MiB, so 3 MiB is carved from a 20 MiB
 * small segment: allocated 3 MiB, reserved 20 MiB. */
static void test_chunk_mb_sets_the_chunk_size(void **state)
{
    (void)state;
    const char *const settings[] = {"chunk_mb=20", NULL};
    vb_alloc_fixture *f = vb_fixture_open("stitch", 0, settings);
    vb_must_malloc(f, 3 * MiB);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.allocated_bytes, 3 * MiB);
    assert_int_equal(stats.reserved_bytes, 20 * MiB);
    vb_fixture_close(f);
}

/* reuse_slack_percent=0: a 100 MiB range is no longer handed out whole for
 * 98 MiB; it is shrunk to 49 chunks (allocated 98 MiB), same address. */
static void test_zero_reuse_slack_shrinks_even_one_chunk(void **state)
{
    (void)state;
    const char *const settings[] = {"reuse_slack_percent=0", NULL};
    vb_alloc_fixture *f = vb_fixture_open("stitch", 0, settings);
    vb_addr first = vb_must_malloc(f, 100 * MiB);
    vb_must_free(f, first);
    assert_int_equal(vb_must_malloc(f, 98 * MiB), first);
    assert_int_equal(vb_fixture_stats(f).allocated_bytes, 98 * MiB);
    vb_fixture_close(f);
}

static void test_unknown_option_is_invalid(void **state)
{
    (void)state;
    const char *const settings[] = {"max_split_size_mb=64", NULL};
    assert_int_equal(vb_fixture_create_status("stitch", 0, settings), VB_ERR_INVALID);
}

/* 3 MiB is not a multiple of the sim's 2 MiB granularity. */
static void test_chunk_mb_not_a_multiple_of_the_granularity_is_invalid(void **state)
{
    (void)state;
    const char *const settings[] = {"chunk_mb=3", NULL};
    assert_int_equal(vb_fixture_create_status("stitch", 0, settings), VB_ERR_INVALID);
}

static void test_non_numeric_option_value_is_invalid(void **state)
{
    (void)state;
    const char *const settings[] = {"reuse_slack_mb=lots", NULL};
    assert_int_equal(vb_fixture_create_status("stitch", 0, settings), VB_ERR_INVALID);
}

/* The accepted range of reuse_slack_percent is 0..1000. */
static void test_reuse_slack_percent_out_of_range_is_invalid(void **state)
{
    (void)state;
    const char *const settings[] = {"reuse_slack_percent=1001", NULL};
    assert_int_equal(vb_fixture_create_status("stitch", 0, settings), VB_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_caching_strands_the_free_pieces_peak_160mib),
        cmocka_unit_test(test_expandable_strands_the_inner_pieces_peak_140mib),
        cmocka_unit_test(test_stitch_serves_the_big_request_from_the_pieces_peak_100mib),
        cmocka_unit_test(test_stitched_request_takes_no_new_device_memory),
        cmocka_unit_test(test_largest_free_block_is_every_idle_chunk),
        cmocka_unit_test(test_cached_range_is_reused_without_vm_map),
        cmocka_unit_test(test_range_too_large_by_less_than_the_request_is_shrunk),
        cmocka_unit_test(test_range_more_than_twice_the_request_gives_its_tail),
        cmocka_unit_test(test_idle_range_grows_in_place),
        cmocka_unit_test(test_reuse_slack_is_taken_back_before_device_memory),
        cmocka_unit_test(test_idle_range_of_another_stream_is_stitched_not_reused),
        cmocka_unit_test(test_range_held_for_record_stream_is_not_stitched),
        cmocka_unit_test(test_small_requests_share_one_chunk),
        cmocka_unit_test(test_just_over_half_a_chunk_is_a_range),
        cmocka_unit_test(test_small_pieces_coalesce_when_freed),
        cmocka_unit_test(test_empty_cache_returns_reserved_to_zero),
        cmocka_unit_test(test_empty_cache_keeps_chunks_in_use),
        cmocka_unit_test(test_oom_waits_for_held_blocks_and_retries),
        cmocka_unit_test(test_oom_with_nothing_held_fails_at_once),
        cmocka_unit_test(test_request_larger_than_device_makes_no_driver_call),
        cmocka_unit_test(test_chunk_mb_sets_the_chunk_size),
        cmocka_unit_test(test_zero_reuse_slack_shrinks_even_one_chunk),
        cmocka_unit_test(test_unknown_option_is_invalid),
        cmocka_unit_test(test_chunk_mb_not_a_multiple_of_the_granularity_is_invalid),
        cmocka_unit_test(test_non_numeric_option_value_is_invalid),
        cmocka_unit_test(test_reuse_slack_percent_out_of_range_is_invalid),
    };
    return cmocka_run_group_tests_name("stitch", tests, NULL, NULL);
}
