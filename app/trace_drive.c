/* vrambench — the one trace driver (see trace_drive.h). */
#include "trace_drive.h"

#include <stdlib.h>
#include <string.h>

/* Counts out->peak_live_bytes, out->largest_bytes and
 * out->through_last_alloc over the events. */
static vb_status count_demand(vb_drive_events *out)
{
    uint64_t *sizes = calloc(out->slots ? out->slots : 1, sizeof *sizes);
    if (!sizes) return vb_error(VB_ERR_OOM, "out of host memory");
    uint64_t live = 0;
    for (size_t i = 0; i < out->count; i++) {
        const vb_drive_event *event = &out->items[i];
        if (event->is_alloc) {
            sizes[event->slot] = event->size;
            live += event->size;
            if (live > out->peak_live_bytes) out->peak_live_bytes = live;
            if (event->size > out->largest_bytes) out->largest_bytes = event->size;
            out->through_last_alloc = i + 1;
        } else {
            live -= sizes[event->slot];
            sizes[event->slot] = 0;
        }
    }
    free(sizes);
    return VB_OK;
}

vb_status vb_drive_load(const char *path, vb_drive_events *out)
{
    memset(out, 0, sizeof *out);
    vb_trace *trace = NULL;
    vb_status status = vb_trace_open(path, &trace);
    size_t capacity = 0;
    vb_trace_event event;
    while (status == VB_OK) {
        status = vb_trace_next(trace, &event);
        if (status != VB_OK || event.kind == VB_TRACE_END) break;
        if (event.kind != VB_TRACE_ALLOC && event.kind != VB_TRACE_FREE) continue;
        if (out->count == capacity) {
            capacity = capacity ? capacity * 2 : 4096;
            vb_drive_event *more = realloc(out->items, capacity * sizeof *more);
            if (!more) {
                status = vb_error(VB_ERR_OOM, "out of host memory");
                break;
            }
            out->items = more;
        }
        vb_drive_event *item = &out->items[out->count++];
        *item = (vb_drive_event){event.size, vb_trace_line(trace), 0, event.stream, event.kind == VB_TRACE_ALLOC};
        if (item->is_alloc) {
            if (out->slots == UINT32_MAX) {
                status = vb_trace_error(trace, VB_ERR_INVALID, "more than %u allocations", UINT32_MAX - 1);
                break;
            }
            item->slot = out->slots++;
            vb_trace_tag(trace, (uint64_t)item->slot + 1);
        } else {
            item->slot = (uint32_t)(event.tag - 1);
        }
    }
    vb_trace_close(trace);
    if (status == VB_OK) status = count_demand(out);
    if (status != VB_OK) vb_drive_events_free(out);
    return status;
}

void vb_drive_events_free(vb_drive_events *events)
{
    free(events->items);
    memset(events, 0, sizeof *events);
}

/* Prefetching the frees to come (vb_prefetch_free): the key of the free
 * VB_TRACE_LOOKAHEAD events ahead is taken each event, and its stages
 * asked for as it comes nearer, each a little after the one before, so
 * that each finds what the one before asked for in the cache. */
#define LOOKAHEAD VB_TRACE_LOOKAHEAD
#define UPCOMING_KEYS 8 /* a power of two above LOOKAHEAD */
_Static_assert(LOOKAHEAD > VB_PREFETCH_STAGES && LOOKAHEAD < UPCOMING_KEYS, "room for the stages in the ring");

/* The events ahead at which each stage is asked for. */
static const unsigned stage_ahead[VB_PREFETCH_STAGES] = {LOOKAHEAD, 3, 1};

typedef struct upcoming {
    uint64_t keys[UPCOMING_KEYS]; /* by the event they were taken at, modulo the ring (0: none) */
    uint64_t taken;               /* events so far */
} upcoming;

/* A drive's place in its source, and where the keys of the loaded events'
 * allocations are kept (a trace's reader keeps them as tags). A key is
 * the allocator's for the block (vb_malloc_keyed), so a free needs no
 * look-up by address. */
typedef struct cursor {
    const vb_drive_source *source;
    size_t next;                 /* loaded: the next item */
    const vb_drive_event *item;  /* loaded: the current one */
    uint64_t *keys;              /* loaded: each allocation's block key (0: none) */
    vb_allocator *allocator;     /* where the frees go */
    upcoming ahead;
} cursor;

/* The key of the free LOOKAHEAD events after the current one, as known now
 * (0: none, or not known yet); for loaded events, it also asks for the
 * key of the one VB_TRACE_LOOKAHEAD_FAR events ahead. */
static uint64_t key_ahead(cursor *c)
{
    if (c->source->trace) {
        uint64_t tag = 0;
        return vb_trace_lookahead(c->source->trace, &tag) ? tag : 0;
    }
    const vb_drive_events *events = c->source->events;
    size_t far = c->next - 1 + VB_TRACE_LOOKAHEAD_FAR, near = c->next - 1 + LOOKAHEAD;
    if (far < events->count && !events->items[far].is_alloc) __builtin_prefetch(&c->keys[events->items[far].slot]);
    return near < events->count && !events->items[near].is_alloc ? c->keys[events->items[near].slot] : 0;
}

/* Before each event: takes the key ahead and asks for each stage of the
 * frees as they come nearer. */
static void prefetch_frees(cursor *c)
{
    upcoming *ahead = &c->ahead;
    ahead->keys[ahead->taken % UPCOMING_KEYS] = key_ahead(c);
    for (int stage = 0; stage < VB_PREFETCH_STAGES; stage++) {
        uint64_t key = ahead->keys[(ahead->taken - (LOOKAHEAD - stage_ahead[stage])) % UPCOMING_KEYS];
        if (key && ahead->taken >= LOOKAHEAD - stage_ahead[stage]) vb_prefetch_free(c->allocator, key, stage);
    }
    ahead->taken++;
}

/* The next event: read from the trace, or the next loaded one as the
 * reader would give it (a FREE's tag its allocation's block key). */
static vb_status next_event(cursor *c, vb_trace_event *event)
{
    if (c->source->trace) return vb_trace_next(c->source->trace, event);
    if (c->next == c->source->events->count) {
        *event = (vb_trace_event){.kind = VB_TRACE_END};
        return VB_OK;
    }
    const vb_drive_event *item = c->item = &c->source->events->items[c->next++];
    *event = (vb_trace_event){
        .kind = item->is_alloc ? VB_TRACE_ALLOC : VB_TRACE_FREE,
        .id = item->slot,
        .size = item->size,
        .stream = item->stream,
        .tag = item->is_alloc ? 0 : c->keys[item->slot],
    };
    return VB_OK;
}

/* Keeps the block key the current allocation got (0: none) for its free. */
static void keep_key(cursor *c, uint64_t key)
{
    if (c->source->trace) vb_trace_tag(c->source->trace, key);
    else c->keys[c->item->slot] = key;
}

/* The trace line of the current event. */
static uint64_t current_line(const cursor *c)
{
    return c->source->trace ? vb_trace_line(c->source->trace) : c->item->line;
}

/* The device stream of trace stream `id`, fetched on first use. */
static vb_status stream_of(vb_drive_target *target, uint32_t id, vb_stream *out)
{
    if (!target->streams[id]) {
        vb_status status = target->run ? vb_run_extra_stream(target->run, id, &target->streams[id])
                                       : target->device->ops->stream_create(target->device, &target->streams[id]);
        if (status != VB_OK) return status;
    }
    *out = target->streams[id];
    return VB_OK;
}

/* One allocation; an OOM is counted, the first one's line and size kept. A
 * failure reading a trace names its line; loaded events keep the callee's
 * message. */
static vb_status drive_alloc(cursor *c, vb_drive_target *target, const vb_drive_hooks *hooks,
                             const vb_trace_event *event, vb_drive_result *out)
{
    vb_trace *trace = c->source->trace;
    vb_stream stream = NULL;
    vb_status status = stream_of(target, event->stream, &stream);
    if (status != VB_OK)
        return trace ? vb_trace_error(trace, status, "cannot create a stream for trace stream %u: %s", event->stream,
                                      vb_last_error())
                     : status;
    if (hooks && hooks->before_alloc) hooks->before_alloc(hooks->context, event->size, event->stream);
    vb_addr addr = 0;
    uint64_t key = 0;
    status = target->run ? vb_run_malloc_keyed(target->run, event->size, stream, &addr, &key)
                         : vb_malloc_keyed(target->allocator, event->size, stream, &addr, &key);
    int oom = status == VB_ERR_OOM;
    if (oom) {
        addr = 0;
        key = 0;
        if (!out->ooms++) {
            out->first_oom_line = current_line(c);
            out->first_oom_bytes = event->size;
        }
    } else if (status != VB_OK) {
        return trace ? vb_trace_error(trace, status, "allocation of %llu bytes failed: %s",
                                      (unsigned long long)event->size, vb_last_error())
                     : status;
    }
    if (hooks && hooks->after_alloc) hooks->after_alloc(hooks->context, addr, event->size, event->stream, oom);
    keep_key(c, key);
    return VB_OK;
}

/* One free, by the block's key; the free of an allocation that found no
 * memory (key 0) is skipped. The address is looked up only for hooks that
 * want it. */
static vb_status drive_free(cursor *c, vb_drive_target *target, const vb_drive_hooks *hooks,
                            const vb_trace_event *event)
{
    uint64_t key = event->tag;
    if (key == 0) return VB_OK;
    vb_addr addr = 0;
    if (hooks && (hooks->before_free || hooks->after_free))
        addr = vb_keyed_addr(target->run ? vb_run_allocator(target->run) : target->allocator, key);
    if (hooks && hooks->before_free) hooks->before_free(hooks->context, addr, event->stream);
    vb_status status = target->run ? vb_run_free_keyed(target->run, key) : vb_free_keyed(target->allocator, key);
    if (status == VB_OK && hooks && hooks->after_free) hooks->after_free(hooks->context, addr, event->stream);
    if (status != VB_OK && c->source->trace)
        return vb_trace_error(c->source->trace, status, "free of id %llu failed: %s", (unsigned long long)event->id,
                              vb_last_error());
    return status;
}

vb_status vb_drive(const vb_drive_source *source, vb_drive_target *target, const vb_drive_hooks *hooks,
                   int stop_at_oom, vb_drive_result *out)
{
    memset(out, 0, sizeof *out);
    cursor c = {.source = source, .allocator = target->run ? vb_run_allocator(target->run) : target->allocator};
    if (!source->trace) {
        c.keys = calloc(source->events->slots ? source->events->slots : 1, sizeof *c.keys);
        if (!c.keys) return vb_error(VB_ERR_OOM, "out of host memory");
    }
    vb_trace_event event;
    vb_status status;
    while ((status = next_event(&c, &event)) == VB_OK && event.kind != VB_TRACE_END) {
        prefetch_frees(&c);
        switch (event.kind) {
        case VB_TRACE_ALLOC: status = drive_alloc(&c, target, hooks, &event, out); break;
        case VB_TRACE_FREE: status = drive_free(&c, target, hooks, &event); break;
        case VB_TRACE_FAILED_ALLOC: out->recorded_failures++; break;
        case VB_TRACE_MARK:
            if (hooks && hooks->mark) status = hooks->mark(hooks->context, event.name);
            break;
        case VB_TRACE_END: break;
        }
        if (status != VB_OK) break;
        out->events += event.kind != VB_TRACE_MARK;
        if (stop_at_oom && out->ooms) {
            out->stopped = 1;
            break;
        }
        if (hooks && hooks->after_event) {
            status = hooks->after_event(hooks->context, out);
            if (status != VB_OK) break;
        }
    }
    free(c.keys);
    return status;
}

void vb_drive_target_close(vb_drive_target *target)
{
    if (!target->run)
        for (size_t i = 0; i < VB_TRACE_MAX_STREAMS; i++)
            if (target->streams[i]) target->device->ops->stream_destroy(target->device, target->streams[i]);
    memset(target->streams, 0, sizeof target->streams);
}
