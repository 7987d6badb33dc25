/* vrambench tests — the shadow ledger: what the program has been handed,
 * computed independently of any allocator.
 *
 * It keeps every block the test holds in a sorted array (by address), so a
 * new block that overlaps any other is caught at once by looking at its two
 * neighbours. A freed block that is still in use on another stream
 * (record_stream with work queued there) stays in the array, marked
 * pending, until every event the test recorded for that work has completed:
 * an allocator that hands its memory out earlier, to a stream not made to
 * wait for that work, shows up as an overlap.
 *
 * It also sums the requested bytes of live blocks itself, with their peak,
 * and the maxima of allocated and reserved bytes the test observed, so the
 * allocator's statistics can be compared against figures it did not make.
 *
 * Deliberately a plain sorted array, not the allocators' ordered set: the
 * ledger must not share code (or bugs) with what it checks.
 */
#ifndef VB_TEST_LEDGER_H
#define VB_TEST_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include "allocators/allocator.h"

#define VB_LEDGER_MAX_USES 4

typedef struct vb_ledger_block {
    vb_addr addr;
    uint64_t size;                     /* bytes requested */
    vb_stream stream;                  /* the stream it was allocated on */
    uint64_t tag;                      /* the test's own label (e.g. a pattern seed) */
    int pending;                       /* freed, but stream work using it may still run */
    size_t use_count;
    vb_event uses[VB_LEDGER_MAX_USES]; /* events after the work on other streams; owned */
} vb_ledger_block;

typedef struct vb_ledger {
    vb_device *device;        /* where the use events live */
    vb_ledger_block *blocks;  /* sorted by address, live and pending */
    size_t count, capacity;
    size_t live_count;
    uint64_t requested_bytes; /* sum of sizes of live blocks */
    uint64_t requested_peak;
    uint64_t allocated_seen_peak; /* maxima of what vb_ledger_observe saw */
    uint64_t reserved_seen_peak;
    char overlap[256];        /* the last overlap found, in words */
} vb_ledger;

/* An empty ledger; `device` owns the events given to vb_ledger_record_use. */
void vb_ledger_init(vb_ledger *ledger, vb_device *device);

/* Destroys every event still held and frees the ledger's memory. */
void vb_ledger_clear(vb_ledger *ledger);

/* Records a block the allocator handed out. Returns 0, or -1 when
 * [addr, addr+size) overlaps a live or pending block (nothing is recorded
 * then, and ledger->overlap says which) or host memory ran out. */
int vb_ledger_add(vb_ledger *ledger, vb_addr addr, uint64_t size, vb_stream stream, uint64_t tag);

/* The live block starting at `addr`, or NULL (pending blocks are not live). */
vb_ledger_block *vb_ledger_find(vb_ledger *ledger, vb_addr addr);

/* The live block at or after position `index` of the array, wrapping
 * around; NULL when nothing is live. Lets a test pick a random live block. */
vb_ledger_block *vb_ledger_live_at(vb_ledger *ledger, size_t index);

/* Attaches `event` (recorded by the test after work queued on another
 * stream) to the live block at `addr`; the ledger owns it from now on.
 * Returns 0, or -1 when the block has no room left (the event is destroyed). */
int vb_ledger_record_use(vb_ledger *ledger, vb_addr addr, vb_event event);

/* The program freed the live block at `addr`: its bytes leave the requested
 * sum, and the block stays pending while any of its use events has not
 * completed. Returns 0, or -1 when no live block starts there. */
int vb_ledger_release(vb_ledger *ledger, vb_addr addr);

/* Forgets pending blocks whose use events have all completed. */
void vb_ledger_settle(vb_ledger *ledger);

/* Notes allocated and reserved bytes seen now, for their observed maxima. */
void vb_ledger_observe(vb_ledger *ledger, const vb_alloc_stats *stats);

#endif
