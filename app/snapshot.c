/* vrambench — a replay as a PyTorch memory snapshot (see snapshot.h). */
#include "snapshot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/addr_map.h"
#include "output_file.h"
#include "trace.h"
#include "trace_drive.h"

/* Entries per APPENDS batch, as Python's pickler does (a viewer unpickling
 * in JavaScript spreads each batch into one call). */
#define BATCH 1000
/* Bits of a live map value that hold the trace stream (value: size << 10 | stream). */
#define STREAM_BITS 10

/* ======================================================================== */
/* Pickle protocol 2, the opcodes PyTorch's viewer reads                    */
/* ======================================================================== */

/* Bytes go through a buffer into the output's temporary file
 * (app/output_file.h); the first failed write is kept and ends the output. */
typedef struct pickler {
    vb_output out;
    vb_status status;            /* VB_OK until a write failed */
    size_t used;
    unsigned char buffer[64 * 1024];
} pickler;

/* Writes the buffered bytes out. */
static void flush_bytes(pickler *p)
{
    if (p->status == VB_OK && p->used) p->status = vb_output_write(&p->out, p->buffer, p->used);
    p->used = 0;
}

static void put_bytes(pickler *p, const void *bytes, size_t length)
{
    const unsigned char *at = bytes;
    while (length > 0) {
        if (p->used == sizeof p->buffer) flush_bytes(p);
        size_t room = sizeof p->buffer - p->used, count = length < room ? length : room;
        memcpy(p->buffer + p->used, at, count);
        p->used += count;
        at += count;
        length -= count;
    }
}

static void put_byte(pickler *p, int byte)
{
    unsigned char value = (unsigned char)byte;
    put_bytes(p, &value, 1);
}

/* BININT1 / BININT2 / BININT below 2^31, else LONG1 (little-endian two's
 * complement, a zero byte added when the top bit is set). */
static void put_int(pickler *p, uint64_t value)
{
    if (value < 256) {
        put_byte(p, 'K');
        put_byte(p, (int)value);
    } else if (value < 65536) {
        put_byte(p, 'M');
        put_byte(p, (int)(value & 0xff));
        put_byte(p, (int)(value >> 8));
    } else if (value < 0x80000000u) {
        put_byte(p, 'J');
        for (int i = 0; i < 4; i++) put_byte(p, (int)((value >> (8 * i)) & 0xff));
    } else {
        int bytes = 0;
        while (bytes < 8 && (value >> (8 * bytes)) != 0) bytes++;
        int pad = (value >> (8 * bytes - 1)) & 1;
        put_byte(p, 0x8a);
        put_byte(p, bytes + pad);
        for (int i = 0; i < bytes; i++) put_byte(p, (int)((value >> (8 * i)) & 0xff));
        if (pad) put_byte(p, 0);
    }
}

/* SHORT_BINUNICODE, or BINUNICODE from 256 bytes on. */
static void put_str(pickler *p, const char *text)
{
    size_t length = strlen(text);
    if (length < 256) {
        put_byte(p, 0x8c);
        put_byte(p, (int)length);
    } else {
        put_byte(p, 'X');
        for (int i = 0; i < 4; i++) put_byte(p, (int)((length >> (8 * i)) & 0xff));
    }
    put_bytes(p, text, length);
}

static void put_key_int(pickler *p, const char *key, uint64_t value)
{
    put_str(p, key);
    put_int(p, value);
}

static void put_key_str(pickler *p, const char *key, const char *value)
{
    put_str(p, key);
    put_str(p, value);
}

/* An empty list as a value ("frames"). */
static void put_key_empty_list(pickler *p, const char *key)
{
    put_str(p, key);
    put_byte(p, ']');
}

static void begin_dict(pickler *p)
{
    put_byte(p, '}');
    put_byte(p, '(');
}

static void end_dict(pickler *p)
{
    put_byte(p, 'u');
}

/* ======================================================================== */
/* Recording the replay                                                     */
/* ======================================================================== */

typedef struct segment_range {
    uint64_t base, size;
    uint32_t stream;
} segment_range;

typedef struct segment_list {
    segment_range *items;
    size_t count, capacity;
} segment_list;

typedef struct annotation {
    uint64_t time_us;
    char name[VB_TRACE_MAX_NAME + 1];
} annotation;

typedef struct recorder {
    pickler p;
    vb_allocator *allocator;
    vb_drive_target *target;     /* the allocator, on a sim device of its own */
    int expandable;              /* segment_map/unmap instead of segment_alloc/free */
    uint64_t entries;            /* trace entries written */
    size_t in_batch;             /* entries since the batch's MARK */
    vb_addr_map live;            /* block address -> requested size << 10 | trace stream */
    segment_list segments;       /* the allocator's segments after the last change */
    uint64_t seen_reserved, seen_driver_calls;
    annotation *annotations;
    size_t annotation_count, annotation_capacity;
    int failed;                  /* host memory ran out */
} recorder;

/* The trace stream id of a device stream (0 when unknown, the default). */
static uint32_t trace_stream(const recorder *r, vb_stream stream)
{
    for (uint32_t i = 0; i < VB_TRACE_MAX_STREAMS; i++)
        if (r->target->streams[i] && r->target->streams[i] == stream) return i;
    return 0;
}

/* One trace entry {action, addr, size, stream, time_us, frames} (plus
 * device_free for an oom), batched into the device's list. */
static void put_entry(recorder *r, const char *action, uint64_t addr, uint64_t size, uint32_t stream)
{
    if (r->in_batch == 0) put_byte(&r->p, '(');
    r->entries++;
    begin_dict(&r->p);
    put_key_str(&r->p, "action", action);
    put_key_int(&r->p, "addr", addr);
    put_key_int(&r->p, "size", size);
    put_key_int(&r->p, "stream", stream);
    put_key_int(&r->p, "time_us", 2 * r->entries);
    if (strcmp(action, "oom") == 0) {
        uint64_t free_bytes = 0, total = 0;
        r->target->device->ops->mem_info(r->target->device, &free_bytes, &total);
        put_key_int(&r->p, "device_free", free_bytes);
    }
    put_key_empty_list(&r->p, "frames");
    end_dict(&r->p);
    if (++r->in_batch == BATCH) {
        put_byte(&r->p, 'e');
        r->in_batch = 0;
    }
}

/* Collects a segment map block by block into a segment list. */
static void collect_segment(void *context, const vb_block_info *block)
{
    recorder *r = context;
    segment_list *list = &r->segments;
    if (list->count && list->items[list->count - 1].base == block->segment) return;
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? list->capacity * 2 : 64;
        segment_range *items = realloc(list->items, capacity * sizeof *items);
        if (!items) {
            r->failed = 1;
            return;
        }
        list->items = items;
        list->capacity = capacity;
    }
    list->items[list->count++] = (segment_range){block->segment, block->segment_size, trace_stream(r, block->stream)};
}

/* 1 if `range` is in `list` (same base and size). */
static int has_segment(const segment_list *list, const segment_range *range)
{
    for (size_t i = 0; i < list->count; i++)
        if (list->items[i].base == range->base && list->items[i].size == range->size) return 1;
    return 0;
}

/* Bytes of [from, to) covered by `list` starting at `from`: the end of
 * the covered (1) or uncovered (0) run that starts there. */
static uint64_t run_end(const segment_list *list, uint64_t from, uint64_t to, int *covered)
{
    uint64_t end = to;
    *covered = 0;
    for (size_t i = 0; i < list->count; i++) {
        uint64_t a = list->items[i].base, b = a + list->items[i].size;
        if (a <= from && from < b) {
            *covered = 1;
            return b < to ? b : to;
        }
        if (a > from && a < end) end = a;
    }
    return end;
}

/* Expandable segments: the ranges mapped or unmapped between two segment
 * lists, as segment_map / segment_unmap entries. */
static void put_range_changes(recorder *r, const segment_list *before, const segment_list *after)
{
    const segment_list *lists[2] = {before, after};
    for (int side = 0; side < 2; side++) {
        const segment_list *mine = lists[side], *other = lists[1 - side];
        for (size_t i = 0; i < mine->count; i++) {
            uint64_t at = mine->items[i].base, end = at + mine->items[i].size;
            while (at < end) {
                int covered;
                uint64_t next = run_end(other, at, end, &covered);
                if (!covered)
                    put_entry(r, side ? "segment_map" : "segment_unmap", at, next - at, mine->items[i].stream);
                at = next;
            }
        }
    }
}

/* After the allocator's reserved memory or driver calls changed: the
 * segments that came and went since the last look. */
static void note_segments(recorder *r)
{
    vb_alloc_stats stats;
    vb_allocator_counts(r->allocator, &stats);
    uint64_t driver_calls = stats.driver_alloc_calls + stats.driver_free_calls;
    if (stats.reserved_bytes == r->seen_reserved && driver_calls == r->seen_driver_calls) return;
    r->seen_reserved = stats.reserved_bytes;
    r->seen_driver_calls = driver_calls;
    if (!r->allocator->ops->segments) return;
    segment_list before = r->segments;
    r->segments = (segment_list){0};
    r->allocator->ops->segments(r->allocator->state, collect_segment, r);
    if (r->expandable) {
        put_range_changes(r, &before, &r->segments);
    } else {
        for (size_t i = 0; i < before.count; i++)
            if (!has_segment(&r->segments, &before.items[i]))
                put_entry(r, "segment_free", before.items[i].base, before.items[i].size, before.items[i].stream);
        for (size_t i = 0; i < r->segments.count; i++)
            if (!has_segment(&before, &r->segments.items[i]))
                put_entry(r, "segment_alloc", r->segments.items[i].base, r->segments.items[i].size,
                          r->segments.items[i].stream);
    }
    free(before.items);
}

static void on_after_alloc(void *context, vb_addr addr, uint64_t size, uint32_t stream, int oom)
{
    recorder *r = context;
    note_segments(r);
    if (oom) {
        put_entry(r, "oom", 0, size, stream);
        return;
    }
    if (vb_addr_map_put(&r->live, addr, size << STREAM_BITS | stream) != 0) r->failed = 1;
    put_entry(r, "alloc", addr, size, stream);
}

static void on_before_free(void *context, vb_addr addr, uint32_t stream)
{
    recorder *r = context;
    (void)stream;
    uint64_t value = 0;
    vb_addr_map_remove(&r->live, addr, &value);
    uint64_t size = value >> STREAM_BITS;
    uint32_t block_stream = (uint32_t)(value & ((1u << STREAM_BITS) - 1));
    put_entry(r, "free_requested", addr, size, block_stream);
    put_entry(r, "free_completed", addr, size, block_stream);
}

/* A free changes the segments only afterwards: looked at before the next
 * event (the next allocation, or the end). */
static vb_status on_mark(void *context, const char *name)
{
    recorder *r = context;
    note_segments(r);
    if (r->annotation_count == r->annotation_capacity) {
        size_t capacity = r->annotation_capacity ? r->annotation_capacity * 2 : 16;
        annotation *more = realloc(r->annotations, capacity * sizeof *more);
        if (!more) {
            r->failed = 1;
            return VB_OK; /* reported at the end, with the other host OOMs */
        }
        r->annotations = more;
        r->annotation_capacity = capacity;
    }
    annotation *a = &r->annotations[r->annotation_count++];
    a->time_us = 2 * r->entries + 1; /* before the next entry */
    snprintf(a->name, sizeof a->name, "%s", name);
    return VB_OK;
}

static void on_before_alloc(void *context, uint64_t size, uint32_t stream)
{
    (void)size;
    (void)stream;
    note_segments(context); /* what frees since the last event released */
}

/* ======================================================================== */
/* The end state and the file                                               */
/* ======================================================================== */

/* The requested size of an allocated block (its own size if unknown). */
static uint64_t requested_of(const recorder *r, const vb_block_info *block)
{
    uint64_t value = 0;
    if (!block->allocated || !vb_addr_map_get(&r->live, block->block, &value)) return 0;
    return value >> STREAM_BITS;
}

/* Writes the segments list from the allocator's segment map now. */
static void put_segments(recorder *r)
{
    struct {
        vb_block_info *blocks;
        size_t count;
    } w;
    if (vb_allocator_blocks(r->allocator, &w.blocks, &w.count) != VB_OK) r->failed = 1;
    put_byte(&r->p, ']');
    size_t in_batch = 0;
    for (size_t i = 0; i < w.count;) {
        size_t end = i;
        uint64_t allocated = 0, requested = 0;
        while (end < w.count && w.blocks[end].segment == w.blocks[i].segment) {
            if (w.blocks[end].allocated) allocated += w.blocks[end].block_size;
            requested += requested_of(r, &w.blocks[end]);
            end++;
        }
        if (in_batch == 0) put_byte(&r->p, '(');
        begin_dict(&r->p);
        put_key_int(&r->p, "device", 0);
        put_key_int(&r->p, "address", w.blocks[i].segment);
        put_key_int(&r->p, "total_size", w.blocks[i].segment_size);
        put_key_int(&r->p, "allocated_size", allocated);
        put_key_int(&r->p, "active_size", allocated);
        put_key_int(&r->p, "requested_size", requested);
        put_key_int(&r->p, "stream", trace_stream(r, w.blocks[i].stream));
        put_key_str(&r->p, "segment_type", w.blocks[i].segment_size <= VB_DRIVER_PAGE ? "small" : "large");
        put_str(&r->p, "is_expandable");
        put_byte(&r->p, r->expandable ? 0x88 : 0x89);
        put_key_empty_list(&r->p, "frames");
        put_str(&r->p, "blocks");
        put_byte(&r->p, ']');
        put_byte(&r->p, '(');
        for (size_t b = i; b < end; b++) {
            const vb_block_info *block = &w.blocks[b];
            begin_dict(&r->p);
            put_key_int(&r->p, "address", block->block);
            put_key_int(&r->p, "size", block->block_size);
            put_key_int(&r->p, "requested_size", block->allocated ? requested_of(r, block) : 0);
            put_key_str(&r->p, "state", block->allocated ? "active_allocated" : "inactive");
            put_key_empty_list(&r->p, "frames");
            end_dict(&r->p);
        }
        put_byte(&r->p, 'e');
        end_dict(&r->p);
        if (++in_batch == BATCH) {
            put_byte(&r->p, 'e');
            in_batch = 0;
        }
        i = end;
    }
    if (in_batch) put_byte(&r->p, 'e');
    free(w.blocks);
}

static void put_annotations(recorder *r)
{
    put_byte(&r->p, ']');
    if (r->annotation_count == 0) return;
    put_byte(&r->p, '(');
    for (size_t i = 0; i < r->annotation_count; i++) {
        begin_dict(&r->p);
        put_key_str(&r->p, "stage", "START");
        put_key_str(&r->p, "name", r->annotations[i].name);
        put_key_int(&r->p, "device", 0);
        put_key_int(&r->p, "time_us", r->annotations[i].time_us);
        end_dict(&r->p);
    }
    put_byte(&r->p, 'e');
}

/* The whole snapshot, its replay included, into the open file. */
static vb_status write_snapshot(recorder *r, const char *trace_path, const vb_allocator_spec *spec, int stop_at_oom)
{
    put_byte(&r->p, 0x80);
    put_byte(&r->p, 2);
    begin_dict(&r->p);
    put_str(&r->p, "device_traces");
    put_byte(&r->p, ']'); /* the devices */
    put_byte(&r->p, ']'); /* device 0's entries */
    vb_drive_hooks hooks = {.context = r, .before_alloc = on_before_alloc, .after_alloc = on_after_alloc,
                            .before_free = on_before_free, .mark = on_mark};
    vb_drive_result result;
    vb_trace *trace = NULL;
    vb_status status = vb_trace_open(trace_path, &trace);
    if (status == VB_OK)
        status = vb_drive(&(vb_drive_source){.trace = trace}, r->target, &hooks, stop_at_oom, &result);
    vb_trace_close(trace);
    if (status != VB_OK) return status;
    note_segments(r);
    if (r->in_batch) put_byte(&r->p, 'e');
    put_byte(&r->p, 'a'); /* device 0's list into the devices */
    put_str(&r->p, "segments");
    put_segments(r);
    put_str(&r->p, "external_annotations");
    put_annotations(r);
    put_str(&r->p, "allocator_settings");
    begin_dict(&r->p);
    put_key_str(&r->p, "vrambench_allocator", spec->label);
    end_dict(&r->p);
    end_dict(&r->p);
    put_byte(&r->p, '.');
    return r->failed ? vb_error(VB_ERR_HOST_OOM, "out of host memory") : VB_OK;
}

vb_status vb_snapshot_write(const char *trace_path, const vb_allocator_spec *spec, uint64_t capacity,
                            vb_sim_placement placement,
                            const char *out_path)
{
    return vb_snapshot_write_until(trace_path, spec, capacity, placement, 0, out_path);
}

vb_status vb_snapshot_write_until(const char *trace_path, const vb_allocator_spec *spec, uint64_t capacity,
                                  vb_sim_placement placement, int stop_at_oom, const char *out_path)
{
    recorder *r = calloc(1, sizeof *r);
    vb_drive_target *target = calloc(1, sizeof *target);
    if (!r || !target) {
        free(r);
        free(target);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    r->target = target;
    r->expandable = strcmp(spec->name, "expandable") == 0;
    vb_config config = vb_allocator_spec_config(spec);
    vb_status status = vb_sim_open(capacity, &target->device);
    if (status == VB_OK) status = vb_sim_set_placement(target->device, placement);
    if (status == VB_OK) status = vb_allocator_create(spec->name, target->device, &config, &r->allocator);
    target->allocator = r->allocator;
    if (status == VB_OK) status = vb_output_open(&r->p.out, out_path);
    int opened = status == VB_OK;
    if (status == VB_OK) status = write_snapshot(r, trace_path, spec, stop_at_oom);
    if (opened) {
        flush_bytes(&r->p);
        if (status == VB_OK) status = r->p.status; /* the first failed write, with its message */
        if (status == VB_OK) status = vb_output_commit(&r->p.out);
        else vb_output_abandon(&r->p.out);
    }
    vb_allocator_destroy(r->allocator);
    if (target->device) {
        vb_drive_target_close(target);
        vb_device_close(target->device);
    }
    vb_addr_map_clear(&r->live);
    free(r->segments.items);
    free(r->annotations);
    free(r);
    free(target);
    return status;
}
