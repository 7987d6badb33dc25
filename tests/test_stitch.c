/* vrambench — unit tests of `stitch` (virtual-memory stitching, GMLake-style)
 * on the simulated device (2 MiB mapping granularity).
 *
 * Every expected number is worked out in the comments from the rules of
 * allocators/stitch.c, with the default options (2 MiB chunks, reuse slack
 * 100% with no bound in MiB, no granules):
 *   small:  a request of at most 1 MiB (half a chunk) is rounded to 512 B and
 *           carved, best fit, out of a one-chunk small segment of its stream;
 *   large:  a larger request takes ceil(size / 2 MiB) chunks, one range;
 *   reuse:  the best-fit idle range of the stream serves it whole when at most
 *           twice the rounded size (its chunks past the request are excess,
 *           unmapped only when another request takes them); else the largest
 *           smaller idle range of the stream grows in place if its
 *           reservation (the size it was built for, rounded up to a power of
 *           two of chunks) has room, or a new range is built;
 *   chunks: a range grows or is built from unmapped chunks, then the excess
 *           chunks of used ranges, then the tails of idle ranges (oldest
 *           first), and only then vm_create, one call per chunk;
 *  calls:   one vm_map per chunk, one vm_set_access per range built or
 *           grown (over all its new chunks), one vm_unmap per range cut
 *           (over all the chunks it loses).
 * With granule_mb, new memory comes in granules of up to that many MiB,
 * power-of-two multiples of the chunk of at most 1/granule_parts (default
 * 8) of the request, each one vm_create and one vm_map.
 * vm_map, vm_set_access and vm_unmap calls are counted by a proxy of the
 * sim's ops table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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
static uint64_t map_calls, unmap_calls, set_access_calls, unmapped_bytes;

static vb_status counted_vm_map(vb_device *dev, vb_addr addr, uint64_t size, vb_phys handle)
{
    map_calls++;
    return sim_ops->vm_map(dev, addr, size, handle);
}

static vb_status counted_vm_set_access(vb_device *dev, vb_addr addr, uint64_t size)
{
    set_access_calls++;
    return sim_ops->vm_set_access(dev, addr, size);
}

static vb_status counted_vm_unmap(vb_device *dev, vb_addr addr, uint64_t size)
{
    unmap_calls++;
    unmapped_bytes += size;
    return sim_ops->vm_unmap(dev, addr, size);
}

/* `stitch` with `settings` (NULL-terminated "key=value"s, or NULL) on a
 * sim of `capacity` bytes (0: 80 GiB) seen through the counting proxy; the
 * counts start at 0. */
static vb_alloc_fixture *open_stitch_with(uint64_t capacity, const char *const *settings)
{
    vb_alloc_fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(vb_sim_open(capacity, &f->dev), VB_OK);
    sim_ops = f->dev->ops;
    counted_ops = *sim_ops;
    counted_ops.vm_map = counted_vm_map;
    counted_ops.vm_unmap = counted_vm_unmap;
    counted_ops.vm_set_access = counted_vm_set_access;
    counted_device.ops = &counted_ops;
    counted_device.state = f->dev->state;
    map_calls = unmap_calls = set_access_calls = unmapped_bytes = 0;
    vb_config_entry entries[8];
    char text[8][64];
    vb_config config = {.entries = entries, .count = 0};
    for (size_t i = 0; settings && settings[i]; i++) {
        snprintf(text[i], sizeof text[i], "%s", settings[i]);
        assert_int_equal(vb_config_entry_parse(text[i], &entries[config.count++]), VB_OK);
    }
    assert_int_equal(vb_allocator_create("stitch", &counted_device, &config, &f->alloc), VB_OK);
    return f;
}

/* `stitch` with the default options (see open_stitch_with). */
static vb_alloc_fixture *open_stitch(uint64_t capacity)
{
    return open_stitch_with(capacity, NULL);
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
 * which maps the 30 chunks it took from a, c and e: one unmap per range cut
 * (3, 60 MiB), 30 maps, and one set_access per range built (5 + 1). */
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
    assert_int_equal(unmap_calls, 3);
    assert_int_equal(unmapped_bytes, 60 * MiB);
    assert_int_equal(map_calls, 50 + 30);
    assert_int_equal(set_access_calls, 5 + 1);
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
 * chunks more is within 100% of 90 MiB, so the whole range is handed out
 * again: same address, no map, allocated 100 MiB. */
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

/* A 100 MiB range for 60 MiB: 40 MiB more is within 100% of 60, so it is
 * handed out whole (same address, no call; allocated 100 MiB) with 20
 * excess chunks. A 40 MiB request then takes those 20 chunks (one unmap of
 * 40 MiB, 20 maps) rather than device memory: allocated 60 + 40 MiB,
 * reserved still 100 MiB, 50 chunks created in all. */
static void test_range_too_large_by_less_than_the_request_lends_its_excess(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_addr first = vb_must_malloc(f, 100 * MiB);
    vb_must_free(f, first);
    assert_int_equal(vb_must_malloc(f, 60 * MiB), first);
    assert_int_equal(map_calls, 50);
    assert_int_equal(unmap_calls, 0);
    assert_int_equal(vb_fixture_stats(f).allocated_bytes, 100 * MiB);
    vb_must_malloc(f, 40 * MiB);
    assert_int_equal(map_calls, 50 + 20);
    assert_int_equal(unmap_calls, 1);
    assert_int_equal(unmapped_bytes, 40 * MiB);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.allocated_bytes, 100 * MiB);
    assert_int_equal(stats.reserved_bytes, 100 * MiB);
    assert_int_equal(stats.driver_alloc_calls, 50);
    vb_fixture_close(f);
}

/* A 100 MiB range for 40 MiB: 60 MiB more is more than the request, so the
 * range stays cached and a new 20-chunk range is stitched from its last 20
 * chunks: one unmap of 40 MiB, 20 maps, no vm_create; two segments, 60 MiB idle and
 * 40 MiB in use. */
static void test_range_more_than_twice_the_request_gives_its_tail(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_addr first = vb_must_malloc(f, 100 * MiB);
    vb_must_free(f, first);
    vb_addr second = vb_must_malloc(f, 40 * MiB);
    assert_true(second != first);
    assert_int_equal(unmap_calls, 1);
    assert_int_equal(unmapped_bytes, 40 * MiB);
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
 * within 100% of 34 MiB, so it is handed out whole (allocated
 * 40 MiB) with 3 excess chunks. A 6 MiB request (3 chunks) then takes those
 * 3 chunks (one unmap of 6 MiB) instead of device memory: reserved stays 40 MiB,
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
    assert_int_equal(unmap_calls, 1);
    assert_int_equal(unmapped_bytes, 6 * MiB);
    assert_int_equal(stats.reserved_bytes, 40 * MiB);
    assert_int_equal(stats.allocated_bytes, 40 * MiB);
    assert_int_equal(stats.driver_alloc_calls, 20);
    vb_fixture_close(f);
}

/* An idle range is reused whole only by its own stream: 20 MiB freed on
 * stream A, 20 MiB asked on stream B gets a new range stitched from A's 10
 * chunks (one unmap of 20 MiB; vm_unmap waits for A's work), no new device memory. */
static void test_idle_range_of_another_stream_is_stitched_not_reused(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_stream a = vb_fixture_stream(f), b = vb_fixture_stream(f);
    vb_addr on_a = vb_must_malloc_on(f, 20 * MiB, a);
    vb_must_free(f, on_a);
    assert_true(vb_must_malloc_on(f, 20 * MiB, b) != on_a);
    assert_int_equal(unmap_calls, 1);
    assert_int_equal(unmapped_bytes, 20 * MiB);
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
/* Access and granules                                                       */
/* ------------------------------------------------------------------------ */

/* Every block handed out is mapped and accessible to the device, however
 * it was made: built, reused, shrunk, grown in place, stitched from another
 * stream's range, carved from a small segment, or built from granules. */
static void check_accessible_blocks(const char *const *settings)
{
    vb_alloc_fixture *f = open_stitch_with(0, settings);
    vb_stream other = vb_fixture_stream(f);
    vb_addr first = vb_must_malloc(f, 100 * MiB);
    assert_true(vb_sim_accessible(f->dev, first, 100 * MiB));
    vb_must_free(f, first);
    vb_addr shrunk = vb_must_malloc(f, 60 * MiB);
    assert_true(vb_sim_accessible(f->dev, shrunk, 60 * MiB));
    vb_addr grown = vb_must_malloc(f, 20 * MiB);
    vb_must_free(f, grown);
    grown = vb_must_malloc(f, 30 * MiB);
    assert_true(vb_sim_accessible(f->dev, grown, 30 * MiB));
    vb_must_free(f, shrunk);
    vb_addr stitched = vb_must_malloc_on(f, 50 * MiB, other);
    assert_true(vb_sim_accessible(f->dev, stitched, 50 * MiB));
    vb_addr small = vb_must_malloc(f, 4096);
    assert_true(vb_sim_accessible(f->dev, small, 4096));
    vb_addr odd = vb_must_malloc(f, 7 * MiB + 3);
    assert_true(vb_sim_accessible(f->dev, odd, 7 * MiB + 3));
    vb_fixture_close(f);
}

static void test_every_block_handed_out_is_accessible(void **state)
{
    (void)state;
    check_accessible_blocks(NULL);
    const char *const granules[] = {"granule_mb=16", "granule_parts=1", NULL};
    check_accessible_blocks(granules);
}

/* granule_mb=8, granule_parts=1: 40 MiB = 20 chunks of new memory comes as
 * five 8 MiB granules: 5 vm_create, 5 vm_map, one vm_set_access. Freed and
 * emptied: 5 vm_release. */
static void test_granules_cut_create_and_map_calls(void **state)
{
    (void)state;
    const char *const settings[] = {"granule_mb=8", "granule_parts=1", NULL};
    vb_alloc_fixture *f = open_stitch_with(0, settings);
    vb_addr block = vb_must_malloc(f, 40 * MiB);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.driver_alloc_calls, 5);
    assert_int_equal(stats.reserved_bytes, 40 * MiB);
    assert_int_equal(map_calls, 5);
    assert_int_equal(set_access_calls, 1);
    vb_must_free(f, block);
    assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
    stats = vb_fixture_stats(f);
    assert_int_equal(stats.driver_free_calls, 5);
    assert_int_equal(stats.reserved_bytes, 0);
    assert_int_equal(vb_sim_used_bytes(f->dev), 0);
    vb_fixture_close(f);
}

/* granule_mb=64 with the default granule_parts=8: 40 MiB (20 chunks) takes
 * granules of at most 20/8 chunks, i.e. 2 chunks (4 MiB): 10 vm_create.
 * 400 MiB (200 chunks): at most 25 chunks, i.e. 16 (32 MiB): 12 granules of
 * 16 and one of 8, 13 vm_create. */
static void test_granules_grow_with_the_request(void **state)
{
    (void)state;
    const char *const settings[] = {"granule_mb=64", NULL};
    vb_alloc_fixture *f = open_stitch_with(0, settings);
    vb_must_malloc(f, 40 * MiB);
    assert_int_equal(vb_fixture_stats(f).driver_alloc_calls, 10);
    vb_must_malloc(f, 400 * MiB);
    assert_int_equal(vb_fixture_stats(f).driver_alloc_calls, 10 + 13);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 440 * MiB);
    vb_fixture_close(f);
}

/* A granule is mapped whole: with granule_mb=8, granule_parts=1, an 8 MiB
 * range freed on stream A is one 4-chunk granule. 4 MiB on stream B takes
 * it whole from A's range (one unmap) rather than new memory: the block is
 * 8 MiB, reserved stays 8 MiB, one vm_create in all. */
static void test_granule_is_stitched_whole(void **state)
{
    (void)state;
    const char *const settings[] = {"granule_mb=8", "granule_parts=1", NULL};
    vb_alloc_fixture *f = open_stitch_with(0, settings);
    vb_stream a = vb_fixture_stream(f), b = vb_fixture_stream(f);
    vb_must_free(f, vb_must_malloc_on(f, 8 * MiB, a));
    vb_addr on_b = vb_must_malloc_on(f, 4 * MiB, b);
    assert_true(vb_sim_accessible(f->dev, on_b, 8 * MiB));
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(unmap_calls, 1);
    assert_int_equal(stats.allocated_bytes, 8 * MiB);
    assert_int_equal(stats.reserved_bytes, 8 * MiB);
    assert_int_equal(stats.driver_alloc_calls, 1);
    vb_fixture_close(f);
}

/* A seeded random mix on two streams (sizes from 1 KiB to 96 MiB, some
 * freed while their stream is busy) with `settings`: every block handed out
 * is accessible, live blocks never overlap, requested <= allocated <=
 * reserved = what the sim holds, and once everything is freed empty_cache
 * leaves the sim holding nothing. */
static void check_random_mix(const char *const *settings)
{
    enum { OPS = 3000, SLOTS = 64 };
    vb_alloc_fixture *f = open_stitch_with(0, settings);
    vb_stream streams[2] = {vb_fixture_stream(f), vb_fixture_stream(f)};
    vb_addr addr[SLOTS] = {0};
    uint64_t size[SLOTS] = {0};
    uint64_t seed = 42;
    for (int op = 0; op < OPS; op++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        unsigned slot = (unsigned)(seed >> 33) % SLOTS;
        if (addr[slot]) {
            if ((seed >> 20) % 8 == 0) vb_free_while_used_on_busy_stream(f, addr[slot], 1000);
            else vb_must_free(f, addr[slot]);
            addr[slot] = 0;
            continue;
        }
        uint64_t shift = 10 + (seed >> 40) % 17; /* 1 KiB .. 64 MiB, times up to 1.5 */
        size[slot] = ((uint64_t)1 << shift) + (seed >> 8) % ((uint64_t)1 << (shift - 1));
        addr[slot] = vb_must_malloc_on(f, size[slot], streams[(seed >> 50) & 1]);
        assert_true(vb_sim_accessible(f->dev, addr[slot], size[slot]));
        for (unsigned other = 0; other < SLOTS; other++)
            if (other != slot && addr[other])
                assert_true(addr[other] + size[other] <= addr[slot] || addr[slot] + size[slot] <= addr[other]);
        vb_alloc_stats stats = vb_fixture_stats(f);
        assert_true(stats.requested_bytes <= stats.allocated_bytes);
        assert_true(stats.allocated_bytes <= stats.reserved_bytes);
        assert_int_equal(stats.reserved_bytes, vb_sim_used_bytes(f->dev));
    }
    for (unsigned slot = 0; slot < SLOTS; slot++)
        if (addr[slot]) vb_must_free(f, addr[slot]);
    assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 0);
    assert_int_equal(vb_sim_used_bytes(f->dev), 0);
    vb_fixture_close(f);
}

static void test_random_mix_keeps_the_invariants(void **state)
{
    (void)state;
    check_random_mix(NULL);
    const char *const granules[] = {"granule_mb=64", "granule_parts=1", NULL};
    check_random_mix(granules);
    const char *const parts[] = {"granule_mb=16", "granule_parts=8", "reuse_slack_percent=10", NULL};
    check_random_mix(parts);
    const char *const split[] = {"split_free=1", "reuse_slack_percent=25", NULL};
    check_random_mix(split);
    const char *const split_granules[] = {"split_free=1", "granule_mb=8", "granule_parts=1", NULL};
    check_random_mix(split_granules);
}

/* split_free=1: a 100 MiB range freed serves 40 MiB (60 MiB more than the
 * 40 MiB slack) in place, split: same address, no driver call; the other 60
 * MiB serves 60 MiB right after it, in place too. Freed, the pieces
 * coalesce: 100 MiB serves 100 MiB again at the same address. */
static void test_split_free_serves_in_place(void **state)
{
    (void)state;
    const char *const settings[] = {"split_free=1", NULL};
    vb_alloc_fixture *f = open_stitch_with(0, settings);
    vb_addr first = vb_must_malloc(f, 100 * MiB);
    vb_must_free(f, first);
    uint64_t maps = map_calls;
    vb_addr head = vb_must_malloc(f, 40 * MiB);
    vb_addr tail = vb_must_malloc(f, 60 * MiB);
    assert_int_equal(head, first);
    assert_int_equal(tail, first + 40 * MiB);
    assert_int_equal(map_calls, maps);
    assert_int_equal(unmap_calls, 0);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 100 * MiB);
    vb_must_free(f, tail);
    vb_must_free(f, head);
    assert_int_equal(vb_must_malloc(f, 100 * MiB), first);
    assert_int_equal(vb_fixture_stats(f).driver_alloc_calls, 50);
    vb_fixture_close(f);
}

/* split_free=1: a free piece at the end of a range in use is stitchable:
 * 100 MiB freed, 40 MiB takes its head in place; 70 MiB on another stream
 * takes the free 60 MiB tail (one unmap) and 10 MiB new: reserved 110 MiB. */
static void test_split_free_tail_is_stitched(void **state)
{
    (void)state;
    const char *const settings[] = {"split_free=1", NULL};
    vb_alloc_fixture *f = open_stitch_with(0, settings);
    vb_stream other = vb_fixture_stream(f);
    vb_must_free(f, vb_must_malloc(f, 100 * MiB));
    vb_must_malloc(f, 40 * MiB);
    vb_addr stitched = vb_must_malloc_on(f, 70 * MiB, other);
    assert_true(vb_sim_accessible(f->dev, stitched, 70 * MiB));
    assert_int_equal(unmap_calls, 1);
    assert_int_equal(unmapped_bytes, 60 * MiB);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 110 * MiB);
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

/* reuse_slack_percent=0: a 100 MiB range no longer serves 98 MiB (49
 * chunks); a new range is stitched from its last 49 chunks (one unmap),
 * elsewhere: allocated 98 MiB, reserved still 100 MiB. */
static void test_zero_reuse_slack_serves_only_exact_fits(void **state)
{
    (void)state;
    const char *const settings[] = {"reuse_slack_percent=0", NULL};
    vb_alloc_fixture *f = open_stitch_with(0, settings);
    vb_addr first = vb_must_malloc(f, 100 * MiB);
    vb_must_free(f, first);
    assert_true(vb_must_malloc(f, 98 * MiB) != first);
    assert_int_equal(unmap_calls, 1);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.allocated_bytes, 98 * MiB);
    assert_int_equal(stats.reserved_bytes, 100 * MiB);
    vb_fixture_close(f);
}

/* reuse_slack_mb=10 bounds the slack: the 100 MiB range serves 90 MiB (10
 * MiB more) whole, but not 88 MiB (12 MiB more). */
static void test_reuse_slack_mb_bounds_the_slack(void **state)
{
    (void)state;
    const char *const settings[] = {"reuse_slack_mb=10", NULL};
    vb_alloc_fixture *f = open_stitch_with(0, settings);
    vb_addr first = vb_must_malloc(f, 100 * MiB);
    vb_must_free(f, first);
    assert_int_equal(vb_must_malloc(f, 90 * MiB), first);
    vb_must_free(f, first);
    assert_true(vb_must_malloc(f, 88 * MiB) != first);
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
        cmocka_unit_test(test_range_too_large_by_less_than_the_request_lends_its_excess),
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
        cmocka_unit_test(test_every_block_handed_out_is_accessible),
        cmocka_unit_test(test_granules_cut_create_and_map_calls),
        cmocka_unit_test(test_granules_grow_with_the_request),
        cmocka_unit_test(test_granule_is_stitched_whole),
        cmocka_unit_test(test_random_mix_keeps_the_invariants),
        cmocka_unit_test(test_split_free_serves_in_place),
        cmocka_unit_test(test_split_free_tail_is_stitched),
        cmocka_unit_test(test_chunk_mb_sets_the_chunk_size),
        cmocka_unit_test(test_zero_reuse_slack_serves_only_exact_fits),
        cmocka_unit_test(test_reuse_slack_mb_bounds_the_slack),
        cmocka_unit_test(test_unknown_option_is_invalid),
        cmocka_unit_test(test_chunk_mb_not_a_multiple_of_the_granularity_is_invalid),
        cmocka_unit_test(test_non_numeric_option_value_is_invalid),
        cmocka_unit_test(test_reuse_slack_percent_out_of_range_is_invalid),
    };
    return cmocka_run_group_tests_name("stitch", tests, NULL, NULL);
}
