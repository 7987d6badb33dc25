/* vrambench — the one trace driver (see trace_drive.h). */
#include "trace_drive.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Counts out->peak_live_bytes, out->largest_bytes and
 * out->through_last_alloc over the events. */
static vb_status count_demand(vb_drive_events *out)
{
    uint64_t *sizes = calloc(out->slots ? out->slots : 1, sizeof *sizes);
    if (!sizes) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    uint64_t live = 0;
    for (size_t i = 0; i < out->count; i++) {
        const vb_drive_event *event = &out->items[i];
        if (event->kind == VB_TRACE_ALLOC) {
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
                status = vb_error(VB_ERR_HOST_OOM, "out of host memory");
                break;
            }
            out->items = more;
        }
        vb_drive_event *item = &out->items[out->count++];
        *item = (vb_drive_event){event.size, vb_trace_line(trace), 0, event.stream, event.kind};
        if (item->kind == VB_TRACE_ALLOC) {
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

/* A trace being read is driven a batch at a time: up to BATCH_EVENTS of
 * its events are read into memory, then driven as loaded events are, so
 * that a free finds its block's key in an array by the allocation's slot
 * and the frees a few events ahead are known, to be prefetched. Each
 * allocation read takes a slot (the reader's tag is slot + 1); a slot is
 * free again once its free is driven, and taken again only by a later
 * batch, so the slots stay about the live allocations plus a batch.
 * Through a run, reading a batch is the run's own work, as its samples are
 * (vb_run_add_overhead_ns): the timed figures are the allocator's calls
 * and the drive, not the trace reader's parsing, which is the same for
 * every allocator. A batch ends at a step marker, whose name it keeps. */
#define BATCH_EVENTS 2048

typedef struct batch {
    vb_drive_events events;               /* the batch (items, count); slots: slots made so far */
    uint64_t ids[BATCH_EVENTS];           /* each event's trace id, for messages */
    uint64_t consumed[BATCH_EVENTS];      /* the reader's consumed bytes through each event */
    char mark[VB_TRACE_MAX_NAME + 1];     /* the name of the marker the batch ends with */
    uint32_t *free_slots;                 /* slots whose free was driven, to take again */
    size_t free_count;
    int ended;                            /* the reader has no more: END, or read_status */
    vb_status read_status;                /* the reader's error after the batch's events, or VB_OK */
    char read_error[512];                 /* ... and its message */
} batch;

/* Prefetching the frees to come (vb_prefetch_frees). Each event, the event
 * LOOKAHEAD events ahead is looked at and, when it is a free, its key goes
 * into a ring of the frees ahead (the key of the one LOOKAHEAD_FAR ahead
 * was asked for first, so that it is in the cache by then). At each free,
 * the frees after it are asked for in stages, each a little later than
 * the one before (stage s for the free free_ahead[s] frees ahead), so
 * that each stage finds what the one before asked for in the cache. The
 * stages are a few events apart: at 400,000 events of a random trace an
 * event takes about 100 ns, and each stage's line comes from memory in
 * about that long or more (docs/bench.md, "Replay speed"). The ring and
 * the stages go by frees, not by events: asking at every event for
 * whatever free lay a given number of events ahead took a branch per
 * stage that went either way at random (an allocation or a free), and its
 * mispredictions cost more than the prefetches saved on short traces. */
#define LOOKAHEAD 32
#define LOOKAHEAD_FAR 40 /* where the key of a free is asked for, to be read at LOOKAHEAD */
#define UPCOMING_FREES 64 /* a power of two above LOOKAHEAD: room for every free in the window */
_Static_assert(LOOKAHEAD < UPCOMING_FREES && (UPCOMING_FREES & (UPCOMING_FREES - 1)) == 0, "room for the window");

/* The frees ahead at which each stage is asked for. */
static const unsigned free_ahead[VB_PREFETCH_STAGES] = {8, 5, 3, 1};

typedef struct upcoming {
    uint64_t keys[UPCOMING_FREES];   /* the frees ahead, in order, modulo the ring */
    uint64_t events[UPCOMING_FREES]; /* ... the event each is (counting from 0) */
    uint64_t pushed, passed;         /* frees put in the ring so far; those driven or passed */
    uint64_t taken;                  /* events so far */
} upcoming;

/* A drive's place in its events (loaded, or the batch being driven) and
 * the block key of each allocation, by slot. A key is the allocator's for
 * the block (vb_malloc_keyed), so a free needs no look-up by address. */
typedef struct cursor {
    const vb_drive_source *source;
    const vb_drive_events *events; /* source->events, or the batch's */
    size_t next;                 /* the next item */
    const vb_drive_event *item;  /* the current one */
    uint64_t *keys;              /* each slot's block key (0: none) */
    size_t key_capacity;
    batch *batch;                /* a trace's, or NULL */
    vb_run *run;                 /* where reading a batch is counted as overhead, or NULL */
    vb_allocator *allocator;     /* where the frees go */
    upcoming ahead;
} cursor;

/* Before each event: puts the event LOOKAHEAD events ahead into the ring
 * when it is a free (with no branch on that: the slot's key is read and
 * written either way, and counted only for a free) and asks for the key of
 * the one LOOKAHEAD_FAR ahead. The key of a free whose allocation is not
 * driven yet is 0, or the last one of its slot (the seam ignores a key of
 * a block freed already). */
static void look_ahead(cursor *c)
{
    const vb_drive_events *events = c->events;
    upcoming *ahead = &c->ahead;
    size_t far = c->next - 1 + LOOKAHEAD_FAR, near = c->next - 1 + LOOKAHEAD;
    if (far < events->count) __builtin_prefetch(&c->keys[events->items[far].slot]);
    if (near < events->count) {
        const vb_drive_event *item = &events->items[near];
        ahead->keys[ahead->pushed % UPCOMING_FREES] = c->keys[item->slot];
        ahead->events[ahead->pushed % UPCOMING_FREES] = ahead->taken + LOOKAHEAD;
        ahead->pushed += item->kind == VB_TRACE_FREE;
    }
    ahead->taken++;
}

/* At a free: drops the frees up to this event from the ring and asks for
 * stage s of the free free_ahead[s] frees after this one, when the ring
 * holds it. As the drive goes from free to free, each free in the ring
 * passes those places in turn and gets every stage, in order, one event
 * apart at least. A free that comes into the ring nearer than 8 frees
 * ahead (fewer than 8 frees in the LOOKAHEAD events before it) misses the
 * stages of the places it never passes: those lines are read when needed.
 * Asking each missed stage at once instead, as this did before, cost 31
 * instructions per event more (of 793) on a random trace where no free
 * comes in late (docs/bench.md, "Replay speed"). */
static void prefetch_frees(cursor *c)
{
    upcoming *ahead = &c->ahead;
    uint64_t now = ahead->taken - 1;
    while (ahead->passed < ahead->pushed && ahead->events[ahead->passed % UPCOMING_FREES] <= now) ahead->passed++;
    uint64_t passed = ahead->passed, pushed = ahead->pushed; /* passed: the next free after this one */
    uint64_t keys[VB_PREFETCH_STAGES];
    for (int stage = 0; stage < VB_PREFETCH_STAGES; stage++) {
        uint64_t free = passed + free_ahead[stage] - 1;
        keys[stage] = free < pushed ? ahead->keys[free % UPCOMING_FREES] : 0;
    }
    vb_prefetch_frees(c->allocator, keys);
}

/* Makes room for `capacity` slots: their keys, and the slots to be freed.
 * VB_OK, or VB_ERR_HOST_OOM (what was there is kept). */
static vb_status grow_slots(cursor *c, size_t capacity)
{
    uint64_t *keys = realloc(c->keys, capacity * sizeof *keys);
    if (keys) c->keys = keys;
    uint32_t *free_slots = keys ? realloc(c->batch->free_slots, capacity * sizeof *free_slots) : NULL;
    if (!free_slots) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    c->batch->free_slots = free_slots;
    c->key_capacity = capacity;
    return VB_OK;
}

/* A slot for an allocation being read: a free one, else a new one (the
 * keys, and the room for slots to be freed, grown to match). */
static vb_status take_slot(cursor *c, uint32_t *out)
{
    batch *b = c->batch;
    if (b->free_count) {
        *out = b->free_slots[--b->free_count];
        return VB_OK;
    }
    uint32_t slot = b->events.slots;
    if (slot == UINT32_MAX) return vb_error(VB_ERR_INVALID, "more than %u allocations live at once", UINT32_MAX - 1);
    if (slot == c->key_capacity) {
        vb_status status = grow_slots(c, c->key_capacity ? c->key_capacity * 2 : 4096);
        if (status != VB_OK) return status;
    }
    c->keys[slot] = 0;
    b->events.slots++;
    *out = slot;
    return VB_OK;
}

/* The reader has no more after this batch: its end (VB_OK), or an error
 * whose message is kept for when the events before it are driven. */
static void end_batches(batch *b, vb_status status)
{
    b->ended = 1;
    b->read_status = status;
    if (status != VB_OK) snprintf(b->read_error, sizeof b->read_error, "%s", vb_last_error());
}

/* Reads the trace's next events into the batch: up to BATCH_EVENTS, to a
 * marker, or to the end (or the reader's error, kept for after the
 * events before it are driven). */
static void read_batch(cursor *c)
{
    batch *b = c->batch;
    vb_trace *trace = c->source->trace;
    uint64_t started = c->run ? vb_now_ns() : 0;
    vb_drive_event *items = b->events.items;
    b->events.count = 0;
    while (b->events.count < BATCH_EVENTS) {
        vb_trace_event event;
        vb_status status = vb_trace_next(trace, &event);
        if (status != VB_OK || event.kind == VB_TRACE_END) {
            end_batches(b, status);
            break;
        }
        size_t i = b->events.count;
        vb_drive_event *item = &items[i];
        *item = (vb_drive_event){event.size, vb_trace_line(trace), 0, event.stream, event.kind};
        b->ids[i] = event.id;
        b->consumed[i] = vb_trace_consumed_bytes(trace);
        if (event.kind == VB_TRACE_ALLOC) {
            status = take_slot(c, &item->slot);
            if (status != VB_OK) {
                end_batches(b, vb_trace_error(trace, status, "%s", vb_last_error()));
                break;
            }
            vb_trace_tag(trace, (uint64_t)item->slot + 1);
        } else if (event.kind == VB_TRACE_FREE) {
            item->slot = (uint32_t)(event.tag - 1); /* every allocation read was tagged */
        }
        b->events.count++;
        if (event.kind == VB_TRACE_MARK) {
            snprintf(b->mark, sizeof b->mark, "%s", event.name);
            break;
        }
    }
    if (c->run) vb_run_add_overhead_ns(c->run, vb_now_ns() - started);
}

/* The next event: the next loaded one, or the batch's (read when the one
 * before is done), as the reader would give it (a FREE's tag its
 * allocation's block key). After a trace's last event, the reader's END
 * or error. */
static vb_status next_event(cursor *c, vb_trace_event *event)
{
    if (c->next == c->events->count && c->batch && !c->batch->ended) {
        read_batch(c);
        c->next = 0;
    }
    if (c->next == c->events->count) {
        *event = (vb_trace_event){.kind = VB_TRACE_END};
        return c->batch && c->batch->read_status != VB_OK
                   ? vb_error(c->batch->read_status, "%s", c->batch->read_error)
                   : VB_OK;
    }
    size_t i = c->next++;
    const vb_drive_event *item = c->item = &c->events->items[i];
    *event = (vb_trace_event){
        .kind = (vb_trace_kind)item->kind,
        .id = c->batch ? c->batch->ids[i] : item->slot,
        .size = item->size,
        .stream = item->stream,
        .name = item->kind == VB_TRACE_MARK ? c->batch->mark : NULL,
        .tag = item->kind == VB_TRACE_FREE ? c->keys[item->slot] : 0,
    };
    return VB_OK;
}

/* After a free is driven: a trace's slot is free for a later batch. */
static void release_slot(cursor *c)
{
    if (c->batch) c->batch->free_slots[c->batch->free_count++] = c->item->slot;
}

/* Keeps the block key the current allocation got (0: none) for its free. */
static void keep_key(cursor *c, uint64_t key)
{
    c->keys[c->item->slot] = key;
}

/* The trace line of the current event. */
static uint64_t current_line(const cursor *c)
{
    return c->item->line;
}

/* What the trace's allocations still live are tagged with: their block
 * keys, for the caller (vb_trace_each_live); 0 for one read ahead of where
 * the drive stopped, never driven. */
static uint64_t key_of_slot_tag(void *context, uint64_t tag)
{
    const cursor *c = context;
    return tag ? c->keys[tag - 1] : 0;
}

/* At the end of a trace's drive: the allocations read but not driven (a
 * drive stopped early) have no key; every live allocation's tag becomes
 * its key. Counted as reading is. */
static void hand_back_keys(cursor *c)
{
    uint64_t started = c->run ? vb_now_ns() : 0;
    for (size_t i = c->next; i < c->events->count; i++)
        if (c->events->items[i].kind == VB_TRACE_ALLOC) c->keys[c->events->items[i].slot] = 0;
    vb_trace_retag_live(c->source->trace, key_of_slot_tag, c);
    if (c->run) vb_run_add_overhead_ns(c->run, vb_now_ns() - started);
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
        return trace ? vb_trace_error_at(trace, current_line(c), status, "cannot create a stream for trace stream %u: %s",
                                         event->stream, vb_last_error())
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
        return trace ? vb_trace_error_at(trace, current_line(c), status, "allocation of %llu bytes failed: %s",
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
        return vb_trace_error_at(c->source->trace, current_line(c), status, "free of id %llu failed: %s",
                                 (unsigned long long)event->id, vb_last_error());
    return status;
}

/* Sets up the cursor: the keys of loaded events' allocations, or a batch
 * for a trace's. */
static vb_status cursor_open(cursor *c, const vb_drive_source *source, vb_drive_target *target)
{
    *c = (cursor){.source = source, .events = source->events, .run = target->run,
                  .allocator = target->run ? vb_run_allocator(target->run) : target->allocator};
    if (source->trace) {
        c->batch = calloc(1, sizeof *c->batch);
        vb_drive_event *items = c->batch ? malloc(BATCH_EVENTS * sizeof *items) : NULL;
        if (!items) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        c->batch->events.items = items;
        c->events = &c->batch->events;
        /* Slots from the start, so that look_ahead may read any item's key
         * (an item that is no allocation or free names slot 0). */
        vb_status status = grow_slots(c, 4096);
        if (status == VB_OK) memset(c->keys, 0, c->key_capacity * sizeof *c->keys);
        return status;
    }
    c->keys = calloc(source->events->slots ? source->events->slots : 1, sizeof *c->keys);
    return c->keys ? VB_OK : vb_error(VB_ERR_HOST_OOM, "out of host memory");
}

static void cursor_close(cursor *c)
{
    if (c->batch) {
        free(c->batch->events.items);
        free(c->batch->free_slots);
        free(c->batch);
    }
    free(c->keys);
}

vb_status vb_drive(const vb_drive_source *source, vb_drive_target *target, const vb_drive_hooks *hooks,
                   int stop_at_oom, vb_drive_result *out)
{
    memset(out, 0, sizeof *out);
    cursor c;
    vb_status status = cursor_open(&c, source, target);
    vb_trace_event event;
    while (status == VB_OK && (status = next_event(&c, &event)) == VB_OK && event.kind != VB_TRACE_END) {
        look_ahead(&c);
        switch (event.kind) {
        case VB_TRACE_ALLOC: status = drive_alloc(&c, target, hooks, &event, out); break;
        case VB_TRACE_FREE:
            prefetch_frees(&c);
            status = drive_free(&c, target, hooks, &event);
            release_slot(&c);
            break;
        case VB_TRACE_FAILED_ALLOC: out->recorded_failures++; break;
        case VB_TRACE_MARK:
            if (hooks && hooks->mark) status = hooks->mark(hooks->context, event.name);
            break;
        case VB_TRACE_END: break;
        }
        if (status != VB_OK) break;
        out->events += event.kind != VB_TRACE_MARK;
        if (c.batch) out->consumed_bytes = c.batch->consumed[c.next - 1];
        if (stop_at_oom && out->ooms) {
            out->stopped = 1;
            break;
        }
        if (hooks && hooks->after_event &&
            (!hooks->after_event_from || out->consumed_bytes >= *hooks->after_event_from)) {
            status = hooks->after_event(hooks->context, out);
            if (status != VB_OK) break;
        }
    }
    if (c.batch && c.batch->events.items) hand_back_keys(&c);
    cursor_close(&c);
    return status;
}

void vb_drive_target_close(vb_drive_target *target)
{
    if (!target->run)
        for (size_t i = 0; i < VB_TRACE_MAX_STREAMS; i++)
            if (target->streams[i]) target->device->ops->stream_destroy(target->device, target->streams[i]);
    memset(target->streams, 0, sizeof target->streams);
}
