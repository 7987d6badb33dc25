/* vrambench — a trace driven straight through an allocator (trace_drive.h). */
#include "trace_drive.h"

#include <stdlib.h>
#include <string.h>

/* The device stream of trace stream `id`, made on first use. */
static vb_status stream_of(vb_drive_streams *streams, uint32_t id, vb_stream *out)
{
    if (!streams->handles[id]) {
        vb_status status = streams->device->ops->stream_create(streams->device, &streams->handles[id]);
        if (status != VB_OK) return status;
    }
    *out = streams->handles[id];
    return VB_OK;
}

/* One allocation; an OOM is counted, and ends the drive with `stop_at_oom`. */
static vb_status drive_alloc(vb_trace *trace, vb_allocator *allocator, vb_drive_streams *streams,
                             const vb_trace_event *event, const vb_drive_hooks *hooks, vb_drive_result *out)
{
    vb_stream stream = NULL;
    vb_status status = stream_of(streams, event->stream, &stream);
    if (status != VB_OK) return vb_trace_error(trace, status, "cannot create a stream: %s", vb_last_error());
    if (hooks && hooks->before_alloc) hooks->before_alloc(hooks->context, event->size, event->stream);
    vb_addr addr = 0;
    status = vb_malloc(allocator, event->size, stream, &addr);
    int oom = status == VB_ERR_OOM;
    if (oom) {
        addr = 0;
        if (!out->ooms++) {
            out->first_oom_line = vb_trace_line(trace);
            out->first_oom_bytes = event->size;
        }
    } else if (status != VB_OK) {
        return vb_trace_error(trace, status, "allocation of %llu bytes failed: %s", (unsigned long long)event->size,
                              vb_last_error());
    }
    if (hooks && hooks->after_alloc) hooks->after_alloc(hooks->context, addr, event->size, event->stream, oom);
    vb_trace_tag(trace, addr);
    return VB_OK;
}

vb_status vb_drive_trace(const char *path, vb_allocator *allocator, vb_drive_streams *streams, int stop_at_oom,
                         const vb_drive_hooks *hooks, vb_drive_result *out)
{
    memset(out, 0, sizeof *out);
    vb_trace *trace = NULL;
    vb_status status = vb_trace_open(path, &trace);
    vb_trace_event event;
    while (status == VB_OK) {
        status = vb_trace_next(trace, &event);
        if (status != VB_OK || event.kind == VB_TRACE_END) break;
        if (event.kind == VB_TRACE_ALLOC) {
            status = drive_alloc(trace, allocator, streams, &event, hooks, out);
            out->events++;
            if (status == VB_OK && stop_at_oom && out->ooms) {
                out->stopped = 1;
                break;
            }
        } else if (event.kind == VB_TRACE_FREE) {
            out->events++;
            if (!event.tag) continue; /* its allocation got no memory */
            if (hooks && hooks->before_free) hooks->before_free(hooks->context, event.tag, event.stream);
            status = vb_free(allocator, event.tag);
            if (status != VB_OK)
                status = vb_trace_error(trace, status, "free of id %llu failed: %s", (unsigned long long)event.id,
                                        vb_last_error());
        } else if (event.kind == VB_TRACE_MARK && hooks && hooks->mark) {
            hooks->mark(hooks->context, event.name);
        }
    }
    vb_trace_close(trace);
    return status;
}

void vb_drive_streams_close(vb_drive_streams *streams)
{
    for (size_t i = 0; i < VB_TRACE_MAX_STREAMS; i++)
        if (streams->handles[i]) streams->device->ops->stream_destroy(streams->device, streams->handles[i]);
    memset(streams->handles, 0, sizeof streams->handles);
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
    if (status != VB_OK) vb_drive_events_free(out);
    return status;
}

void vb_drive_events_free(vb_drive_events *events)
{
    free(events->items);
    memset(events, 0, sizeof *events);
}

vb_status vb_drive_events_run(const vb_drive_events *events, vb_allocator *allocator, vb_drive_streams *streams,
                              int stop_at_oom, vb_drive_result *out)
{
    memset(out, 0, sizeof *out);
    vb_addr *addresses = calloc(events->slots ? events->slots : 1, sizeof *addresses);
    if (!addresses) return vb_error(VB_ERR_OOM, "out of host memory");
    vb_status status = VB_OK;
    for (size_t i = 0; i < events->count && status == VB_OK; i++) {
        const vb_drive_event *event = &events->items[i];
        out->events++;
        if (!event->is_alloc) {
            if (addresses[event->slot]) status = vb_free(allocator, addresses[event->slot]);
            continue;
        }
        vb_stream stream = NULL;
        status = stream_of(streams, event->stream, &stream);
        if (status != VB_OK) break;
        status = vb_malloc(allocator, event->size, stream, &addresses[event->slot]);
        if (status == VB_ERR_OOM) {
            status = VB_OK;
            addresses[event->slot] = 0;
            if (!out->ooms++) {
                out->first_oom_line = event->line;
                out->first_oom_bytes = event->size;
            }
            if (stop_at_oom) {
                out->stopped = 1;
                break;
            }
        }
    }
    free(addresses);
    return status;
}
