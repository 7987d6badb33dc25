/* vrambench tests — one allocator on a fresh simulated device (see alloc_fixture.h). */
#include "alloc_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include <math.h>

#include "allocators/spec.h"
#include "app/replay.h"
#include "app/runner.h"

/* Opens the sim and tries to create `name` on it; the fixture keeps the
 * device either way and an allocator only on VB_OK. */
static vb_status try_open(vb_alloc_fixture *f, const char *name, uint64_t capacity, const char *const *settings)
{
    /* vb_config_entry_parse cuts its text in place: copies, not the literals. */
    char text[VB_FIXTURE_MAX_SETTINGS][128];
    vb_config_entry entries[VB_FIXTURE_MAX_SETTINGS];
    size_t count = 0;
    for (; settings && settings[count]; count++) {
        assert_true(count < VB_FIXTURE_MAX_SETTINGS);
        snprintf(text[count], sizeof text[count], "%s", settings[count]);
        assert_int_equal(vb_config_entry_parse(text[count], &entries[count]), VB_OK);
    }
    vb_config config = {entries, count};
    f->alloc = NULL;
    assert_int_equal(vb_sim_open(capacity, &f->dev), VB_OK);
    return vb_allocator_create(name, f->dev, &config, &f->alloc);
}

vb_alloc_fixture *vb_fixture_open(const char *name, uint64_t capacity, const char *const *settings)
{
    vb_alloc_fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(try_open(f, name, capacity, settings), VB_OK);
    return f;
}

vb_status vb_fixture_create_status(const char *name, uint64_t capacity, const char *const *settings)
{
    vb_alloc_fixture f;
    vb_status status = try_open(&f, name, capacity, settings);
    if (status == VB_OK) vb_allocator_destroy(f.alloc);
    vb_device_close(f.dev);
    return status;
}

void vb_fixture_close(vb_alloc_fixture *f)
{
    vb_allocator_destroy(f->alloc);
    vb_device_close(f->dev);
    free(f);
}

vb_addr vb_must_malloc_on(vb_alloc_fixture *f, uint64_t size, vb_stream stream)
{
    vb_addr addr = 0;
    assert_int_equal(vb_malloc(f->alloc, size, stream, &addr), VB_OK);
    assert_true(addr != 0);
    return addr;
}

vb_addr vb_must_malloc(vb_alloc_fixture *f, uint64_t size)
{
    return vb_must_malloc_on(f, size, NULL);
}

void vb_must_free(vb_alloc_fixture *f, vb_addr addr)
{
    assert_int_equal(vb_free(f->alloc, addr), VB_OK);
}

vb_alloc_stats vb_fixture_stats(vb_alloc_fixture *f)
{
    vb_alloc_stats stats;
    vb_allocator_stats(f->alloc, &stats);
    return stats;
}

vb_stream vb_fixture_stream(vb_alloc_fixture *f)
{
    vb_stream stream;
    assert_int_equal(f->dev->ops->stream_create(f->dev, &stream), VB_OK);
    return stream;
}

vb_stream vb_free_while_used_on_busy_stream(vb_alloc_fixture *f, vb_addr addr, uint64_t busy_ns)
{
    vb_stream stream = vb_fixture_stream(f);
    assert_int_equal(vb_record_stream(f->alloc, addr, stream), VB_OK);
    assert_int_equal(f->dev->ops->enqueue_busy(f->dev, stream, busy_ns), VB_OK);
    vb_must_free(f, addr);
    return stream;
}

/* segments() visitor: appends to a vb_block_list, counting past its end so
 * that an overflow is seen. */
static void collect_block(void *context, const vb_block_info *block)
{
    vb_block_list *list = context;
    if (list->count < VB_BLOCK_LIST_CAPACITY) list->blocks[list->count] = *block;
    list->count++;
}

vb_block_list vb_fixture_blocks(vb_alloc_fixture *f)
{
    vb_block_list list = {.count = 0};
    f->alloc->ops->segments(f->alloc->state, collect_block, &list);
    assert_true(list.count <= VB_BLOCK_LIST_CAPACITY);
    return list;
}

size_t vb_block_list_segment_count(const vb_block_list *list)
{
    size_t count = 0;
    for (size_t i = 0; i < list->count; i++)
        if (i == 0 || list->blocks[i].segment != list->blocks[i - 1].segment) count++;
    return count;
}

void vb_fixture_replay_peaks(const char *path, const char *spec, uint64_t capacity, double *requested,
                             double *reserved)
{
    vb_device *dev;
    vb_allocator_spec parsed;
    vb_case_result result;
    assert_int_equal(vb_sim_open(capacity, &dev), VB_OK);
    assert_int_equal(vb_allocator_spec_parse(spec, &parsed), VB_OK);
    vb_case one = {&vb_replay_scenario, path, &parsed, NULL};
    vb_runner_options options = {.repetitions = 1, .min_time_s = 0.0, .max_iterations = 1};
    vb_status status = vb_runner_run_case(dev, &one, &options, &result);
    if (status != VB_OK) fail_msg("replay of %s with %s failed: %s", path, spec, vb_last_error());
    *requested = vb_repetition_counter(&result.repetitions[0], "peak_requested_bytes", NAN);
    *reserved = vb_repetition_counter(&result.repetitions[0], "peak_reserved_bytes", NAN);
    vb_case_result_free(&result);
    vb_allocator_spec_free(&parsed);
    vb_device_close(dev);
}
