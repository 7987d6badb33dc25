/* vrambench — deferred reuse for record_stream.
 *
 * A block freed while other streams may still use it (record_stream) must
 * not be handed out again before the work those streams had queued at the
 * free has completed. The allocator gives such a block to vb_deferred_hold
 * with the streams it was recorded on; one event is recorded per stream, and
 * vb_deferred_poll (called at the start of every malloc) hands the block back
 * through a callback, once per completed event. This is the shape of PyTorch's
 * CUDACachingAllocator (insert_events / process_events): per-stream FIFO
 * queues, scanned only up to the first event not yet reached, since a stream
 * completes its events in the order they were recorded. Events and queue
 * entries are recycled, so a steady state allocates nothing.
 *
 * Items are opaque to this module: the allocator counts the outstanding
 * events of each block and frees it when its count reaches zero. */
#ifndef VB_DEFERRED_H
#define VB_DEFERRED_H

#include <stddef.h>
#include <stdint.h>

#include "base/device.h"

typedef struct vb_deferred_entry {
    vb_event event;
    void *item;
    struct vb_deferred_entry *next;
} vb_deferred_entry;

/* The events recorded on one stream, oldest first. */
typedef struct vb_deferred_queue {
    vb_stream stream;
    vb_deferred_entry *head, *tail;
} vb_deferred_queue;

typedef struct vb_deferred {
    vb_device *device;
    vb_deferred_queue *queues;
    size_t queue_count, queue_capacity;
    vb_deferred_entry *spare_entries;   /* recycled entries (their events stay created) */
    uint64_t outstanding;               /* events not yet handed back */
} vb_deferred;

/* Called once per completed event of `item`. */
typedef void (*vb_deferred_release)(void *context, void *item);

/* Starts an empty set of deferrals on `dev`. */
void vb_deferred_init(vb_deferred *deferred, vb_device *dev);

/* Records an event on each of `streams[0..count)` and keeps `item` until each
 * has completed; returns how many events were recorded (the number of
 * release callbacks `item` will get). When an event cannot be had, that
 * stream is synchronized instead, so the result is never unsafe: it may be 0,
 * and the item is then free to reuse at once. */
size_t vb_deferred_hold(vb_deferred *deferred, void *item, const vb_stream *streams, size_t count);

/* Hands back, without waiting, every item event that has completed. */
void vb_deferred_poll(vb_deferred *deferred, vb_deferred_release release, void *context);

/* Waits for every outstanding event and hands all items back. */
void vb_deferred_drain(vb_deferred *deferred, vb_deferred_release release, void *context);

/* 1 if some item is still held. */
static inline int vb_deferred_any(const vb_deferred *deferred)
{
    return deferred->outstanding != 0;
}

/* Destroys every event (held items are dropped without callbacks) and frees
 * the bookkeeping. */
void vb_deferred_destroy(vb_deferred *deferred);

#endif
