/* vrambench — the sim's model of a stream-ordered memory pool
 * (cudaMemPoolCreate / cudaMallocFromPoolAsync / cudaFreeAsync).
 *
 * The facts F1-F14 cited here, measured of the driver's pool on an H100
 * (lab/probes/probe_driver.c, lab/probes/pool_trace.c), the rules tried and rejected,
 * and what this rule gives against the GPU: docs/sim-models.md, "The
 * stream-ordered pool". Where the sim still differs from a GPU:
 * docs/sim-differences.md.
 *
 * Contract (CUDA's documented behaviour): reserved and used bytes are
 * ReservedMemCurrent and UsedMemCurrent (used: the requested bytes, F2),
 * their high-water marks reset to the current values by setting 0; the
 * release threshold is applied at a synchronization; a trim never releases
 * memory behind live blocks or behind frees the pool has not seen complete;
 * reuse across streams makes the allocating stream wait for the freeing one
 * (F10).
 *
 * The rule:
 *  - Addresses: one range POOL_VA_FACTOR x the device's capacity, in 32 MiB
 *    granules (F1) that have memory behind them or not. A request is
 *    rounded to VB_POOL_ROUNDING (512 B) and carved from the start of a
 *    free range (F3, F4, F6); blocks may span granules (F7).
 *  - Memory follows the blocks (F11): each granule a block covers that has
 *    none gets the memory of an idle granule (mapped, no live block; the
 *    most recently idled), else new memory from the device. A stream that
 *    takes an idle granule's memory waits for that granule's frees.
 *  - Which free range (F14): a free is pending until the pool sees it
 *    complete, and merges only with pending neighbours freed on its stream;
 *    completed neighbours merge. A request takes the best fit (smallest;
 *    among equal sizes the oldest extent) among, first that holds it: the
 *    ranges pending on its own stream; the completed ranges with memory
 *    behind them; the ranges pending on other streams (its stream then
 *    waits, F10); then, the pool having seen every free that completed on
 *    the sim's clock (the latest first, F6), all completed ranges; else
 *    the end of the addresses handed out.
 *  - The pool sees completed frees at a synchronization (every move of the
 *    sim's clock counts as one), at a trim, and in the step above. A
 *    replay queues no work, so its frees complete as soon as the pool looks.
 *  - Releases (trim; the threshold at a synchronization) give back idle
 *    granules whose frees completed, highest address first (F8, F9); a pool
 *    trimmed to nothing starts again at its first address. Destroying a pool
 *    gives all of its granules back at once, live blocks included (CUDA
 *    defers that until the blocks are freed).
 */
#include "device_sim_internal.h"

#include <stdlib.h>

#include "ordered_set.h"

/* F1: what the pool maps at a time. */
#define POOL_GRANULE (32 * VB_MiB)

/* F11: the pool's address range, as a multiple of the device's capacity
 * (its blocks spread over more granules than it holds: 1.39 x in the
 * random-512m log). */
#define POOL_VA_FACTOR 4

/* ------------------------------------------------------------------------ */
/* Data                                                                      */
/* ------------------------------------------------------------------------ */

/* A range of the pool's addresses: handed out (live) or free. A free range
 * is pending (its free's completion not yet seen by the pool: in `pending`,
 * `pending_by_seq` and `pending_by_ready`) or completed (in `completed`). */
typedef struct pool_block {
    vb_oset_node by_addr;          /* in the pool's block set, always */
    vb_oset_node by_fit;           /* free: in `pending` or `completed` */
    vb_oset_node by_seq;           /* pending: in `pending_by_seq` */
    vb_oset_node by_ready;         /* pending: in `pending_by_ready` */
    vb_addr addr;
    uint64_t size;                 /* placed bytes (VB_POOL_ROUNDING multiple) */
    uint64_t requested;            /* the caller's bytes while live */
    int free;
    int pending;                   /* free and its completion not yet seen */
    const struct vb_stream_s *stream; /* pending: the stream it was freed on */
    uint64_t ready_ns;             /* free: when its (latest) free completes */
    uint64_t seq;                  /* free: order of the latest change of its extent
                                    * (free, split, merge, completion seen) */
} pool_block;

struct vb_pool_s {
    uint64_t release_threshold;
    uint64_t access;               /* the devices it is open to (bit per ordinal): the device's peers */
    vb_addr base;                  /* the pool's address range */
    size_t granule_count;          /* of the address range */
    size_t granule_end;            /* granules at and above it never held a block */
    unsigned char *mapped;         /* per granule: 1 when memory is mapped behind it */
    unsigned char *in_idle;        /* per granule: 1 while listed in `idle` */
    uint64_t *live_bytes;          /* per granule: bytes of live blocks in it */
    uint64_t *last_free_ns;        /* per granule: when the latest free in it completes */
    size_t *idle;                  /* granules that went idle (mapped, no live bytes): a stack;
                                    * an entry no longer idle is skipped when popped */
    size_t idle_top;
    size_t idle_count;             /* granules mapped and without live bytes, exactly */
    pool_block *fresh;             /* the free range that ends the address range (completed) */
    uint64_t reserved_bytes;       /* mapped granules x POOL_GRANULE */
    uint64_t used_bytes;           /* requested bytes of live blocks (F2) */
    uint64_t reserved_high, used_high; /* the maxima since creation or the last reset */
    uint64_t seq;                  /* changes of free extents so far (pool_block.seq) */
    vb_ordered_set blocks;         /* all blocks, by address */
    vb_ordered_set pending;        /* pending free blocks, by fit (size, then oldest seq) */
    vb_ordered_set pending_by_seq; /* the same blocks, by seq */
    vb_ordered_set pending_by_ready; /* the same blocks, soonest completion first */
    pool_block **ready;            /* see_completions' scratch: the pending blocks seen complete */
    size_t ready_capacity;
    vb_ordered_set completed;      /* completed free blocks (the fresh range too), by fit */
    vb_addr_map live;              /* address -> pool_block* of live blocks */
};

/* Orders blocks by address. */
static int compare_addr(const vb_oset_node *a, const vb_oset_node *b)
{
    const pool_block *x = VB_OSET_ENTRY(a, pool_block, by_addr);
    const pool_block *y = VB_OSET_ENTRY(b, pool_block, by_addr);
    return (x->addr > y->addr) - (x->addr < y->addr);
}

/* Orders free blocks for best fit: smallest first, then the one whose
 * extent is oldest (lowest seq), then by address (so no two compare equal). */
static int compare_fit(const vb_oset_node *a, const vb_oset_node *b)
{
    const pool_block *x = VB_OSET_ENTRY(a, pool_block, by_fit);
    const pool_block *y = VB_OSET_ENTRY(b, pool_block, by_fit);
    if (x->size != y->size) return x->size < y->size ? -1 : 1;
    if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
    return (x->addr > y->addr) - (x->addr < y->addr);
}

/* Orders pending blocks by seq (unique per block). */
static int compare_seq(const vb_oset_node *a, const vb_oset_node *b)
{
    const pool_block *x = VB_OSET_ENTRY(a, pool_block, by_seq);
    const pool_block *y = VB_OSET_ENTRY(b, pool_block, by_seq);
    if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
    return (x->addr > y->addr) - (x->addr < y->addr);
}

/* Orders pending blocks by when their free completes, then as
 * compare_seq: the completed ones come first, whatever their seq. */
static int compare_ready(const vb_oset_node *a, const vb_oset_node *b)
{
    const pool_block *x = VB_OSET_ENTRY(a, pool_block, by_ready);
    const pool_block *y = VB_OSET_ENTRY(b, pool_block, by_ready);
    if (x->ready_ns != y->ready_ns) return x->ready_ns < y->ready_ns ? -1 : 1;
    return compare_seq(&x->by_seq, &y->by_seq);
}

/* Puts a free block in its sets. */
static void free_insert(vb_pool pool, pool_block *block)
{
    if (block->pending) {
        vb_oset_insert(&pool->pending, &block->by_fit);
        vb_oset_insert(&pool->pending_by_seq, &block->by_seq);
        vb_oset_insert(&pool->pending_by_ready, &block->by_ready);
    } else {
        vb_oset_insert(&pool->completed, &block->by_fit);
    }
}

/* Takes a free block out of its sets (before its size, seq or state changes). */
static void free_remove(vb_pool pool, pool_block *block)
{
    if (block->pending) {
        vb_oset_remove(&pool->pending, &block->by_fit);
        vb_oset_remove(&pool->pending_by_seq, &block->by_seq);
        vb_oset_remove(&pool->pending_by_ready, &block->by_ready);
    } else {
        vb_oset_remove(&pool->completed, &block->by_fit);
    }
}

/* Which pending blocks a best fit may take. */
typedef enum { FROM_STREAM, FROM_OTHER_STREAMS } pending_from;

/* The best fit (smallest, then oldest) of at least `rounded` bytes among
 * the pending blocks freed on `stream` (FROM_STREAM) or on any other
 * stream (FROM_OTHER_STREAMS), or NULL. */
static pool_block *pending_fit(vb_pool pool, uint64_t rounded, const struct vb_stream_s *stream, pending_from from)
{
    pool_block probe = {.size = rounded};
    for (vb_oset_node *node = vb_oset_lower_bound(&pool->pending, &probe.by_fit); node;
         node = vb_oset_next(&pool->pending, node)) {
        pool_block *block = VB_OSET_ENTRY(node, pool_block, by_fit);
        if ((block->stream == stream) == (from == FROM_STREAM)) return block;
    }
    return NULL;
}

static void count_granules(vb_pool pool, vb_addr addr, uint64_t size, size_t *unbacked, size_t *idle_inside);

/* The best fit (smallest, then oldest) of at least `rounded` bytes among
 * the completed blocks other than the fresh range, or NULL; with
 * `mapped_only`, only one whose first `rounded` bytes all have memory
 * mapped behind them. */
static pool_block *completed_fit(vb_pool pool, uint64_t rounded, int mapped_only)
{
    pool_block probe = {.size = rounded};
    for (vb_oset_node *node = vb_oset_lower_bound(&pool->completed, &probe.by_fit); node;
         node = vb_oset_next(&pool->completed, node)) {
        pool_block *block = VB_OSET_ENTRY(node, pool_block, by_fit);
        if (block == pool->fresh) continue;
        if (!mapped_only) return block;
        size_t unbacked, idle_inside;
        count_granules(pool, block->addr, rounded, &unbacked, &idle_inside);
        if (unbacked == 0) return block;
    }
    return NULL;
}

/* Rounds up to a power-of-two multiple; 0 when that overflows. */
static uint64_t round_up(uint64_t size, uint64_t multiple)
{
    if (size > UINT64_MAX - (multiple - 1)) return 0;
    return (size + multiple - 1) & ~(multiple - 1);
}

/* ------------------------------------------------------------------------ */
/* Blocks                                                                    */
/* ------------------------------------------------------------------------ */

/* The block right after `block` in the address space, if adjacent. */
static pool_block *next_adjacent(vb_pool pool, pool_block *block)
{
    vb_oset_node *node = vb_oset_next(&pool->blocks, &block->by_addr);
    pool_block *next = node ? VB_OSET_ENTRY(node, pool_block, by_addr) : NULL;
    return next && next->addr == block->addr + block->size ? next : NULL;
}

/* The block right before `block` in the address space, if adjacent. */
static pool_block *prev_adjacent(vb_pool pool, pool_block *block)
{
    vb_oset_node *node = vb_oset_prev(&pool->blocks, &block->by_addr);
    pool_block *prev = node ? VB_OSET_ENTRY(node, pool_block, by_addr) : NULL;
    return prev && prev->addr + prev->size == block->addr ? prev : NULL;
}

/* A new completed free block over [addr, addr+size), in its sets. */
static pool_block *new_free_block(vb_pool pool, vb_addr addr, uint64_t size)
{
    pool_block *block = calloc(1, sizeof *block);
    if (!block) return NULL;
    *block = (pool_block){.addr = addr, .size = size, .free = 1};
    vb_oset_insert(&pool->blocks, &block->by_addr);
    free_insert(pool, block);
    return block;
}

/* Folds free block `right` (adjacent after `left`) into free `left`. */
static void merge_into(vb_pool pool, pool_block *left, pool_block *right)
{
    free_remove(pool, left);
    free_remove(pool, right);
    vb_oset_remove(&pool->blocks, &right->by_addr);
    left->size += right->size;
    if (right->ready_ns > left->ready_ns) left->ready_ns = right->ready_ns;
    if (right->seq > left->seq) left->seq = right->seq;
    if (pool->fresh == right) pool->fresh = left;
    free(right);
    free_insert(pool, left);
}

/* Whether free `block` merges with its free neighbour `other` (F14): two
 * completed ranges do, two pending ones freed on the same stream do, a
 * pending one and a completed one do not. */
static int merges_with(const pool_block *block, const pool_block *other)
{
    return other && other->free && other->pending == block->pending && (!block->pending || other->stream == block->stream);
}

/* Merges a free block with the neighbours it merges with (merges_with);
 * returns the block holding it. */
static pool_block *coalesce(vb_pool pool, pool_block *block)
{
    pool_block *next = next_adjacent(pool, block);
    if (merges_with(block, next)) merge_into(pool, block, next);
    pool_block *prev = prev_adjacent(pool, block);
    if (merges_with(block, prev)) {
        merge_into(pool, prev, block);
        block = prev;
    }
    return block;
}

/* ------------------------------------------------------------------------ */
/* Granules                                                                  */
/* ------------------------------------------------------------------------ */

/* Lists granule `g`, mapped and now without live bytes, as idle. */
static void idle_push(vb_pool pool, size_t g)
{
    pool->idle_count++;
    if (pool->in_idle[g]) return; /* its old entry is valid again */
    pool->in_idle[g] = 1;
    pool->idle[pool->idle_top++] = g;
}

/* The most recently idled granule still idle; the caller must know one is
 * (idle_count > 0). */
static size_t idle_pop(vb_pool pool)
{
    for (;;) {
        size_t g = pool->idle[--pool->idle_top];
        pool->in_idle[g] = 0;
        if (pool->mapped[g] && pool->live_bytes[g] == 0) return g;
    }
}

/* Adds `delta` (+1 or -1) x the bytes of [addr, addr+size) to the live
 * bytes of the granules it overlaps. A mapped granule left without live
 * bytes turns idle; a free (delta -1) also moves the granules' last free
 * time to `ready_ns`. */
static void account(vb_pool pool, vb_addr addr, uint64_t size, int delta, uint64_t ready_ns)
{
    uint64_t offset = addr - pool->base, end = offset + size;
    for (size_t g = offset / POOL_GRANULE; (uint64_t)g * POOL_GRANULE < end; g++) {
        uint64_t start = (uint64_t)g * POOL_GRANULE > offset ? (uint64_t)g * POOL_GRANULE : offset;
        uint64_t stop = (uint64_t)(g + 1) * POOL_GRANULE < end ? (uint64_t)(g + 1) * POOL_GRANULE : end;
        if (delta > 0) {
            if (pool->live_bytes[g] == 0 && pool->mapped[g]) pool->idle_count--;
            pool->live_bytes[g] += stop - start;
        } else {
            pool->live_bytes[g] -= stop - start;
            if (ready_ns > pool->last_free_ns[g]) pool->last_free_ns[g] = ready_ns;
            if (pool->live_bytes[g] == 0 && pool->mapped[g]) idle_push(pool, g);
        }
    }
}

/* The granules [addr, addr+size) overlaps that have no memory behind them
 * (`unbacked`), and those that are idle (`idle_inside`). */
static void count_granules(vb_pool pool, vb_addr addr, uint64_t size, size_t *unbacked, size_t *idle_inside)
{
    uint64_t offset = addr - pool->base, end = offset + size;
    *unbacked = *idle_inside = 0;
    for (size_t g = offset / POOL_GRANULE; (uint64_t)g * POOL_GRANULE < end; g++) {
        if (!pool->mapped[g]) (*unbacked)++;
        else if (pool->live_bytes[g] == 0) (*idle_inside)++;
    }
}

/* Puts memory behind every granule of the live block [addr, addr+size)
 * that has none (F11): `new_granules` of them get memory taken from the
 * device (already taken), the others an idle granule's, which loses it;
 * `stream` waits for that granule's frees (as F10's reuse does). */
static void back_granules(vb_pool pool, vb_addr addr, uint64_t size, size_t new_granules, struct vb_stream_s *stream)
{
    uint64_t offset = addr - pool->base, end = offset + size;
    for (size_t g = offset / POOL_GRANULE; (uint64_t)g * POOL_GRANULE < end; g++) {
        if (pool->mapped[g]) continue;
        if (new_granules > 0) {
            new_granules--;
            pool->reserved_bytes += POOL_GRANULE;
        } else {
            size_t donor = idle_pop(pool);
            pool->mapped[donor] = 0;
            pool->idle_count--;
            if (pool->last_free_ns[donor] > stream->tail_ns) stream->tail_ns = pool->last_free_ns[donor];
        }
        pool->mapped[g] = 1;
        pool->last_free_ns[g] = 0;
        if (g + 1 > pool->granule_end) pool->granule_end = g + 1;
    }
    if (pool->reserved_bytes > pool->reserved_high) pool->reserved_high = pool->reserved_bytes;
}

/* Releases idle granules whose frees completed, highest address first,
 * while more than `keep_bytes` stay reserved. */
static void release_down_to(vb_device *dev, vb_pool pool, uint64_t keep_bytes)
{
    uint64_t now_ns = sim_of(dev)->now_ns;
    for (size_t g = pool->granule_end; g-- > 0 && pool->reserved_bytes > keep_bytes;) {
        if (!pool->mapped[g] || pool->live_bytes[g] != 0 || pool->last_free_ns[g] > now_ns) continue;
        pool->mapped[g] = 0;
        pool->idle_count--;
        pool->reserved_bytes -= POOL_GRANULE;
        sim_give(dev, POOL_GRANULE);
    }
}

/* A pending block whose free completed turns completed and merges with
 * its completed neighbours. */
static void complete(vb_pool pool, pool_block *block)
{
    free_remove(pool, block);
    block->pending = 0;
    block->stream = NULL;
    block->seq = ++pool->seq;
    free_insert(pool, block);
    coalesce(pool, block);
}

/* qsort order of see_completions: the latest pending block first
 * (pending_by_seq's order, backwards). */
static int by_latest(const void *a, const void *b)
{
    const pool_block *x = *(pool_block *const *)a, *y = *(pool_block *const *)b;
    return compare_seq(&y->by_seq, &x->by_seq);
}

/* The pool sees the frees that completed by now (F14: at a synchronization,
 * or when a request finds no other range): each pending block whose free
 * completed turns completed and merges with its completed neighbours. The
 * latest pending block goes first, so among equal sizes the most recently
 * freed is the oldest completed range (F6). Those blocks are the first of
 * pending_by_ready, taken out in that order and then sorted latest first:
 * a pool whose frees stay pending (a stream kept busy) is not walked
 * whole at each look. Turning one completed merges it with completed
 * blocks only, never with another pending one, so the blocks to see are
 * known before the first is. */
static void see_completions(vb_device *dev, vb_pool pool)
{
    uint64_t now_ns = sim_of(dev)->now_ns;
    size_t count = 0;
    for (vb_oset_node *node = vb_oset_first(&pool->pending_by_ready);
         node && VB_OSET_ENTRY(node, pool_block, by_ready)->ready_ns <= now_ns;
         node = vb_oset_next(&pool->pending_by_ready, node))
        count++;
    if (count == 0) return;
    if (count > pool->ready_capacity) {
        pool_block **grown = realloc(pool->ready, count * sizeof *grown);
        if (!grown) {
            /* No room to sort them: every pending block, latest first. */
            vb_oset_node *node = vb_oset_last(&pool->pending_by_seq);
            while (node) {
                pool_block *block = VB_OSET_ENTRY(node, pool_block, by_seq);
                node = vb_oset_prev(&pool->pending_by_seq, node);
                if (block->ready_ns <= now_ns) complete(pool, block);
            }
            return;
        }
        pool->ready = grown;
        pool->ready_capacity = count;
    }
    vb_oset_node *node = vb_oset_first(&pool->pending_by_ready);
    for (size_t i = 0; i < count; i++, node = vb_oset_next(&pool->pending_by_ready, node))
        pool->ready[i] = VB_OSET_ENTRY(node, pool_block, by_ready);
    qsort(pool->ready, count, sizeof *pool->ready, by_latest);
    for (size_t i = 0; i < count; i++) complete(pool, pool->ready[i]);
}

/* ------------------------------------------------------------------------ */
/* The pool ops                                                              */
/* ------------------------------------------------------------------------ */

/* Frees a pool's arrays and the pool. */
static void free_pool(vb_pool pool)
{
    free(pool->mapped);
    free(pool->in_idle);
    free(pool->live_bytes);
    free(pool->last_free_ns);
    free(pool->idle);
    free(pool->ready);
    free(pool);
}

/* Creates an empty pool whose address range (POOL_VA_FACTOR x the device)
 * is one fresh free range, and puts it on the sim's list. */
vb_status sim_pool_create(vb_device *dev, uint64_t release_threshold, vb_pool *out)
{
    sim_state *sim = sim_of(dev);
    if (sim->pool_count == sim->pool_capacity) {
        size_t capacity = sim->pool_capacity ? sim->pool_capacity * 2 : 4;
        vb_pool *pools = realloc(sim->pools, capacity * sizeof *pools);
        if (!pools) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        sim->pools = pools;
        sim->pool_capacity = capacity;
    }
    vb_pool pool = calloc(1, sizeof *pool);
    if (!pool) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    pool->granule_count = (size_t)(round_up(sim->capacity, POOL_GRANULE) / POOL_GRANULE) * POOL_VA_FACTOR;
    pool->mapped = calloc(pool->granule_count, 1);
    pool->in_idle = calloc(pool->granule_count, 1);
    pool->live_bytes = calloc(pool->granule_count, sizeof *pool->live_bytes);
    pool->last_free_ns = calloc(pool->granule_count, sizeof *pool->last_free_ns);
    pool->idle = calloc(pool->granule_count, sizeof *pool->idle);
    if (!pool->mapped || !pool->in_idle || !pool->live_bytes || !pool->last_free_ns || !pool->idle) {
        free_pool(pool);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    pool->release_threshold = release_threshold;
    pool->access = sim->peers; /* cudaMemPoolSetAccess for every peer, as the cuda backend does */
    uint64_t range = (uint64_t)pool->granule_count * POOL_GRANULE;
    pool->base = sim_next_address(dev, range);
    vb_oset_init(&pool->blocks, compare_addr);
    vb_oset_init(&pool->pending, compare_fit);
    vb_oset_init(&pool->pending_by_seq, compare_seq);
    vb_oset_init(&pool->pending_by_ready, compare_ready);
    vb_oset_init(&pool->completed, compare_fit);
    pool->fresh = new_free_block(pool, pool->base, range);
    if (!pool->fresh) {
        free_pool(pool);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    sim->pools[sim->pool_count++] = pool;
    *out = pool;
    return VB_OK;
}

/* Gives every granule back (live blocks too) and forgets the pool. */
void sim_pool_destroy(vb_device *dev, vb_pool pool)
{
    sim_state *sim = sim_of(dev);
    if (!pool) return;
    for (vb_oset_node *node; (node = vb_oset_first(&pool->blocks));) {
        vb_oset_remove(&pool->blocks, node);
        free(VB_OSET_ENTRY(node, pool_block, by_addr));
    }
    sim_give(dev, pool->reserved_bytes);
    vb_addr_map_clear(&pool->live);
    for (size_t i = 0; i < sim->pool_count; i++) {
        if (sim->pools[i] != pool) continue;
        sim->pools[i] = sim->pools[--sim->pool_count];
        break;
    }
    free_pool(pool);
}

/* The range a request takes (F14), first that holds it: the best fit
 * among the ranges pending on the allocating stream; among the completed
 * ones with memory behind them; among those pending on other streams;
 * after the pool has seen the frees that completed, among the completed
 * ones; else the fresh range. The request is carved from its start and
 * its granules get memory behind them (F11). */
static pool_block *choose_range(vb_device *dev, vb_pool pool, uint64_t rounded, const struct vb_stream_s *stream)
{
    pool_block *block = pending_fit(pool, rounded, stream, FROM_STREAM);
    if (!block) block = completed_fit(pool, rounded, 1);
    if (!block) block = pending_fit(pool, rounded, stream, FROM_OTHER_STREAMS);
    if (!block) {
        see_completions(dev, pool);
        block = completed_fit(pool, rounded, 0);
    }
    return block ? block : pool->fresh;
}

/* Places a request in the range choose_range picks. */
vb_status sim_pool_malloc(vb_device *dev, vb_pool pool, uint64_t size, vb_stream stream, vb_addr *out)
{
    struct vb_stream_s *s = sim_stream(dev, stream);
    if (size == 0) return vb_error(VB_ERR_INVALID, "sim: pool_malloc of 0 bytes");
    uint64_t rounded = round_up(size, VB_POOL_ROUNDING);
    if (rounded == 0 || rounded > (uint64_t)pool->granule_count * POOL_GRANULE)
        return vb_error(VB_ERR_OOM, "sim: out of memory: %llu bytes asked of a pool", (unsigned long long)size);

    pool_block *block = choose_range(dev, pool, rounded, s);
    if (!block || block->size < rounded)
        return vb_error(VB_ERR_OOM, "sim: out of memory: %llu bytes asked of a pool (its address range is full)",
                        (unsigned long long)size);
    size_t unbacked, idle_inside;
    count_granules(pool, block->addr, rounded, &unbacked, &idle_inside);
    size_t spare = pool->idle_count - idle_inside;
    size_t new_granules = unbacked > spare ? unbacked - spare : 0;
    VB_TRY(sim_take(dev, (uint64_t)new_granules * POOL_GRANULE));
    if (vb_addr_map_put(&pool->live, block->addr, (uint64_t)(uintptr_t)block) != 0) {
        sim_give(dev, (uint64_t)new_granules * POOL_GRANULE);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }

    free_remove(pool, block);
    pool_block *rest = NULL;
    if (block->size > rounded) {
        rest = calloc(1, sizeof *rest);
        if (!rest) {
            vb_addr_map_remove(&pool->live, block->addr, NULL);
            free_insert(pool, block);
            sim_give(dev, (uint64_t)new_granules * POOL_GRANULE);
            return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        }
        /* The rest stays pending or completed as its range was, its extent
         * the latest. */
        *rest = (pool_block){.addr = block->addr + rounded, .size = block->size - rounded, .free = 1,
                             .pending = block->pending, .stream = block->stream, .ready_ns = block->ready_ns,
                             .seq = ++pool->seq};
        block->size = rounded;
        vb_oset_insert(&pool->blocks, &rest->by_addr);
        free_insert(pool, rest);
    }
    if (pool->fresh == block) pool->fresh = rest;
    /* F10: a free not yet complete on another stream: this stream waits for it. */
    if (block->ready_ns > s->tail_ns) s->tail_ns = block->ready_ns;
    block->free = 0;
    block->pending = 0;
    block->stream = NULL;
    block->requested = size;
    account(pool, block->addr, block->size, +1, 0);
    back_granules(pool, block->addr, block->size, new_granules, s);
    pool->used_bytes += size;
    if (pool->used_bytes > pool->used_high) pool->used_high = pool->used_bytes;
    *out = block->addr;
    return VB_OK;
}

/* Frees in stream order: the range completes when the work queued on
 * `stream` so far has; until the pool sees that, it is pending (F14). */
vb_status sim_pool_free(vb_device *dev, vb_pool pool, vb_addr addr, vb_stream stream)
{
    const struct vb_stream_s *s = sim_stream(dev, stream);
    uint64_t value;
    if (!vb_addr_map_remove(&pool->live, addr, &value))
        return vb_error(VB_ERR_INVALID, "sim: pool_free of 0x%llx, which the pool has not handed out",
                        (unsigned long long)addr);
    pool_block *block = (pool_block *)(uintptr_t)value;
    block->free = 1;
    block->pending = 1;
    block->stream = s;
    block->ready_ns = s->tail_ns;
    block->seq = ++pool->seq;
    account(pool, block->addr, block->size, -1, block->ready_ns);
    pool->used_bytes -= block->requested;
    block->requested = 0;
    free_insert(pool, block);
    coalesce(pool, block);
    return VB_OK;
}

/* Releases idle granules until at most `keep_bytes` stay reserved. */
vb_status sim_pool_trim(vb_device *dev, vb_pool pool, uint64_t keep_bytes)
{
    see_completions(dev, pool);
    release_down_to(dev, pool, keep_bytes);
    return VB_OK;
}

/* Reserved = the mapped granules, used = the live blocks' requested bytes. */
vb_status sim_pool_usage(vb_device *dev, vb_pool pool, uint64_t *reserved_bytes, uint64_t *used_bytes)
{
    (void)dev;
    *reserved_bytes = pool->reserved_bytes;
    *used_bytes = pool->used_bytes;
    return VB_OK;
}

/* The high-water marks of reserved and used bytes. */
vb_status sim_pool_high(vb_device *dev, vb_pool pool, uint64_t *reserved_high, uint64_t *used_high)
{
    (void)dev;
    *reserved_high = pool->reserved_high;
    *used_high = pool->used_high;
    return VB_OK;
}

/* The marks start again from the current values. */
vb_status sim_pool_reset_high(vb_device *dev, vb_pool pool)
{
    (void)dev;
    pool->reserved_high = pool->reserved_bytes;
    pool->used_high = pool->used_bytes;
    return VB_OK;
}

/* Every synchronization: each pool gives back idle granules while it holds
 * more than its release threshold. */
void sim_pools_on_synchronize(vb_device *dev)
{
    sim_state *sim = sim_of(dev);
    for (size_t i = 0; i < sim->pool_count; i++) {
        see_completions(dev, sim->pools[i]);
        release_down_to(dev, sim->pools[i], sim->pools[i]->release_threshold);
    }
}

/* The pool whose address range holds `addr`, if any, and whom it is open to. */
int sim_pool_holds(vb_device *dev, vb_addr addr, uint64_t *access)
{
    sim_state *sim = sim_of(dev);
    for (size_t i = 0; i < sim->pool_count; i++) {
        vb_pool pool = sim->pools[i];
        if (addr >= pool->base && addr - pool->base < (uint64_t)pool->granule_count * POOL_GRANULE) {
            *access = pool->access;
            return 1;
        }
    }
    return 0;
}
