/* vrambench — deferred reuse for record_stream (see deferred.h). */
#include "deferred.h"

#include <stdlib.h>

void vb_deferred_init(vb_deferred *deferred, vb_device *dev)
{
    deferred->device = dev;
    deferred->queues = NULL;
    deferred->queue_count = deferred->queue_capacity = 0;
    deferred->spare_entries = NULL;
    deferred->outstanding = 0;
}

/* The queue of `stream`, created on first use; NULL when host memory runs out.
 * Programs use a handful of streams, so a scan is the cheapest lookup. */
static vb_deferred_queue *queue_of(vb_deferred *deferred, vb_stream stream)
{
    for (size_t i = 0; i < deferred->queue_count; i++)
        if (deferred->queues[i].stream == stream) return &deferred->queues[i];
    if (deferred->queue_count == deferred->queue_capacity) {
        size_t capacity = deferred->queue_capacity ? deferred->queue_capacity * 2 : 4;
        vb_deferred_queue *queues = realloc(deferred->queues, capacity * sizeof *queues);
        if (!queues) return NULL;
        deferred->queues = queues;
        deferred->queue_capacity = capacity;
    }
    vb_deferred_queue *queue = &deferred->queues[deferred->queue_count++];
    queue->stream = stream;
    queue->head = queue->tail = NULL;
    return queue;
}

/* An entry with a created event, recycled when possible; NULL on failure. */
static vb_deferred_entry *take_entry(vb_deferred *deferred)
{
    vb_deferred_entry *entry = deferred->spare_entries;
    if (entry) {
        deferred->spare_entries = entry->next;
        return entry;
    }
    entry = malloc(sizeof *entry);
    if (!entry) return NULL;
    if (deferred->device->ops->event_create(deferred->device, &entry->event) != VB_OK) {
        free(entry);
        return NULL;
    }
    return entry;
}

static void recycle_entry(vb_deferred *deferred, vb_deferred_entry *entry)
{
    entry->item = NULL;
    entry->next = deferred->spare_entries;
    deferred->spare_entries = entry;
}

/* Records one event per stream; a stream whose event cannot be had is
 * synchronized on the spot, which is what the event would have waited for. */
size_t vb_deferred_hold(vb_deferred *deferred, void *item, const vb_stream *streams, size_t count)
{
    vb_device *dev = deferred->device;
    size_t recorded = 0;
    for (size_t i = 0; i < count; i++) {
        vb_deferred_queue *queue = queue_of(deferred, streams[i]);
        vb_deferred_entry *entry = queue ? take_entry(deferred) : NULL;
        if (entry && dev->ops->event_record(dev, entry->event, streams[i]) != VB_OK) {
            recycle_entry(deferred, entry);
            entry = NULL;
        }
        if (!entry) {
            dev->ops->stream_synchronize(dev, streams[i]);
            continue;
        }
        entry->item = item;
        entry->next = NULL;
        if (queue->tail) queue->tail->next = entry;
        else queue->head = entry;
        queue->tail = entry;
        deferred->outstanding++;
        recorded++;
    }
    return recorded;
}

/* Removes the head of `queue` and hands its item back. */
static void pop_head(vb_deferred *deferred, vb_deferred_queue *queue, vb_deferred_release release, void *context)
{
    vb_deferred_entry *entry = queue->head;
    void *item = entry->item;
    queue->head = entry->next;
    if (!queue->head) queue->tail = NULL;
    recycle_entry(deferred, entry);
    deferred->outstanding--;
    release(context, item);
}

void vb_deferred_poll(vb_deferred *deferred, vb_deferred_release release, void *context)
{
    if (deferred->outstanding == 0) return;
    vb_device *dev = deferred->device;
    for (size_t i = 0; i < deferred->queue_count; i++) {
        vb_deferred_queue *queue = &deferred->queues[i];
        while (queue->head && dev->ops->event_query(dev, queue->head->event)) pop_head(deferred, queue, release, context);
    }
}

void vb_deferred_drain(vb_deferred *deferred, vb_deferred_release release, void *context)
{
    if (deferred->outstanding == 0) return;
    vb_device *dev = deferred->device;
    for (size_t i = 0; i < deferred->queue_count; i++) {
        vb_deferred_queue *queue = &deferred->queues[i];
        while (queue->head) {
            dev->ops->event_synchronize(dev, queue->head->event);
            pop_head(deferred, queue, release, context);
        }
    }
}

/* Destroys the events and frees a chain of entries. */
static void free_entries(vb_deferred *deferred, vb_deferred_entry *entry)
{
    while (entry) {
        vb_deferred_entry *next = entry->next;
        deferred->device->ops->event_destroy(deferred->device, entry->event);
        free(entry);
        entry = next;
    }
}

void vb_deferred_destroy(vb_deferred *deferred)
{
    for (size_t i = 0; i < deferred->queue_count; i++) free_entries(deferred, deferred->queues[i].head);
    free_entries(deferred, deferred->spare_entries);
    free(deferred->queues);
    vb_deferred_init(deferred, deferred->device);
}
