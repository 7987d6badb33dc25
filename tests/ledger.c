/* vrambench tests — the shadow ledger (see ledger.h). */
#include "ledger.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An empty ledger whose events live on `device`. */
void vb_ledger_init(vb_ledger *ledger, vb_device *device)
{
    memset(ledger, 0, sizeof *ledger);
    ledger->device = device;
}

/* Destroys the use events of one block. */
static void drop_uses(vb_ledger *ledger, vb_ledger_block *block)
{
    for (size_t i = 0; i < block->use_count; i++) ledger->device->ops->event_destroy(ledger->device, block->uses[i]);
    block->use_count = 0;
}

/* Destroys the events still held and empties the ledger. */
void vb_ledger_clear(vb_ledger *ledger)
{
    for (size_t i = 0; i < ledger->count; i++) drop_uses(ledger, &ledger->blocks[i]);
    free(ledger->blocks);
    vb_device *device = ledger->device;
    vb_ledger_init(ledger, device);
}

/* The position of the first block whose address is >= `addr`. */
static size_t position_of(const vb_ledger *ledger, vb_addr addr)
{
    size_t low = 0, high = ledger->count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (ledger->blocks[middle].addr < addr) low = middle + 1;
        else high = middle;
    }
    return low;
}

/* 1 if [a, a+a_size) and [b, b+b_size) share a byte. Sizes are never 0 here;
 * the ends are computed without overflow by comparing distances. */
static int ranges_overlap(vb_addr a, uint64_t a_size, vb_addr b, uint64_t b_size)
{
    if (a <= b) return b - a < a_size;
    return a - b < b_size;
}

/* Describes an overlap between a new range and a recorded block. */
static void describe_overlap(vb_ledger *ledger, vb_addr addr, uint64_t size, const vb_ledger_block *other)
{
    snprintf(ledger->overlap, sizeof ledger->overlap,
             "new block 0x%" PRIx64 "+%" PRIu64 " overlaps %s block 0x%" PRIx64 "+%" PRIu64, addr, size,
             other->pending ? "a freed block still in use on another stream," : "live", other->addr,
             other->size);
}

static int uses_complete(vb_ledger *ledger, const vb_ledger_block *block);
static void remove_at(vb_ledger *ledger, size_t at);

/* A new block on `stream` overlaps the pending block at `at`. That is safe
 * only when `stream` was made to wait for the pending block's uses (a
 * stream-ordered pool does so by default: cudaMemPoolReuseAllowInternalDependencies).
 * Synchronizing `stream` then completes them too: 1 (and the pending block
 * is gone) if so, 0 if a use still runs (the memory was handed out early). */
static int reuse_is_ordered(vb_ledger *ledger, vb_stream stream, size_t at)
{
    if (!ledger->blocks[at].pending) return 0;
    if (ledger->device->ops->stream_synchronize(ledger->device, stream) != VB_OK) return 0;
    if (!uses_complete(ledger, &ledger->blocks[at])) return 0;
    remove_at(ledger, at);
    return 1;
}

/* Inserts a handed-out block in address order, refusing an overlap (a
 * pending block's memory may be handed out to a stream ordered after its
 * uses). */
int vb_ledger_add(vb_ledger *ledger, vb_addr addr, uint64_t size, vb_stream stream, uint64_t tag)
{
    size_t at = position_of(ledger, addr);
    while (at > 0 && ranges_overlap(addr, size, ledger->blocks[at - 1].addr, ledger->blocks[at - 1].size) &&
           reuse_is_ordered(ledger, stream, at - 1))
        at--;
    while (at < ledger->count && ranges_overlap(addr, size, ledger->blocks[at].addr, ledger->blocks[at].size) &&
           reuse_is_ordered(ledger, stream, at))
        ;
    /* The array never overlaps itself, so only the neighbours can touch the new range. */
    if (at > 0 && ranges_overlap(addr, size, ledger->blocks[at - 1].addr, ledger->blocks[at - 1].size)) {
        describe_overlap(ledger, addr, size, &ledger->blocks[at - 1]);
        return -1;
    }
    if (at < ledger->count && ranges_overlap(addr, size, ledger->blocks[at].addr, ledger->blocks[at].size)) {
        describe_overlap(ledger, addr, size, &ledger->blocks[at]);
        return -1;
    }
    if (ledger->count == ledger->capacity) {
        size_t capacity = ledger->capacity ? ledger->capacity * 2 : 256;
        vb_ledger_block *blocks = realloc(ledger->blocks, capacity * sizeof *blocks);
        if (!blocks) {
            snprintf(ledger->overlap, sizeof ledger->overlap, "ledger: out of host memory");
            return -1;
        }
        ledger->blocks = blocks;
        ledger->capacity = capacity;
    }
    memmove(&ledger->blocks[at + 1], &ledger->blocks[at], (ledger->count - at) * sizeof *ledger->blocks);
    ledger->blocks[at] = (vb_ledger_block){.addr = addr, .size = size, .stream = stream, .tag = tag};
    ledger->count++;
    ledger->live_count++;
    ledger->requested_bytes += size;
    if (ledger->requested_bytes > ledger->requested_peak) ledger->requested_peak = ledger->requested_bytes;
    return 0;
}

/* The live block starting exactly at `addr`, or NULL. */
vb_ledger_block *vb_ledger_find(vb_ledger *ledger, vb_addr addr)
{
    size_t at = position_of(ledger, addr);
    if (at == ledger->count || ledger->blocks[at].addr != addr || ledger->blocks[at].pending) return NULL;
    return &ledger->blocks[at];
}

/* The first live block at or after `index`, wrapping around. */
vb_ledger_block *vb_ledger_live_at(vb_ledger *ledger, size_t index)
{
    if (ledger->live_count == 0) return NULL;
    for (size_t step = 0; step < ledger->count; step++) {
        vb_ledger_block *block = &ledger->blocks[(index + step) % ledger->count];
        if (!block->pending) return block;
    }
    return NULL;
}

/* Attaches a use event to a live block (the ledger owns it). */
int vb_ledger_record_use(vb_ledger *ledger, vb_addr addr, vb_event event)
{
    vb_ledger_block *block = vb_ledger_find(ledger, addr);
    if (!block || block->use_count == VB_LEDGER_MAX_USES) {
        ledger->device->ops->event_destroy(ledger->device, event);
        return -1;
    }
    block->uses[block->use_count++] = event;
    return 0;
}

/* 1 if every use event of `block` has completed. */
static int uses_complete(vb_ledger *ledger, const vb_ledger_block *block)
{
    for (size_t i = 0; i < block->use_count; i++)
        if (!ledger->device->ops->event_query(ledger->device, block->uses[i])) return 0;
    return 1;
}

/* Removes the block at position `at` from the array. */
static void remove_at(vb_ledger *ledger, size_t at)
{
    drop_uses(ledger, &ledger->blocks[at]);
    memmove(&ledger->blocks[at], &ledger->blocks[at + 1], (ledger->count - at - 1) * sizeof *ledger->blocks);
    ledger->count--;
}

/* The program freed a block: pending while its uses run, else gone. */
int vb_ledger_release(vb_ledger *ledger, vb_addr addr)
{
    vb_ledger_block *block = vb_ledger_find(ledger, addr);
    if (!block) return -1;
    ledger->requested_bytes -= block->size;
    ledger->live_count--;
    if (uses_complete(ledger, block)) remove_at(ledger, (size_t)(block - ledger->blocks));
    else block->pending = 1;
    return 0;
}

/* Drops pending blocks whose use events have all completed. */
void vb_ledger_settle(vb_ledger *ledger)
{
    size_t kept = 0;
    for (size_t i = 0; i < ledger->count; i++) {
        vb_ledger_block *block = &ledger->blocks[i];
        if (block->pending && uses_complete(ledger, block)) {
            drop_uses(ledger, block);
            continue;
        }
        ledger->blocks[kept++] = *block;
    }
    ledger->count = kept;
}

/* Raises the observed maxima of allocated and reserved bytes. */
void vb_ledger_observe(vb_ledger *ledger, const vb_alloc_stats *stats)
{
    if (stats->allocated_bytes > ledger->allocated_seen_peak) ledger->allocated_seen_peak = stats->allocated_bytes;
    if (stats->reserved_bytes > ledger->reserved_seen_peak) ledger->reserved_seen_peak = stats->reserved_bytes;
}
