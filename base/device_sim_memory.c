/* vrambench — where the sim places cudaMalloc blocks, as the driver does.
 * The measurements behind the rule (lab/probes/probe_driver.c on an H100, the
 * PyTorch snapshots in tests/fixtures/torch) and the orders tried and
 * rejected: docs/sim-models.md, "cudaMalloc placement".
 *
 * The rule:
 *  - A block over 2 MiB takes its size rounded up to 2 MiB pages of its own.
 *    It (and a new page) takes the lowest-addressed freed range that holds
 *    it, from its start; with none, fresh addresses right below all others
 *    (top-down, as the driver mostly hands them out: the order PyTorch's
 *    best-fit tie-break reads), or, placed VB_SIM_PLACE_RISING, right above
 *    all others (the driver's rising runs, as one extreme: device.h).
 *    Freed neighbours merge; a freed range stays one even when nothing lies
 *    below (or above) it.
 *  - Smaller blocks are packed into shared 2 MiB pages at 512 B multiples: a
 *    small block takes the smallest free piece of a page that holds it
 *    (lowest address on ties), else a new page, from its start; pieces of a
 *    page merge when freed, never across pages; a page goes back when its
 *    last block is freed (driver_pages.h counts what that uses).
 *  - Left out: the driver's 32 MiB alignment of many new segments, when it
 *    switches between top-down and rising runs (inside ranges above earlier
 *    ones), and the ranges the CUDA libraries' own allocations hold.
 */
#include "device_sim_internal.h"

#include <stdlib.h>

/* A free address range: freed large blocks (va_free) or a free piece of a
 * small-block page (gaps). */
typedef struct sim_range {
    vb_oset_node by_addr;
    vb_oset_node by_size;
    vb_addr addr;
    uint64_t size;
} sim_range;

/* Orders ranges by address. */
static int compare_range_addr(const vb_oset_node *a, const vb_oset_node *b)
{
    const sim_range *x = VB_OSET_ENTRY(a, sim_range, by_addr), *y = VB_OSET_ENTRY(b, sim_range, by_addr);
    return (x->addr > y->addr) - (x->addr < y->addr);
}

/* Orders ranges by size, then address. */
static int compare_range_size(const vb_oset_node *a, const vb_oset_node *b)
{
    const sim_range *x = VB_OSET_ENTRY(a, sim_range, by_size), *y = VB_OSET_ENTRY(b, sim_range, by_size);
    if (x->size != y->size) return x->size < y->size ? -1 : 1;
    return (x->addr > y->addr) - (x->addr < y->addr);
}

void sim_memory_init(sim_state *sim)
{
    vb_oset_init(&sim->va_free, compare_range_addr);
    vb_oset_init(&sim->gaps_by_addr, compare_range_addr);
    vb_oset_init(&sim->gaps_by_size, compare_range_size);
}

/* Frees every range node of an address-ordered set. */
static void free_ranges(vb_ordered_set *set)
{
    for (vb_oset_node *node; (node = vb_oset_first(set));) {
        vb_oset_remove(set, node);
        free(VB_OSET_ENTRY(node, sim_range, by_addr));
    }
}

void sim_memory_close(sim_state *sim)
{
    free_ranges(&sim->va_free);
    vb_oset_init(&sim->gaps_by_size, compare_range_size); /* its nodes are the gaps' */
    free_ranges(&sim->gaps_by_addr);
    vb_driver_pages_clear(&sim->pages);
}

/* The range right before / after `range` in an address-ordered set, if adjacent. */
static sim_range *adjacent(vb_ordered_set *set, sim_range *range, int after)
{
    vb_oset_node *node = after ? vb_oset_next(set, &range->by_addr) : vb_oset_prev(set, &range->by_addr);
    sim_range *other = node ? VB_OSET_ENTRY(node, sim_range, by_addr) : NULL;
    if (!other) return NULL;
    if (after) return range->addr + range->size == other->addr ? other : NULL;
    return other->addr + other->size == range->addr ? other : NULL;
}

/* ---- large blocks and pages: address ranges of 2 MiB multiples ---- */

/* Rising placement's fresh addresses start this far above the device's
 * first address: the stream-ordered pools take theirs from there up
 * (sim_next_address), a few times the device's memory at most, and the
 * next device's addresses start 2^52 above. */
#define RISING_OFFSET ((vb_addr)1 << 50)

vb_status vb_sim_set_placement(vb_device *dev, vb_sim_placement placement)
{
    if (!vb_device_is_sim(dev)) return vb_error(VB_ERR_INVALID, "a placement is set on a simulated device only");
    if (placement != VB_SIM_PLACE_TOP_DOWN && placement != VB_SIM_PLACE_RISING)
        return vb_error(VB_ERR_INVALID, "unknown placement %d", (int)placement);
    sim_state *sim = sim_of(vb_device_uncapped(dev));
    pthread_mutex_lock(&sim->lock);
    int taken = sim->mem_allocated;
    if (!taken) {
        sim->rising = placement == VB_SIM_PLACE_RISING;
        sim->mem_low = sim->mem_top = sim->next_addr + (sim->rising ? RISING_OFFSET : 0);
    }
    pthread_mutex_unlock(&sim->lock);
    return taken ? vb_error(VB_ERR_INVALID, "the placement is set before the device's first cudaMalloc") : VB_OK;
}

vb_sim_placement vb_sim_placement_of(vb_device *dev)
{
    return vb_device_is_sim(dev) && sim_of(vb_device_uncapped(dev))->rising ? VB_SIM_PLACE_RISING
                                                                            : VB_SIM_PLACE_TOP_DOWN;
}

/* Addresses for `bytes`: the lowest freed range that holds them, from its
 * start, else fresh ones right below (rising: above) all others. */
static vb_addr va_take(vb_device *dev, uint64_t bytes)
{
    sim_state *sim = sim_of(dev);
    for (vb_oset_node *node = vb_oset_first(&sim->va_free); node; node = vb_oset_next(&sim->va_free, node)) {
        sim_range *range = VB_OSET_ENTRY(node, sim_range, by_addr);
        if (range->size < bytes) continue;
        vb_addr addr = range->addr;
        range->addr += bytes; /* the order by address stays */
        range->size -= bytes;
        if (range->size == 0) {
            vb_oset_remove(&sim->va_free, node);
            free(range);
        }
        return addr;
    }
    sim->mem_allocated = 1;
    if (sim->rising) {
        sim->mem_top += bytes;
        return sim->mem_top - bytes;
    }
    sim->mem_low -= bytes;
    return sim->mem_low;
}

/* Gives addresses back, merged with freed neighbours; they stay freed
 * ranges even at the bottom (see the header). Returns -1 when host memory
 * runs out (the addresses are then lost, which only wastes numbers). */
static int va_give(vb_device *dev, vb_addr addr, uint64_t bytes)
{
    sim_state *sim = sim_of(dev);
    sim_range *range = calloc(1, sizeof *range);
    if (!range) return -1;
    range->addr = addr;
    range->size = bytes;
    vb_oset_insert(&sim->va_free, &range->by_addr);
    sim_range *next = adjacent(&sim->va_free, range, 1);
    if (next) {
        range->size += next->size;
        vb_oset_remove(&sim->va_free, &next->by_addr);
        free(next);
    }
    sim_range *prev = adjacent(&sim->va_free, range, 0);
    if (prev) {
        prev->size += range->size;
        vb_oset_remove(&sim->va_free, &range->by_addr);
        free(range);
        range = prev;
    }
    return 0;
}

/* ---- small blocks: pieces of shared pages ---- */

/* Puts a gap in both gap sets. */
static void gap_insert(sim_state *sim, sim_range *gap)
{
    vb_oset_insert(&sim->gaps_by_addr, &gap->by_addr);
    vb_oset_insert(&sim->gaps_by_size, &gap->by_size);
}

/* Takes a gap out of both gap sets. */
static void gap_remove(sim_state *sim, sim_range *gap)
{
    vb_oset_remove(&sim->gaps_by_addr, &gap->by_addr);
    vb_oset_remove(&sim->gaps_by_size, &gap->by_size);
}

/* A small block's place: the smallest gap that holds `rounded`, else a new
 * page (its bytes taken from the capacity). */
static vb_status small_take(vb_device *dev, uint64_t rounded, vb_addr *out)
{
    sim_state *sim = sim_of(dev);
    sim_range probe = {.size = rounded, .addr = 0};
    vb_oset_node *node = vb_oset_lower_bound(&sim->gaps_by_size, &probe.by_size);
    sim_range *gap = node ? VB_OSET_ENTRY(node, sim_range, by_size) : NULL;
    if (!gap) {
        gap = calloc(1, sizeof *gap);
        if (!gap) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        vb_status status = sim_take(dev, VB_DRIVER_PAGE);
        if (status != VB_OK) {
            free(gap);
            return status;
        }
        gap->addr = va_take(dev, VB_DRIVER_PAGE);
        gap->size = VB_DRIVER_PAGE;
        gap_insert(sim, gap);
    }
    *out = gap->addr;
    gap_remove(sim, gap);
    gap->addr += rounded;
    gap->size -= rounded;
    if (gap->size) gap_insert(sim, gap);
    else free(gap);
    return VB_OK;
}

/* Gives a small block's piece back, merged with free pieces of its page;
 * when the page holds no block any more (`page_empty`), the page goes back
 * to the device. */
static void small_give(vb_device *dev, vb_addr addr, uint64_t rounded, int page_empty)
{
    sim_state *sim = sim_of(dev);
    vb_addr page = addr & ~(VB_DRIVER_PAGE - 1);
    sim_range *gap = calloc(1, sizeof *gap);
    if (gap) {
        gap->addr = addr;
        gap->size = rounded;
        gap_insert(sim, gap);
        sim_range *next = adjacent(&sim->gaps_by_addr, gap, 1);
        if (next && next->addr < page + VB_DRIVER_PAGE) {
            gap_remove(sim, next);
            gap_remove(sim, gap);
            gap->size += next->size;
            free(next);
            gap_insert(sim, gap);
        }
        sim_range *prev = adjacent(&sim->gaps_by_addr, gap, 0);
        if (prev && prev->addr >= page) {
            gap_remove(sim, prev);
            gap_remove(sim, gap);
            prev->size += gap->size;
            free(gap);
            gap = prev;
            gap_insert(sim, gap);
        }
    }
    if (!page_empty) return;
    if (gap && gap->addr == page && gap->size == VB_DRIVER_PAGE) {
        gap_remove(sim, gap);
        free(gap);
    }
    (void)va_give(dev, page, VB_DRIVER_PAGE);
    sim_give(dev, VB_DRIVER_PAGE);
}

/* ---- the sim's cudaMalloc / cudaFree ---- */

vb_status sim_memory_alloc(vb_device *dev, uint64_t size, vb_addr *out)
{
    sim_state *sim = sim_of(dev);
    uint64_t bytes = vb_driver_block_bytes(size);
    if (bytes == 0) return vb_error(VB_ERR_OOM, "sim: out of memory: %llu bytes asked", (unsigned long long)size);
    vb_addr addr = 0;
    if (vb_driver_is_small(size)) {
        VB_TRY(small_take(dev, bytes, &addr));
    } else {
        VB_TRY(sim_take(dev, bytes));
        addr = va_take(dev, bytes);
    }
    if (vb_driver_pages_add(&sim->pages, addr, size) == UINT64_MAX) {
        sim_memory_free(dev, addr, size);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    *out = addr;
    return VB_OK;
}

void sim_memory_free(vb_device *dev, vb_addr addr, uint64_t size)
{
    sim_state *sim = sim_of(dev);
    uint64_t released = vb_driver_pages_remove(&sim->pages, addr, size);
    if (vb_driver_is_small(size)) {
        small_give(dev, addr, vb_driver_block_bytes(size), released != 0);
    } else {
        (void)va_give(dev, addr, released);
        sim_give(dev, released);
    }
}

/* ---- which device's memory an address is (device_sim_machine.c) ---- */

/* mem_alloc's addresses run from mem_low up to mem_top; the freed ranges
 * among them (va_free) hold no block: an address is held when it is in that
 * span and in no freed range (the free pieces of a live small-block page
 * count as held: the page is). */
int sim_memory_holds(vb_device *dev, vb_addr addr)
{
    sim_state *sim = sim_of(dev);
    if (addr < sim->mem_low || addr >= sim->mem_top) return 0;
    sim_range probe = {.addr = addr + 1};
    vb_oset_node *node = vb_oset_last_before(&sim->va_free, &probe.by_addr); /* the last starting at or below addr */
    if (!node) return 1;
    const sim_range *range = VB_OSET_ENTRY(node, sim_range, by_addr);
    return addr - range->addr >= range->size;
}
