/* vrambench — the PyTorch caching-allocator policy shared by `caching` and
 * `expandable` (see caching_core.h). Facts from PyTorch's
 * c10/cuda/CUDACachingAllocator.cpp and c10/core/AllocatorConfig.cpp; the
 * code is ours. */
#include "caching_core.h"

#include <stdlib.h>
#include <string.h>

#include "base/host_chunks.h"
#include "stream_list.h"

/* ------------------------------------------------------------------------ */
/* Orders and small helpers                                                   */
/* ------------------------------------------------------------------------ */

/* Block structs start on a cache line (see vb_cc_block); aligned_alloc
 * wants a size that is a multiple of the alignment. */
#define VB_CC_BLOCK_ALIGNMENT 64
#define BLOCK_BYTES ((sizeof(vb_cc_block) + VB_CC_BLOCK_ALIGNMENT - 1) / VB_CC_BLOCK_ALIGNMENT * VB_CC_BLOCK_ALIGNMENT)
_Static_assert(offsetof(vb_cc_block, in_use) < VB_CC_BLOCK_ALIGNMENT &&
                   offsetof(vb_cc_block, class_node) == VB_CC_BLOCK_ALIGNMENT,
               "what caching reads of a block it meets is in its first cache line (see vb_cc_block)");
_Static_assert(BLOCK_BYTES == 2 * VB_CC_BLOCK_ALIGNMENT,
               "a block struct is two cache lines, and vb_cc_block_new sets every field of the first (slab_take "
               "those of the second a recycled struct keeps): add a new one there");

/* Block structs are carved out of slabs, each a cache line of header and
 * then its structs: no heap block (and its header and alignment padding)
 * per struct, no malloc on the hot path. Every slab is a host chunk
 * (base/host_chunks.h: huge pages, kept for the next allocator), the
 * first one too. Slabs that started small and doubled came from malloc,
 * and a repetition's fresh allocator did not get back the memory of the
 * one before: at 400,000 events of a random trace, the first timed
 * repetition faulted in 1,960 pages (275 at 50,000), the pages the memory
 * pass had faulted in already. The kept chunks are exactly those pages.
 * A chunk's pages are faulted in only as structs are taken, so a small
 * allocator holds little more memory than before. */
#define SLAB_BLOCKS ((VB_HOST_CHUNK_BYTES - VB_CC_BLOCK_ALIGNMENT) / BLOCK_BYTES)

typedef struct vb_cc_slab {
    struct vb_cc_slab *next;      /* the slab made before this one */
    size_t used;                  /* structs handed out of its SLAB_BLOCKS */
} vb_cc_slab;

_Static_assert(sizeof(vb_cc_slab) <= VB_CC_BLOCK_ALIGNMENT, "a slab's header fits its first cache line");

/* The slab's i-th struct. */
static vb_cc_block *slab_block(vb_cc_slab *slab, size_t i)
{
    return (vb_cc_block *)(void *)((char *)slab + VB_CC_BLOCK_ALIGNMENT + i * BLOCK_BYTES);
}

/* The block whose class_node this is (whichever set holds it). */
static vb_cc_block *block_of(const vb_oset_node *node)
{
    return node ? VB_OSET_ENTRY(node, vb_cc_block, class_node) : NULL;
}

static int compare_u64(uint64_t a, uint64_t b)
{
    return (a > b) - (a < b);
}

/* PyTorch's BlockComparatorSize: (stream, size, address). */
static int compare_by_size(const vb_oset_node *a, const vb_oset_node *b)
{
    const vb_cc_block *x = block_of(a), *y = block_of(b);
    if (x->stream != y->stream) return compare_u64((uintptr_t)x->stream, (uintptr_t)y->stream);
    if (x->size != y->size) return compare_u64(x->size, y->size);
    return compare_u64(x->addr, y->addr);
}

/* The same order for qsort over block pointers. */
static int compare_blocks_by_size(const void *a, const void *b)
{
    return compare_by_size(&(*(vb_cc_block *const *)a)->class_node, &(*(vb_cc_block *const *)b)->class_node);
}

void vb_cc_sort_by_size(vb_cc_block **blocks, size_t count)
{
    if (count > 1) qsort(blocks, count, sizeof *blocks, compare_blocks_by_size);
}

/* The order inside one size class of one stream: (size, address), the
 * rest of BlockComparatorSize. */
static int compare_in_class(const vb_oset_node *a, const vb_oset_node *b)
{
    const vb_cc_block *x = block_of(a), *y = block_of(b);
    if (x->size != y->size) return compare_u64(x->size, y->size);
    return compare_u64(x->addr, y->addr);
}

/* PyTorch's BlockComparatorAddress: (stream, address), for unmapped ranges. */
static int compare_by_address(const vb_oset_node *a, const vb_oset_node *b)
{
    const vb_cc_block *x = block_of(a), *y = block_of(b);
    if (x->stream != y->stream) return compare_u64((uintptr_t)x->stream, (uintptr_t)y->stream);
    return compare_u64(x->addr, y->addr);
}

static int compare_segments(const vb_oset_node *a, const vb_oset_node *b)
{
    return compare_u64(VB_OSET_ENTRY(a, vb_cc_segment, node)->base, VB_OSET_ENTRY(b, vb_cc_segment, node)->base);
}

/* A search key for the free set (PyTorch's AllocParams::search_key). */
static vb_cc_block probe_block(vb_stream stream, uint64_t size, vb_addr addr)
{
    return (vb_cc_block){.stream = stream, .size = size, .addr = addr};
}

/* 1 when the allocator collects garbage: PyTorch's garbage_collection_threshold
 * under a memory fraction (set at creation, never changed). Only then do
 * pools count get_free_block calls and blocks have ages. */
static int collects_garbage(const vb_cc_allocator *cc)
{
    return cc->set_fraction && cc->gc_threshold > 0.0;
}

/* The age of a block of `pool` in get_free_block calls of the pool
 * (PyTorch's gc_count). */
static uint64_t block_age(const vb_cc_pool *pool, const vb_cc_block *block)
{
    return pool->get_free_blocks_call_count - block->gc_count_base;
}

/* ------------------------------------------------------------------------ */
/* Size indexes: best fit without walking down the free set                   */
/* ------------------------------------------------------------------------ */

/* A pool's free blocks of one stream are also kept by size class: 512-byte
 * granules, each count below EXACT_CLASSES (sizes below 2 MiB: every
 * size a small request rounds to, and every free block of a small pool's
 * 2 MiB segments but a whole one) a class of its own, above that 16
 * classes per power of two (as TLSF does), each class a small ordered set
 * (or, for `caching`, each exact class a heap: see "exact classes as
 * heaps" below), with a two-level bitmap of the classes that hold blocks.
 * The best fit is the lower bound in the request's own class or else the
 * first block of the next class that holds any: a short walk and a bit
 * scan instead of a walk down the whole free set. The order, and so every choice the policy
 * makes, is the same; pool->blocks, the whole free set in that order, is
 * only built when something walks it (see complete_blocks). The sets come
 * in pages of 64 classes, each made when one of its classes first takes
 * a block, so an index takes memory for the sizes its stream frees only. */
#define EXACT_CLASSES 4096
#define EXACT_POWER 12 /* log2 of EXACT_CLASSES */
#define SIZE_CLASSES (EXACT_CLASSES + (55 - EXACT_POWER) * 16) /* granule counts below 2^55: every 64-bit size */
#define CLASS_WORDS ((SIZE_CLASSES + 63) / 64)
#define SUMMARY_WORDS ((CLASS_WORDS + 63) / 64)
_Static_assert(EXACT_CLASSES == 1 << EXACT_POWER, "EXACT_POWER is EXACT_CLASSES's log2");
_Static_assert(SIZE_CLASSES <= UINT16_MAX, "a class fits vb_cc_block's size_class");

/* A class kept as a heap (see below): its entries, some of them stale. */
typedef struct heap_entry {
    vb_addr addr;
    vb_cc_block *block;
    uint64_t stamp;                      /* the block's stamp while this entry is its own (block_stamp) */
} heap_entry;

typedef struct class_heap {
    heap_entry *entries;                 /* a 4-ary min-heap by address (HEAP_ARITY) */
    uint32_t count, capacity;            /* entries, stale ones too */
    uint32_t live;                       /* blocks in the class */
} class_heap;

struct vb_cc_size_index {
    vb_stream stream;
    uint64_t word_in_use[SUMMARY_WORDS]; /* bit w % 64 of word w / 64: class_in_use[w] != 0 */
    uint64_t class_in_use[CLASS_WORDS];  /* bit c % 64 of word c / 64: class c holds blocks */
    vb_ordered_set *class_pages[CLASS_WORDS]; /* classes 64 w .. 64 w + 63; NULL until one holds a block */
    /* Exact classes as heaps (caching), in pages of 64 as the sets are: */
    class_heap *heap_pages[EXACT_CLASSES / 64]; /* NULL until one of its classes holds a block */
    uint64_t *stamps;                    /* the allocator's stamp counter; NULL: every class a set */
};

/* The class of `size`: monotone in size, so classes partition the order. */
static uint32_t size_class(uint64_t size)
{
    uint64_t granules = size / VB_CC_MIN_BLOCK_SIZE;
    if (granules < EXACT_CLASSES) return (uint32_t)granules;
    uint32_t power = 63 - (uint32_t)__builtin_clzll(granules); /* >= EXACT_POWER */
    return EXACT_CLASSES + (power - EXACT_POWER) * 16 + (uint32_t)((granules >> (power - 4)) & 15);
}

/* The set of class `c`, whose page exists (it holds blocks, or held some). */
static vb_ordered_set *class_set(const vb_cc_size_index *index, uint32_t c)
{
    return &index->class_pages[c / 64][c % 64];
}

/* 1 when class `c` holds blocks. */
static int class_in_use(const vb_cc_size_index *index, uint32_t c)
{
    return (int)(index->class_in_use[c / 64] >> (c % 64) & 1);
}

/* The first word of classes after word `word` that holds blocks, or -1. */
static int next_word_in_use(const vb_cc_size_index *index, uint32_t word)
{
    for (uint32_t s = (word + 1) / 64; s < SUMMARY_WORDS; s++) {
        uint64_t words = index->word_in_use[s];
        if (s == (word + 1) / 64) words &= ~0ULL << ((word + 1) % 64);
        if (words) return (int)(s * 64 + (uint32_t)__builtin_ctzll(words));
    }
    return -1;
}

/* The last word of classes before word `word` (CLASS_WORDS: the last of
 * all) that holds blocks, or -1. */
static int prev_word_in_use(const vb_cc_size_index *index, uint32_t word)
{
    for (uint32_t s = word / 64 + 1; s-- > 0;) {
        uint64_t words = s < SUMMARY_WORDS ? index->word_in_use[s] : 0;
        if (s == word / 64) words &= (1ULL << (word % 64)) - 1;
        if (words) return (int)(s * 64 + 63 - (uint32_t)__builtin_clzll(words));
    }
    return -1;
}

/* The first class after `c` that holds blocks, or -1. */
static int next_class_in_use(const vb_cc_size_index *index, uint32_t c)
{
    uint32_t word = c / 64, bit = c % 64;
    uint64_t later = bit == 63 ? 0 : index->class_in_use[word] & (~0ULL << (bit + 1));
    if (later) return (int)(word * 64 + (uint32_t)__builtin_ctzll(later));
    int next = next_word_in_use(index, word);
    if (next < 0) return -1;
    return next * 64 + __builtin_ctzll(index->class_in_use[next]);
}

/* The last class before `c` that holds blocks, or -1. */
static int prev_class_in_use(const vb_cc_size_index *index, uint32_t c)
{
    uint32_t word = c / 64, bit = c % 64;
    uint64_t earlier = index->class_in_use[word] & ((1ULL << bit) - 1);
    if (earlier) return (int)(word * 64 + 63 - (uint32_t)__builtin_clzll(earlier));
    int before = prev_word_in_use(index, word);
    if (before < 0) return -1;
    return before * 64 + 63 - __builtin_clzll(index->class_in_use[before]);
}

/* The last class that holds blocks, or -1. */
static int last_class_in_use(const vb_cc_size_index *index)
{
    int last = prev_word_in_use(index, CLASS_WORDS);
    if (last < 0) return -1;
    return last * 64 + 63 - __builtin_clzll(index->class_in_use[last]);
}

/* Class `c` holds blocks now / holds none now. */
static void mark_class_in_use(vb_cc_size_index *index, uint32_t c)
{
    index->class_in_use[c / 64] |= 1ULL << (c % 64);
    index->word_in_use[c / 64 / 64] |= 1ULL << (c / 64 % 64);
}

static void mark_class_empty(vb_cc_size_index *index, uint32_t c)
{
    index->class_in_use[c / 64] &= ~(1ULL << (c % 64));
    if (!index->class_in_use[c / 64]) index->word_in_use[c / 64 / 64] &= ~(1ULL << (c / 64 % 64));
}

/* ---- exact classes as heaps ----
 *
 * In an exact class every block has the same size (sizes are multiples of
 * 512 B), so the best fit in it is its lowest address, and `caching`, which
 * never steps from a block to its neighbour in the order on its hot path
 * (expandable's best fit does), needs no more than that: for it, an exact
 * class is a min-heap of (address, block) entries in an array. An
 * insert compares with entries in the array, never with the block structs
 * a set's walk down reads, each a cache miss on a long trace. A removal
 * only counts the block out: its entry goes stale (its stamp no longer
 * the block's) and is dropped when it reaches the top, or when the
 * entries grow past ENTRIES_PER_LIVE per live block (the heap is
 * rebuilt) or the class empties. The rare walks in order (release,
 * garbage collection, a pool that stops indexing) sort the live entries. */

/* A rebuild reads every entry's block struct, a cache miss each on a long
 * trace; rebuilding past 8 entries per live block (and 64 more) instead of
 * 2 (and 16) made `caching` about 5% faster at 400,000 events of a random
 * trace, for at most that many entries of 24 bytes (docs/bench.md,
 * "Replay speed"). */
#define ENTRIES_PER_LIVE 8
#define ENTRIES_SLACK 64

/* Each entry's children. A 4-ary heap is half as deep as a binary one,
 * and the four children a step down compares lie side by side (96 bytes):
 * on a long trace a class's deep entries are cache misses, and a step
 * costs about one miss however many children it reads (docs/bench.md). */
#define HEAP_ARITY 4

/* A block in a heap class keeps the stamp of its entry (in its first
 * cache line, with all else an entry's check and a removal read). Stamps
 * are odd and never given twice; a block out of every heap (taken out,
 * moved into a set, or made anew) has stamp 0, so an entry left behind is
 * stale. */
static uint64_t block_stamp(const vb_cc_block *block)
{
    return block->heap_stamp;
}

static void set_block_stamp(vb_cc_block *block, uint64_t stamp)
{
    block->heap_stamp = stamp;
}

/* 1 when the entry is still its block's. */
static int entry_live(const heap_entry *entry)
{
    return block_stamp(entry->block) == entry->stamp;
}

/* The entry at i moves up to its place; the ones it passes move down. */
static void heap_sift_up(heap_entry *entries, uint32_t i)
{
    heap_entry moving = entries[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / HEAP_ARITY;
        if (entries[parent].addr <= moving.addr) break;
        entries[i] = entries[parent];
        i = parent;
    }
    entries[i] = moving;
}

/* The entry at i moves down to its place; the least child moves up at
 * each step. */
static void heap_sift_down(heap_entry *entries, uint32_t count, uint32_t i)
{
    heap_entry moving = entries[i];
    for (;;) {
        uint64_t first = (uint64_t)HEAP_ARITY * i + 1;
        if (first >= count) break;
        uint32_t least = (uint32_t)first, end = count - first < HEAP_ARITY ? count : (uint32_t)first + HEAP_ARITY;
        for (uint32_t child = least + 1; child < end; child++)
            if (entries[child].addr < entries[least].addr) least = child;
        if (entries[least].addr >= moving.addr) break;
        entries[i] = entries[least];
        i = least;
    }
    entries[i] = moving;
}

static void heap_pop(class_heap *heap)
{
    heap->entries[0] = heap->entries[--heap->count];
    heap_sift_down(heap->entries, heap->count, 0);
}

/* Keeps only the live entries, in heap order again. */
static void heap_rebuild(class_heap *heap)
{
    uint32_t kept = 0;
    for (uint32_t i = 0; i < heap->count; i++)
        if (entry_live(&heap->entries[i])) heap->entries[kept++] = heap->entries[i];
    heap->count = kept;
    for (uint32_t i = kept / HEAP_ARITY + 1; i-- > 0;) heap_sift_down(heap->entries, kept, i);
}

/* The class's block of the lowest address (stale entries on top dropped),
 * or NULL when it has none. */
static vb_cc_block *heap_first(class_heap *heap)
{
    while (heap->count && !entry_live(&heap->entries[0])) heap_pop(heap);
    return heap->count ? heap->entries[0].block : NULL;
}

/* The class's block of the highest address, or NULL (a scan: rare paths). */
static vb_cc_block *heap_last(const class_heap *heap)
{
    const heap_entry *last = NULL;
    for (uint32_t i = 0; i < heap->count; i++)
        if (entry_live(&heap->entries[i]) && (!last || heap->entries[i].addr > last->addr)) last = &heap->entries[i];
    return last ? last->block : NULL;
}

/* The class's block just before / after `addr`, or NULL (a scan). */
static vb_cc_block *heap_before(const class_heap *heap, vb_addr addr)
{
    const heap_entry *found = NULL;
    for (uint32_t i = 0; i < heap->count; i++) {
        const heap_entry *entry = &heap->entries[i];
        if (entry->addr < addr && entry_live(entry) && (!found || entry->addr > found->addr)) found = entry;
    }
    return found ? found->block : NULL;
}

static vb_cc_block *heap_after(const class_heap *heap, vb_addr addr)
{
    const heap_entry *found = NULL;
    for (uint32_t i = 0; i < heap->count; i++) {
        const heap_entry *entry = &heap->entries[i];
        if (entry->addr > addr && entry_live(entry) && (!found || entry->addr < found->addr)) found = entry;
    }
    return found ? found->block : NULL;
}

static int compare_entries(const void *a, const void *b)
{
    vb_addr x = ((const heap_entry *)a)->addr, y = ((const heap_entry *)b)->addr;
    return x < y ? -1 : x > y;
}

/* 1 when class `c` of the index is a heap. */
static int is_heap_class(const vb_cc_size_index *index, uint32_t c)
{
    return index->stamps && c < EXACT_CLASSES;
}

/* Class `c`'s heap, whose page exists (it holds blocks, or held some). */
static class_heap *heap_of(const vb_cc_size_index *index, uint32_t c)
{
    return &index->heap_pages[c / 64][c % 64];
}

/* Class `c`'s heap with its live entries only, sorted by address (a
 * sorted array is a heap too), for a walk in order. */
static class_heap *sorted_heap(vb_cc_size_index *index, uint32_t c)
{
    class_heap *heap = heap_of(index, c);
    heap_rebuild(heap);
    qsort(heap->entries, heap->count, sizeof *heap->entries, compare_entries);
    return heap;
}

/* Puts `block` into pool->blocks: right after `last`, which sorts just
 * before it, when `last` is given; else where its order puts it. */
static void append_block(vb_cc_pool *pool, vb_cc_block *last, vb_cc_block *block)
{
    if (last) vb_oset_insert_after(&pool->blocks, &block->class_node, &last->class_node);
    else vb_oset_insert_by(&pool->blocks, &block->class_node, compare_by_size);
}

/* Moves every indexed free block into pool->blocks and empties the
 * indexes (a block's class_node holds it in one set only). The indexes
 * (sorted by stream), their classes and each class's blocks, in order,
 * make up the whole order, so into an empty set each block is appended
 * after the one before; into one that holds blocks already (a move back
 * to the indexes that ran out of host memory half-way), each goes where
 * its order puts it. */
static void move_to_set(vb_cc_pool *pool)
{
    int appending = pool->blocks.count == 0;
    vb_cc_block *last = NULL;
    for (size_t i = 0; i < pool->index_count; i++) {
        vb_cc_size_index *index = pool->indexes[i];
        int first = index->class_in_use[0] & 1 ? 0 : next_class_in_use(index, 0);
        for (int c = first; c >= 0; c = next_class_in_use(index, (uint32_t)c)) {
            if (is_heap_class(index, (uint32_t)c)) {
                class_heap *heap = sorted_heap(index, (uint32_t)c);
                for (uint32_t e = 0; e < heap->count; e++) {
                    vb_cc_block *block = heap->entries[e].block;
                    block->indexed = 0;
                    set_block_stamp(block, 0);
                    append_block(pool, appending ? last : NULL, block);
                    last = block;
                }
                heap->count = heap->live = 0;
                continue;
            }
            vb_ordered_set *set = class_set(index, (uint32_t)c);
            for (vb_oset_node *node = vb_oset_first(set); node; node = vb_oset_first(set)) {
                vb_cc_block *block = block_of(node);
                vb_oset_remove(set, node);
                block->indexed = 0;
                append_block(pool, appending ? last : NULL, block);
                last = block;
            }
        }
        memset(index->class_in_use, 0, sizeof index->class_in_use);
        memset(index->word_in_use, 0, sizeof index->word_in_use);
    }
}

/* Host memory ran out for an index (or a test asks): from now on the pool
 * keeps pool->blocks for good, and best fit walks it. */
static void stop_indexing(vb_cc_pool *pool)
{
    if (!pool->blocks_kept) {
        move_to_set(pool);
        pool->blocks_kept = 1;
    }
    pool->unindexed = 1;
}

/* ---- Free blocks that are whole segments ----
 * Garbage collection frees only those, and on a replay that stays above
 * its threshold it runs at every allocation the cache cannot serve:
 * walking every free block each time (as PyTorch does) made such replays
 * quadratic. A block that is free in a pool keeps its neighbours (a free
 * neighbour would have merged with it), so it stays whole, or split, until
 * it leaves the pool. */

/* Lists a whole block going into `pool` (whole_free counts it already). */
static void whole_list_add(vb_cc_pool *pool, vb_cc_block *block)
{
    if (pool->whole_unlisted) return;
    if (block->segment && pool->whole_free > pool->whole_capacity) {
        size_t capacity = pool->whole_capacity ? 2 * pool->whole_capacity : 16;
        vb_cc_block **blocks = realloc(pool->whole_blocks, capacity * sizeof *blocks);
        if (blocks) pool->whole_blocks = blocks;
        vb_cc_block **victims = blocks ? realloc(pool->whole_victims, capacity * sizeof *victims) : NULL;
        if (victims) {
            pool->whole_victims = victims;
            pool->whole_capacity = capacity;
        }
    }
    if (!block->segment || pool->whole_free > pool->whole_capacity) {
        pool->whole_unlisted = 1; /* no segment to say where, or host memory ran out */
        return;
    }
    block->segment->whole_at = pool->whole_free - 1;
    pool->whole_blocks[pool->whole_free - 1] = block;
}

/* Unlists a whole block leaving `pool` (whole_free no longer counts it):
 * the last one listed takes its place. */
static void whole_list_remove(vb_cc_pool *pool, vb_cc_block *block)
{
    if (pool->whole_unlisted) return;
    vb_cc_block *last = pool->whole_blocks[pool->whole_free];
    pool->whole_blocks[block->segment->whole_at] = last;
    last->segment->whole_at = block->segment->whole_at;
}

/* Moves every block of pool->blocks back into the size indexes, each
 * as vb_cc_pool_insert puts it, its age kept. Where host memory runs out
 * for an index, the pool stops indexing for good (and keeps the rest). */
static void move_to_indexes(vb_cc_pool *pool)
{
    pool->blocks_kept = 0;
    for (vb_oset_node *node = vb_oset_first(&pool->blocks); node && !pool->blocks_kept;
         node = vb_oset_first(&pool->blocks)) {
        vb_cc_block *block = block_of(node);
        vb_oset_remove(&pool->blocks, node);
        uint64_t age_base = block->gc_count_base;
        pool->whole_free -= block->whole_in_pool;
        if (block->whole_in_pool) whole_list_remove(pool, block);
        vb_cc_pool_insert(pool, block);
        block->gc_count_base = age_base;
    }
}

/* The free blocks are in pool->blocks, in PyTorch's best-fit order, only
 * at times: the size indexes answer every query of the hot path, and a
 * block struct has one set node (it is two cache lines, see vb_cc_block),
 * so a block is in its class or in pool->blocks, never both. The blocks
 * move into pool->blocks (in O(n)) when something walks all of them in
 * order (releasing the cache, garbage collection, a segment source's
 * release_pool), which then answers best fit too, as PyTorch's set does;
 * they move back into the indexes once KEEP_FACTOR times as many inserts
 * and erases as it holds blocks have passed with no further walk (in
 * O(n log n), so O(log n) per update): a program that runs out of memory
 * over and over (each time releasing the cache) pays O(log n) per
 * operation, as PyTorch does, not O(n) per release. */
#define KEEP_FACTOR 4
#define KEEP_MINIMUM 64

/* Makes pool->blocks complete for a walk over it; calls nest. */
static void complete_blocks(vb_cc_pool *pool)
{
    if (!pool->blocks_kept) {
        move_to_set(pool);
        pool->blocks_kept = 1;
    }
    pool->blocks_walks++;
    pool->updates_since_walk = 0;
}

/* Ends a complete_blocks. */
static void forget_blocks(vb_cc_pool *pool)
{
    pool->blocks_walks--;
    pool->updates_since_walk = 0;
}

/* Counts an insert or erase while pool->blocks is kept, and moves its
 * blocks back into the indexes once it has gone long enough without a
 * walk (not while one is on, and never for an unindexed pool). */
static void count_update(vb_cc_pool *pool)
{
    if (pool->blocks_walks || pool->unindexed) return;
    if (++pool->updates_since_walk <= KEEP_FACTOR * (pool->blocks.count + KEEP_MINIMUM)) return;
    move_to_indexes(pool);
}

void vb_cc_pool_stop_indexing(vb_cc_pool *pool)
{
    stop_indexing(pool);
}

void vb_cc_pool_stop_listing_whole(vb_cc_pool *pool)
{
    pool->whole_unlisted = 1;
}

void vb_cc_pool_index_size(const vb_cc_pool *pool, size_t *blocks, size_t *entries, size_t *classes)
{
    *blocks = *entries = *classes = 0;
    for (size_t i = 0; i < pool->index_count; i++) {
        const vb_cc_size_index *index = pool->indexes[i];
        for (uint32_t c = 0; c < SIZE_CLASSES; c++) {
            if (!class_in_use(index, c)) continue;
            size_t held = is_heap_class(index, c) ? heap_of(index, c)->live : class_set(index, c)->count;
            *blocks += held;
            *entries += is_heap_class(index, c) ? heap_of(index, c)->count : held;
            (*classes)++;
        }
    }
}

/* The pool's index for `stream`: made on first use when `create`; NULL
 * when there is none, or when host memory ran out for it (the pool then
 * stops using indexes for good, see unindexed). */
static vb_cc_size_index *index_of(vb_cc_pool *pool, vb_stream stream, int create)
{
    for (size_t i = 0; i < pool->index_count; i++)
        if (pool->indexes[i]->stream == stream) return pool->indexes[i];
    if (!create) return NULL;
    if (pool->index_count == pool->index_capacity) {
        size_t capacity = pool->index_capacity ? pool->index_capacity * 2 : 2;
        vb_cc_size_index **grown = realloc(pool->indexes, capacity * sizeof *grown);
        if (!grown) {
            stop_indexing(pool);
            return NULL;
        }
        pool->indexes = grown;
        pool->index_capacity = capacity;
    }
    vb_cc_size_index *index = calloc(1, sizeof *index);
    if (!index) {
        stop_indexing(pool);
        return NULL;
    }
    index->stream = stream;
    index->stamps = pool->heap_stamps;
    /* Kept sorted by stream, as the free set orders streams (move_to_set). */
    size_t at = pool->index_count;
    while (at > 0 && (uintptr_t)pool->indexes[at - 1]->stream > (uintptr_t)stream) {
        pool->indexes[at] = pool->indexes[at - 1];
        at--;
    }
    pool->indexes[at] = index;
    pool->index_count++;
    return index;
}

/* Frees a pool's indexes. */
static void free_indexes(vb_cc_pool *pool)
{
    for (size_t i = 0; i < pool->index_count; i++) {
        vb_cc_size_index *index = pool->indexes[i];
        for (size_t w = 0; w < CLASS_WORDS; w++) free(index->class_pages[w]);
        for (size_t w = 0; w < EXACT_CLASSES / 64; w++) {
            if (!index->heap_pages[w]) continue;
            for (size_t c = 0; c < 64; c++) free(index->heap_pages[w][c].entries);
            free(index->heap_pages[w]);
        }
        free(index);
    }
    free(pool->indexes);
    pool->indexes = NULL;
    pool->index_count = pool->index_capacity = 0;
}

/* Adds a free block to its class, making the class's page on first use.
 * 0, or -1 when host memory runs out for the page (nothing added). */
static int index_add(vb_cc_size_index *index, vb_cc_block *block)
{
    uint32_t c = size_class(block->size);
    if (is_heap_class(index, c)) {
        /* A heap orders by address alone, which is the set's order only
         * while every block of the class has the class's size, as every
         * size caching makes does (multiples of 512 B). Any other would be
         * a bug; the pool then walks its free set, which is always right. */
        if (block->size != (uint64_t)c * VB_CC_MIN_BLOCK_SIZE) return -1;
        class_heap **page = &index->heap_pages[c / 64];
        if (!*page && !(*page = calloc(64, sizeof **page))) return -1;
        class_heap *heap = heap_of(index, c);
        if (heap->count == heap->capacity) {
            if (heap->capacity > UINT32_MAX / 2) return -1;
            /* From 16 entries (384 bytes): growing from 4, the classes of a
             * random trace's replay took a realloc every ten events, 4% of
             * its instructions (docs/bench.md, "Replay speed"). */
            uint32_t capacity = heap->capacity ? 2 * heap->capacity : 16;
            heap_entry *grown = realloc(heap->entries, capacity * sizeof *grown);
            if (!grown) return -1;
            heap->entries = grown;
            heap->capacity = capacity;
        }
        uint64_t stamp = *index->stamps += 2; /* odd: the counter starts at 1 */
        set_block_stamp(block, stamp);
        heap->entries[heap->count] = (heap_entry){block->addr, block, stamp};
        heap_sift_up(heap->entries, heap->count++);
        heap->live++;
        mark_class_in_use(index, c);
        block->indexed = 1;
        block->size_class = (uint16_t)c;
        return 0;
    }
    vb_ordered_set **page = &index->class_pages[c / 64];
    if (!*page) {
        if (!(*page = malloc(64 * sizeof **page))) return -1;
        for (size_t i = 0; i < 64; i++) vb_oset_init(&(*page)[i], compare_in_class);
    }
    vb_oset_insert_by(class_set(index, c), &block->class_node, compare_in_class);
    mark_class_in_use(index, c);
    block->indexed = 1;
    block->size_class = (uint16_t)c;
    return 0;
}

/* Takes a block out of its class in `index`, its stream's (by where it
 * was put, whatever its size is now). */
static void index_remove(vb_cc_size_index *index, vb_cc_block *block)
{
    uint32_t c = block->size_class;
    block->indexed = 0;
    if (is_heap_class(index, c)) {
        class_heap *heap = heap_of(index, c);
        set_block_stamp(block, 0); /* its entry goes stale */
        if (--heap->live == 0) {
            heap->count = 0;
            mark_class_empty(index, c);
        } else if (heap->entries[0].block == block) {
            heap_pop(heap);
        } else if (heap->count > ENTRIES_PER_LIVE * heap->live + ENTRIES_SLACK) {
            heap_rebuild(heap);
        }
        return;
    }
    vb_oset_remove(class_set(index, c), &block->class_node);
    if (class_set(index, c)->count == 0) mark_class_empty(index, c);
}

/* The first / last block of class `c` (which holds blocks). */
static vb_cc_block *class_first(vb_cc_size_index *index, uint32_t c)
{
    return is_heap_class(index, c) ? heap_first(heap_of(index, c)) : block_of(vb_oset_first(class_set(index, c)));
}

static vb_cc_block *class_last(const vb_cc_size_index *index, uint32_t c)
{
    return is_heap_class(index, c) ? heap_last(heap_of(index, c)) : block_of(vb_oset_last(class_set(index, c)));
}

/* The first block of (size, address) >= (size, 0) in the index: PyTorch's
 * lower_bound on the free set, within one stream. NULL when none. */
static vb_cc_block *index_lower_bound(vb_cc_size_index *index, uint64_t size)
{
    uint32_t c = size_class(size);
    if (class_in_use(index, c)) {
        if (is_heap_class(index, c)) {
            /* Every block of the class is (size of c, address): all of them
             * come at or after (size, 0) unless size is above that size. */
            if (size <= (uint64_t)c * VB_CC_MIN_BLOCK_SIZE) return heap_first(heap_of(index, c));
        } else {
            vb_cc_block probe = {.size = size, .addr = 0};
            vb_oset_node *found = vb_oset_lower_bound_by(class_set(index, c), &probe.class_node, compare_in_class);
            if (found) return block_of(found);
        }
    }
    int next = next_class_in_use(index, c);
    return next < 0 ? NULL : class_first(index, (uint32_t)next);
}

/* The last block of (size, address) < (size, 0) in the index, or NULL. */
static vb_cc_block *index_last_before(const vb_cc_size_index *index, uint64_t size)
{
    uint32_t c = size_class(size);
    if (class_in_use(index, c)) {
        if (is_heap_class(index, c)) {
            if ((uint64_t)c * VB_CC_MIN_BLOCK_SIZE < size) return heap_last(heap_of(index, c));
        } else {
            vb_cc_block probe = {.size = size, .addr = 0};
            vb_oset_node *found = vb_oset_last_before(class_set(index, c), &probe.class_node);
            if (found) return block_of(found);
        }
    }
    int before = prev_class_in_use(index, c);
    return before < 0 ? NULL : class_last(index, (uint32_t)before);
}

/* The indexed block just before `block` (in `index`, its stream's) in its
 * stream's order, or NULL. */
static vb_cc_block *index_before(const vb_cc_size_index *index, const vb_cc_block *block)
{
    vb_cc_block *found = is_heap_class(index, block->size_class)
                             ? heap_before(heap_of(index, block->size_class), block->addr)
                             : block_of(vb_oset_prev(class_set(index, block->size_class), &block->class_node));
    if (found) return found;
    int c = prev_class_in_use(index, block->size_class);
    return c < 0 ? NULL : class_last(index, (uint32_t)c);
}

/* The indexed block just after `block` (in `index`, its stream's) in its
 * stream's order, or NULL. */
static vb_cc_block *index_after(vb_cc_size_index *index, const vb_cc_block *block)
{
    vb_cc_block *found = is_heap_class(index, block->size_class)
                             ? heap_after(heap_of(index, block->size_class), block->addr)
                             : block_of(vb_oset_next(class_set(index, block->size_class), &block->class_node));
    if (found) return found;
    int c = next_class_in_use(index, block->size_class);
    return c < 0 ? NULL : class_first(index, (uint32_t)c);
}

/* ------------------------------------------------------------------------ */
/* Block structs, sets, splice, merge                                         */
/* ------------------------------------------------------------------------ */

/* Asks for a block's first cache line (none for NULL: a prefetch would
 * not fault, but the arithmetic on a null pointer is undefined): all that
 * caching's malloc and free read of a block with no record_stream uses,
 * its own or a neighbour (see vb_cc_block). */
static void prefetch_first_line(const vb_cc_block *block)
{
    if (block) __builtin_prefetch(block);
}

/* A free neighbour's second line, when a merge with it will read that:
 * one in a set or in no index (not in a heap, heap_stamp 0) leaves its set
 * through its node. */
static void prefetch_merged_set_node(const vb_cc_block *block)
{
    if (vb_cc_block_available(block) && !block->heap_stamp)
        __builtin_prefetch((const char *)block + VB_CC_BLOCK_ALIGNMENT);
}

/* A struct never handed out before, from the newest slab (or a new one),
 * with no uses array. NULL when host memory runs out. */
static vb_cc_block *slab_take(vb_cc_allocator *cc)
{
    vb_cc_slab *slab = cc->slabs;
    if (!slab || slab->used == SLAB_BLOCKS) {
        vb_cc_slab *grown = vb_host_chunk_take();
        if (!grown) return NULL;
        *grown = (vb_cc_slab){slab, 0};
        cc->slabs = slab = grown;
    }
    vb_cc_block *block = slab_block(slab, slab->used++);
    /* The second cache line as a recycled struct has it (vb_cc_block_new
     * sets the first): no uses, no counts, age base 0. Its set node needs
     * nothing: a set's insert sets all of it. */
    block->uses = NULL;
    block->event_count = 0;
    block->use_count = 0;
    block->gc_count_base = 0;
    return block;
}

vb_cc_block *vb_cc_block_new(vb_cc_allocator *cc, vb_addr addr, uint64_t size, vb_stream stream,
                             vb_cc_pool *pool, vb_cc_segment *segment)
{
    vb_cc_block *block = cc->spare_blocks;
    if (block) {
        cc->spare_blocks = block->next;
        prefetch_first_line(cc->spare_blocks); /* the next struct taken, asked for now */
        /* A base another pool's count set (garbage collection on) goes
         * back to 0, as vb_cc_pool_insert wants it. */
        if (collects_garbage(cc)) block->gc_count_base = 0;
    } else {
        block = slab_take(cc);
        if (!block) return NULL;
    }
    /* The first cache line set, field by field: a memset (or a struct
     * assignment, which the compiler makes one) is a string instruction
     * that takes longer to start than these stores take. The second is
     * left as a recycled struct has it (vb_cc_block_recycle: no uses, no
     * counts, age base 0 without garbage collection) and as slab_take
     * makes it: a struct taken again costs no write to that line, which
     * is seldom in the cache (see vb_cc_block). */
    block->stream = stream;
    block->size = size;
    block->addr = addr;
    block->prev = block->next = NULL;
    block->segment = segment;
    block->heap_stamp = 0;
    block->size_class = 0;
    block->allocated = 0;
    block->mapped = 1;
    block->whole_in_pool = 0;
    block->indexed = 0;
    block->in_use = 0;
    block->in_small_pool = pool == &cc->small_pool;
    return block;
}

void vb_cc_block_recycle(vb_cc_allocator *cc, vb_cc_block *block)
{
    block->segment = NULL; /* a struct of no segment (stitch's hints rely on it) */
    block->next = cc->spare_blocks;
    cc->spare_blocks = block;
}

/* Into the stream's size index, or into pool->blocks while the pool keeps
 * that (see complete_blocks). */
void vb_cc_pool_insert(vb_cc_pool *pool, vb_cc_block *block)
{
    /* The count is 0 until garbage collection first counts (and always,
     * without it), and every struct's base is 0 until then: no write to
     * the struct's second cache line while it is 0 (see vb_cc_block). */
    if (pool->get_free_blocks_call_count) block->gc_count_base = pool->get_free_blocks_call_count;
    block->whole_in_pool = !vb_cc_block_is_split(block);
    pool->whole_free += block->whole_in_pool;
    if (block->whole_in_pool) whole_list_add(pool, block);
    if (!pool->blocks_kept) {
        vb_cc_size_index *index = index_of(pool, block->stream, 1); /* NULL: it stopped indexing */
        if (index && index_add(index, block) == 0) return;
        if (!pool->unindexed) stop_indexing(pool); /* host memory ran out: pool->blocks keeps it */
    }
    vb_oset_insert_by(&pool->blocks, &block->class_node, compare_by_size);
    count_update(pool);
}

void vb_cc_pool_note_releasable(vb_cc_pool *pool, uint64_t bytes)
{
    if (!pool->smallest_releasable || bytes < pool->smallest_releasable) pool->smallest_releasable = bytes;
}

vb_oset_node *vb_cc_pool_first_at_least(vb_cc_pool *pool, vb_oset_node *node)
{
    while (node) {
        const vb_cc_block *block = block_of(node);
        if (block->size >= pool->smallest_releasable) return node;
        vb_cc_block probe = probe_block(block->stream, pool->smallest_releasable, 0);
        node = vb_oset_lower_bound_by(&pool->blocks, &probe.class_node, compare_by_size);
    }
    return NULL;
}

void vb_cc_pool_erase(vb_cc_pool *pool, vb_cc_block *block)
{
    pool->whole_free -= block->whole_in_pool;
    if (block->whole_in_pool) whole_list_remove(pool, block);
    block->whole_in_pool = 0;
    if (pool->blocks_kept) {
        vb_oset_remove(&pool->blocks, &block->class_node);
        count_update(pool);
    } else if (block->indexed) {
        index_remove(index_of(pool, block->stream, 0), block);
    }
}

void vb_cc_pool_each_free(vb_cc_pool *pool, int (*visit)(void *context, vb_cc_block *block), void *context)
{
    if (pool->blocks_kept) {
        for (vb_oset_node *node = vb_oset_first(&pool->blocks); node; node = vb_oset_next(&pool->blocks, node))
            if (!visit(context, block_of(node))) return;
        return;
    }
    for (size_t i = 0; i < pool->index_count; i++) {
        vb_cc_size_index *index = pool->indexes[i];
        int c = last_class_in_use(index);
        if (!index->stamps) { /* sets only: from the last block back */
            for (vb_cc_block *block = c < 0 ? NULL : class_last(index, (uint32_t)c); block;
                 block = index_before(index, block))
                if (!visit(context, block)) return;
            continue;
        }
        /* A heap has no cheap step to a neighbour: class by class, each
         * heap's entries as they lie. */
        for (; c >= 0; c = prev_class_in_use(index, (uint32_t)c)) {
            if (is_heap_class(index, (uint32_t)c)) {
                const class_heap *heap = heap_of(index, (uint32_t)c);
                for (uint32_t e = 0; e < heap->count; e++)
                    if (entry_live(&heap->entries[e]) && !visit(context, heap->entries[e].block)) return;
                continue;
            }
            const vb_ordered_set *set = class_set(index, (uint32_t)c);
            for (vb_oset_node *node = vb_oset_last(set); node; node = vb_oset_prev(set, node))
                if (!visit(context, block_of(node))) return;
        }
    }
}

void vb_cc_splice(vb_cc_block *block, vb_cc_block *before, vb_cc_block *after)
{
    if (before) before->next = block;
    else block->segment->head = block;
    block->prev = before;
    if (after) after->prev = block;
    block->next = after;
}

uint64_t vb_cc_try_merge(vb_cc_allocator *cc, vb_cc_block *dst, vb_cc_block *src)
{
    if (!vb_cc_block_available(src) || dst->mapped != src->mapped) return 0;
    if (dst->prev == src) {
        dst->addr = src->addr;
        dst->prev = src->prev;
        if (dst->prev) dst->prev->next = dst;
        else dst->segment->head = dst;
    } else {
        dst->next = src->next;
        if (dst->next) dst->next->prev = dst;
    }
    dst->size += src->size;
    /* dst's pool: address neighbours are of one segment, so of one pool,
     * and src's second cache line stays unread (see vb_cc_block). */
    if (src->mapped) vb_cc_pool_erase(vb_cc_block_pool(cc, dst), src);
    else vb_oset_remove(&vb_cc_block_pool(cc, src)->unmapped, &src->class_node);
    uint64_t absorbed = src->size;
    vb_cc_block_recycle(cc, src);
    return absorbed;
}

void vb_cc_segment_add(vb_cc_allocator *cc, vb_cc_segment *segment)
{
    vb_oset_insert(&cc->segments, &segment->node);
}

void vb_cc_segment_remove(vb_cc_allocator *cc, vb_cc_segment *segment)
{
    vb_oset_remove(&cc->segments, &segment->node);
}

/* free_block: a block nobody uses any more joins its free neighbours and
 * goes back into its pool. Both neighbours are asked for first, so that
 * their cache misses overlap instead of following one another. */
static void free_block(vb_cc_allocator *cc, vb_cc_block *block)
{
    prefetch_first_line(block->prev);
    prefetch_first_line(block->next);
    vb_cc_try_merge(cc, block, block->prev);
    vb_cc_try_merge(cc, block, block->next);
    if (cc->source->take_freed && cc->source->take_freed(cc, block)) return;
    vb_cc_pool_insert(vb_cc_block_pool(cc, block), block);
}

/* ------------------------------------------------------------------------ */
/* Sizes                                                                      */
/* ------------------------------------------------------------------------ */

/* roundup_power2_next_division: `size` rounded up to the next of
 * `divisions` equal steps between the powers of two around it. */
static uint64_t next_power2_division(uint64_t size, uint64_t divisions)
{
    if ((size & (size - 1)) == 0) return size;
    uint64_t floor = (uint64_t)1 << (63 - __builtin_clzll(size));
    uint64_t step = floor >> __builtin_ctzll(divisions);
    if (step == 0) return floor << 1;
    uint64_t rounded_down = size & ~(step - 1);
    return rounded_down == size ? size : rounded_down + step;
}

/* AllocatorConfig::roundup_power2_divisions(size): the interval is
 * log2(size) - 20 (1 MiB), clamped to the table. */
uint64_t vb_cc_roundup_divisions(const vb_cc_allocator *cc, uint64_t size)
{
    uint32_t log_size = 63 - (uint32_t)__builtin_clzll(size);
    uint32_t index = log_size > 20 ? log_size - 20 : 0;
    if (index >= VB_CC_ROUNDUP_INTERVALS) index = VB_CC_ROUNDUP_INTERVALS - 1;
    return cc->roundup_power2_divisions[index];
}

/* PyTorch's round_size. */
uint64_t vb_cc_round_size(const vb_cc_allocator *cc, uint64_t size)
{
    if (size >= VB_CC_MAX_REQUEST) return 0;
    if (size < VB_CC_MIN_BLOCK_SIZE) return VB_CC_MIN_BLOCK_SIZE;
    uint64_t divisions = vb_cc_roundup_divisions(cc, size);
    if (divisions > 1 && (size - 1) / VB_CC_MIN_BLOCK_SIZE >= divisions) /* size > 512 x divisions */ return next_power2_division(size, divisions);
    return (size + VB_CC_MIN_BLOCK_SIZE - 1) & ~(uint64_t)(VB_CC_MIN_BLOCK_SIZE - 1);
}

/* PyTorch's get_allocation_size: small requests share 2 MiB segments,
 * requests under 10 MiB share 20 MiB ones, larger ones get their own
 * rounded to 2 MiB. */
uint64_t vb_cc_allocation_size(uint64_t size)
{
    if (size <= VB_CC_SMALL_SIZE) return VB_CC_SMALL_BUFFER;
    if (size < VB_CC_MIN_LARGE_ALLOC) return VB_CC_LARGE_BUFFER;
    return (size + VB_CC_ROUND_LARGE - 1) & ~(uint64_t)(VB_CC_ROUND_LARGE - 1);
}

/* should_split: a small block splits off any remainder of a block's worth;
 * a large one only a remainder over 1 MiB, and never for requests of
 * max_split_size or more. Expandable segments split large blocks like
 * small ones; a large borrowed segment never splits. */
static int should_split(const vb_cc_allocator *cc, const vb_cc_pool *pool, const vb_cc_block *block, uint64_t size)
{
    uint64_t remaining = block->size - size;
    /* A large stitched range serves one block, whole (stitch.c). */
    if (!pool->is_small && block->segment->borrowed) return 0; /* the pool first: its line is warm */
    if (pool->is_small || cc->source->expandable) return remaining >= VB_CC_MIN_BLOCK_SIZE;
    return size < cc->max_split_size && remaining > VB_CC_SMALL_SIZE;
}

/* ------------------------------------------------------------------------ */
/* Stream events (record_stream)                                              */
/* ------------------------------------------------------------------------ */

/* The queue of events recorded on `stream`, created on first use; NULL
 * when host memory runs out. */
static vb_cc_stream_events *events_of(vb_cc_allocator *cc, vb_stream stream)
{
    for (size_t i = 0; i < cc->event_stream_count; i++)
        if (cc->event_streams[i].stream == stream) return &cc->event_streams[i];
    if (cc->event_stream_count == cc->event_stream_capacity) {
        size_t capacity = cc->event_stream_capacity ? cc->event_stream_capacity * 2 : 4;
        vb_cc_stream_events *grown = realloc(cc->event_streams, capacity * sizeof *grown);
        if (!grown) return NULL;
        cc->event_streams = grown;
        cc->event_stream_capacity = capacity;
    }
    vb_cc_stream_events *queue = &cc->event_streams[cc->event_stream_count++];
    memset(queue, 0, sizeof *queue);
    queue->stream = stream;
    return queue;
}

/* Appends to a queue; 0, or -1 when host memory runs out. */
static int events_push(vb_cc_stream_events *queue, vb_cc_event_entry entry)
{
    if (queue->count == queue->capacity) {
        size_t capacity = queue->capacity ? queue->capacity * 2 : 8;
        vb_cc_event_entry *ring = malloc(capacity * sizeof *ring);
        if (!ring) return -1;
        for (size_t i = 0; i < queue->count; i++) ring[i] = queue->ring[(queue->head + i) % queue->capacity];
        free(queue->ring);
        queue->ring = ring;
        queue->head = 0;
        queue->capacity = capacity;
    }
    queue->ring[(queue->head + queue->count) % queue->capacity] = entry;
    queue->count++;
    return 0;
}

/* An event from the spare list (PyTorch's EventPool) or a new one. */
static vb_event event_take(vb_cc_allocator *cc)
{
    if (cc->spare_event_count) return cc->spare_events[--cc->spare_event_count];
    vb_event event = NULL;
    if (cc->device->ops->event_create(cc->device, &event) != VB_OK) return NULL;
    return event;
}

/* Returns an event to the spare list (or destroys it when that cannot grow). */
static void event_give(vb_cc_allocator *cc, vb_event event)
{
    if (cc->spare_event_count == cc->spare_event_capacity) {
        size_t capacity = cc->spare_event_capacity ? cc->spare_event_capacity * 2 : 8;
        vb_event *grown = realloc(cc->spare_events, capacity * sizeof *grown);
        if (!grown) {
            cc->device->ops->event_destroy(cc->device, event);
            return;
        }
        cc->spare_events = grown;
        cc->spare_event_capacity = capacity;
    }
    cc->spare_events[cc->spare_event_count++] = event;
}

/* The capacity of a block's uses array, which vb_stream_list_add makes
 * for 2 and doubles when full: the least power of two, 2 at least, that
 * holds `count` (0 for no array). A block struct keeps no capacity field:
 * it is two cache lines (vb_cc_block). */
static uint32_t uses_capacity(uint32_t count)
{
    if (count == 0) return 0;
    uint32_t capacity = 2;
    while (capacity < count) capacity *= 2;
    return capacity;
}

/* Keeps block->in_use, which vb_cc_block_available reads in the block's
 * first cache line, in step with the counts in its second. */
static void note_in_use(vb_cc_block *block)
{
    block->in_use = block->event_count != 0 || block->use_count != 0;
}

/* insert_events: at free time, one event per stream the block was used on;
 * the block is reusable once all have completed. Where an event cannot be
 * had, waiting for the stream here keeps the same guarantee. */
static void insert_events(vb_cc_allocator *cc, vb_cc_block *block)
{
    vb_device *dev = cc->device;
    for (uint32_t i = 0; i < block->use_count; i++) {
        vb_stream stream = block->uses[i];
        vb_event event = event_take(cc);
        vb_cc_stream_events *queue = event ? events_of(cc, stream) : NULL;
        if (queue && dev->ops->event_record(dev, event, stream) == VB_OK &&
            events_push(queue, (vb_cc_event_entry){event, block}) == 0) {
            block->event_count++;
            cc->outstanding_events++;
            continue;
        }
        if (event) event_give(cc, event);
        dev->ops->stream_synchronize(dev, stream);
    }
    block->use_count = 0;
    free(block->uses); /* a struct keeps no array: its capacity follows from use_count (uses_capacity) */
    block->uses = NULL;
    note_in_use(block);
}

/* Takes the oldest entry of a queue off it; its event goes back to the spare
 * list, and its block becomes free when that was its last event. */
static void events_pop(vb_cc_allocator *cc, vb_cc_stream_events *queue)
{
    vb_cc_event_entry entry = queue->ring[queue->head];
    queue->head = (queue->head + 1) % queue->capacity;
    queue->count--;
    cc->outstanding_events--;
    event_give(cc, entry.event);
    entry.block->event_count--;
    note_in_use(entry.block);
    if (entry.block->event_count == 0) free_block(cc, entry.block);
}

/* process_events: frees blocks whose other-stream uses have completed.
 * Per stream, oldest first, stopping at the first pending event, so that
 * one busy stream does not hold up the others. */
static void process_events(vb_cc_allocator *cc)
{
    vb_device *dev = cc->device;
    for (size_t s = 0; s < cc->event_stream_count; s++) {
        vb_cc_stream_events *queue = &cc->event_streams[s];
        while (queue->count && dev->ops->event_query(dev, queue->ring[queue->head].event))
            events_pop(cc, queue);
    }
}

/* synchronize_and_free_events: waits for every outstanding event and frees
 * its block (release_cached_blocks does this first). */
static void synchronize_and_free_events(vb_cc_allocator *cc)
{
    vb_device *dev = cc->device;
    for (size_t s = 0; s < cc->event_stream_count; s++) {
        vb_cc_stream_events *queue = &cc->event_streams[s];
        while (queue->count) {
            dev->ops->event_synchronize(dev, queue->ring[queue->head].event);
            events_pop(cc, queue);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Finding, getting and giving back memory                                    */
/* ------------------------------------------------------------------------ */

/* What a block in an expandable segment could grow to: itself plus the
 * unmapped space right after it. */
static uint64_t expandable_size(const vb_cc_block *block)
{
    return block->size + (block->next && !block->next->mapped ? block->next->size : 0);
}

/* Queries on the free set of one stream, in best-fit order: from the
 * stream's size index, or by walking pool->blocks while the pool keeps
 * it (see complete_blocks). */

/* The first free block of `stream` not before (size, 0), or NULL. */
static vb_cc_block *free_lower_bound(vb_cc_pool *pool, vb_stream stream, uint64_t size)
{
    if (pool->blocks_kept) {
        vb_cc_block probe = probe_block(stream, size, 0);
        vb_cc_block *block = block_of(vb_oset_lower_bound_by(&pool->blocks, &probe.class_node, compare_by_size));
        return block && block->stream == stream ? block : NULL;
    }
    vb_cc_size_index *index = index_of(pool, stream, 0);
    return index ? index_lower_bound(index, size) : NULL;
}

/* The last free block of `stream` before (size, 0), or NULL. */
static vb_cc_block *free_last_before(vb_cc_pool *pool, vb_stream stream, uint64_t size)
{
    if (pool->blocks_kept) {
        vb_cc_block probe = probe_block(stream, size, 0);
        vb_cc_block *block = block_of(vb_oset_last_before(&pool->blocks, &probe.class_node));
        return block && block->stream == stream ? block : NULL;
    }
    vb_cc_size_index *index = index_of(pool, stream, 0);
    return index ? index_last_before(index, size) : NULL;
}

/* The free block after / before `block` (free) in its stream, or NULL. */
static vb_cc_block *free_after(vb_cc_pool *pool, const vb_cc_block *block)
{
    if (!pool->blocks_kept) return index_after(index_of(pool, block->stream, 0), block);
    vb_cc_block *next = block_of(vb_oset_next(&pool->blocks, &block->class_node));
    return next && next->stream == block->stream ? next : NULL;
}

static vb_cc_block *free_before(vb_cc_pool *pool, const vb_cc_block *block)
{
    if (!pool->blocks_kept) return index_before(index_of(pool, block->stream, 0), block);
    vb_cc_block *before = block_of(vb_oset_prev(&pool->blocks, &block->class_node));
    return before && before->stream == block->stream ? before : NULL;
}

/* get_free_block: the best fit on the request's stream, within the
 * oversize rules: a request under max_split_size never takes a block of
 * max_split_size or more, and an oversize request only takes one less than
 * max_non_split_rounding (20 MiB) larger. NULL when none. */
static vb_cc_block *get_free_block(vb_cc_allocator *cc, vb_cc_pool *pool, vb_stream stream, uint64_t size)
{
    if (collects_garbage(cc)) pool->get_free_blocks_call_count++;
    vb_cc_block *block = free_lower_bound(pool, stream, size);
    if (!block) return NULL;
    if (cc->source->expandable) {
        /* Prefer a block that cannot grow to the one at a segment's end, so
         * the end stays free to grow into. */
        vb_cc_block *next = free_after(pool, block);
        while (next && expandable_size(next) < expandable_size(block)) {
            block = next;
            next = free_after(pool, block);
        }
    }
    if (size < cc->max_split_size && block->size >= cc->max_split_size) return NULL;
    if (size >= cc->max_split_size && block->size - size >= cc->max_non_split_rounding) return NULL;
    vb_cc_pool_erase(pool, block);
    return block;
}

/* Narrows a call's interval of limits under which its decisions are the
 * same (vb_grant) to [from, to); to 0: no bound above ([0, 0): every
 * limit, nothing to note). */
static void note_same_limits(vb_grant *grant, uint64_t from, uint64_t to)
{
    if (from > grant->limit_same_from) grant->limit_same_from = from;
    if (to && (!grant->limit_same_to || to < grant->limit_same_to)) grant->limit_same_to = to;
}

/* PyTorch's gc_threshold under the limit `allowed`:
 * size_t(garbage_collection_threshold x allowed_memory_maximum). */
static uint64_t gc_threshold_at(const vb_cc_allocator *cc, uint64_t allowed)
{
    return (uint64_t)(cc->gc_threshold * (double)allowed);
}

/* The smallest limit whose gc_threshold is at least `bytes`. */
static uint64_t gc_limit_from(const vb_cc_allocator *cc, uint64_t bytes)
{
    uint64_t limit = (uint64_t)((double)bytes / cc->gc_threshold);
    while (limit > 0 && gc_threshold_at(cc, limit - 1) >= bytes) limit--;
    while (gc_threshold_at(cc, limit) < bytes) limit++;
    return limit;
}

/* garbage_collect_cached_blocks: when reserved memory exceeds
 * garbage_collection_threshold x the allowed memory, frees whole free
 * large-pool segments, the oldest first (age = get_free_block calls since
 * the block became free), rounds of "at least the average age" until enough
 * was reclaimed. No synchronization beyond what the driver free does. */
/* One garbage collection's running figures: PyTorch's gc_reclaimed,
 * total_age and freeable_block_count, and whether the round freed one. */
typedef struct gc_tally {
    uint64_t reclaimed, total_age;
    size_t freeable;
    int freed_one;
} gc_tally;

/* Frees whole block `b`, a round's victim, and counts it out. */
static void gc_free(vb_cc_allocator *cc, gc_tally *tally, vb_cc_block *b)
{
    tally->freed_one = 1;
    tally->reclaimed += b->size;
    tally->total_age -= block_age(vb_cc_block_pool(cc, b), b);
    tally->freeable--;
    cc->source->release_block(cc, b);
}

static void garbage_collect_cached_blocks(vb_cc_allocator *cc, vb_grant *grant)
{
    if (!cc->source->release_block) return; /* no whole segment to free: the same under any limit */
    uint64_t reserved = cc->stats->reserved_bytes;
    uint64_t threshold = gc_threshold_at(cc, cc->allowed_memory_maximum);
    if (reserved <= threshold) {
        /* A smaller limit would collect here, and so decide otherwise only
         * if there is something to collect: a whole free segment. */
        if (cc->large_pool.whole_free > 0) note_same_limits(grant, gc_limit_from(cc, reserved), 0);
        return;
    }
    uint64_t target = reserved - threshold, before_last_round = 0;
    gc_tally tally = {0, 0, 0, 1};
    vb_cc_pool *pool = &cc->large_pool;
    int walk = pool->whole_unlisted;
    if (walk) complete_blocks(pool);
    vb_ordered_set *blocks = &pool->blocks;
    if (walk) {
        for (vb_cc_block *b = block_of(vb_oset_first(blocks)); b; b = block_of(vb_oset_next(blocks, &b->class_node)))
            if (!vb_cc_block_is_split(b)) {
                tally.total_age += block_age(pool, b);
                tally.freeable++;
            }
    } else {
        for (size_t i = 0; i < pool->whole_free; i++) tally.total_age += block_age(pool, pool->whole_blocks[i]);
        tally.freeable = pool->whole_free;
    }
    while (tally.reclaimed < target && tally.freed_one && tally.freeable > 0) {
        double age_threshold = (double)tally.total_age / (double)tally.freeable;
        before_last_round = tally.reclaimed;
        tally.freed_one = 0;
        if (!walk) {
            /* A round frees every whole block at least that old, whatever
             * the order; they go in the walk's, so the device sees the
             * same calls. */
            size_t victims = 0;
            for (size_t i = 0; i < pool->whole_free; i++)
                if ((double)block_age(pool, pool->whole_blocks[i]) >= age_threshold)
                    pool->whole_victims[victims++] = pool->whole_blocks[i];
            vb_cc_sort_by_size(pool->whole_victims, victims);
            for (size_t i = 0; i < victims; i++) gc_free(cc, &tally, pool->whole_victims[i]);
            continue;
        }
        vb_cc_block *b = block_of(vb_oset_first(blocks));
        while (b) {
            vb_cc_block *next = block_of(vb_oset_next(blocks, &b->class_node));
            if (!vb_cc_block_is_split(b) && (double)block_age(pool, b) >= age_threshold) gc_free(cc, &tally, b);
            b = next;
        }
    }
    /* The same rounds run for any target in (before_last_round,
     * reclaimed] (above it too when they stopped for want of blocks): a
     * threshold in [reserved - reclaimed, reserved - before_last_round). */
    int stopped_by_target = tally.reclaimed >= target && tally.freed_one && tally.freeable > 0;
    uint64_t lowest = stopped_by_target ? reserved - tally.reclaimed : 0;
    if (tally.reclaimed > 0 || tally.freeable > 0) /* none freeable from the start: nothing happens under any limit */
        note_same_limits(grant, lowest ? gc_limit_from(cc, lowest) : 0,
                         gc_limit_from(cc, reserved - before_last_round));
    if (walk) forget_blocks(pool);
}

/* alloc_block: new memory from the source, unless memory_fraction forbids
 * it. PyTorch's check (DeviceCachingAllocator::alloc_block) is on the
 * segment size get_allocation_size gives, `alloc_size`, whatever the source
 * then takes: total_allocated_memory + alloc_size > allowed_memory_maximum.
 * With expandable segments that is not what is mapped (a 12 MiB request
 * maps a 20 MiB chunk, or none of it where the free end of the range
 * holds part of it), so reserved memory can end above the limit, or a
 * request be refused that mapping would have served. */
static vb_status alloc_block(vb_cc_allocator *cc, vb_cc_pool *pool, vb_stream stream, uint64_t size,
                             uint64_t alloc_size, vb_cc_block **out, vb_grant *grant)
{
    if (cc->set_fraction) {
        uint64_t demand = cc->stats->reserved_bytes + alloc_size;
        int refused = demand > cc->allowed_memory_maximum;
        note_same_limits(grant, refused ? 0 : demand, refused ? demand : 0);
        if (refused)
            return vb_error(VB_ERR_OOM, "%s: memory_fraction allows %llu bytes", cc->name,
                            (unsigned long long)cc->allowed_memory_maximum);
    }
    return cc->source->alloc_block(cc, pool, stream, size, alloc_size, out);
}

/* release_available_cached_blocks: with max_split_size set, frees the
 * smallest oversize free block that covers the request (or max_split_size),
 * else oversize blocks from the largest down until that much is freed.
 * 1 if it freed what it aimed to. */
static int release_available_cached_blocks(vb_cc_allocator *cc, vb_cc_pool *pool, vb_stream stream, uint64_t size)
{
    if (cc->max_split_size == UINT64_MAX || !cc->source->release_block) return 0;
    uint64_t key_size = size < cc->max_split_size ? cc->max_split_size : size;
    vb_cc_block *block = free_lower_bound(pool, stream, key_size);
    if (block) {
        cc->source->release_block(cc, block);
        return 1;
    }
    block = free_last_before(pool, stream, key_size);
    uint64_t released = 0;
    while (block && released < key_size && block->size >= cc->max_split_size) {
        vb_cc_block *before = free_before(pool, block);
        released += block->size;
        cc->source->release_block(cc, block);
        block = before;
    }
    return released >= key_size;
}

/* release_cached_blocks (empty_cache, and the last resort before OOM): waits
 * for outstanding events, then gives back every pool's free memory. */
static void release_cached_blocks(vb_cc_allocator *cc)
{
    synchronize_and_free_events(cc);
    complete_blocks(&cc->large_pool);
    complete_blocks(&cc->small_pool);
    cc->source->release_pool(cc, &cc->large_pool);
    cc->source->release_pool(cc, &cc->small_pool);
    forget_blocks(&cc->small_pool);
    forget_blocks(&cc->large_pool);
}

/* alloc_found_block: hands `block` (of `pool`) out for `size` (rounded)
 * bytes, splitting the remainder off into the pool when `split`; returns
 * the block handed out. */
static vb_cc_block *alloc_found_block(vb_cc_allocator *cc, vb_cc_pool *pool, vb_cc_block *block, uint64_t size,
                                      int split)
{
    vb_cc_block *front = split ? vb_cc_block_new(cc, block->addr, size, block->stream, pool, block->segment) : NULL;
    if (front) {
        /* The front part is handed out; the struct found keeps the rest. */
        vb_cc_splice(front, block->prev, block);
        block->addr += size;
        block->size -= size;
        vb_cc_pool_insert(pool, block);
        block = front;
    }
    block->allocated = 1;
    return block;
}

/* ------------------------------------------------------------------------ */
/* The ops                                                                    */
/* ------------------------------------------------------------------------ */

/* malloc: PyTorch's flow. Reclaim finished cross-stream frees; best fit in
 * the pool; otherwise garbage-collect (if configured), get new memory, and
 * on failure free oversize blocks and retry, then free the whole cache and
 * retry once more before reporting out of memory. */
vb_status vb_cc_malloc(void *state, uint64_t size, vb_stream stream, vb_grant *out)
{
    vb_cc_allocator *cc = state;
    if (cc->outstanding_events) process_events(cc);
    uint64_t rounded = vb_cc_round_size(cc, size);
    if (rounded == 0)
        return vb_error(VB_ERR_OOM, "%s: out of memory: %llu bytes is more than any device has", cc->name,
                        (unsigned long long)size);
    vb_cc_pool *pool = rounded <= VB_CC_SMALL_SIZE ? &cc->small_pool : &cc->large_pool;
    vb_cc_block *block = get_free_block(cc, pool, stream, rounded);
    if (!block) {
        uint64_t alloc_size = vb_cc_allocation_size(rounded);
        if (collects_garbage(cc)) garbage_collect_cached_blocks(cc, out);
        vb_status status = alloc_block(cc, pool, stream, rounded, alloc_size, &block, out);
        if (status == VB_ERR_OOM && release_available_cached_blocks(cc, pool, stream, rounded))
            status = alloc_block(cc, pool, stream, rounded, alloc_size, &block, out);
        if (status == VB_ERR_OOM) {
            /* alloc_retries is PyTorch's num_alloc_retries: only this last
             * attempt, after the whole cache was released, counts, whether
             * or not it succeeds. */
            release_cached_blocks(cc);
            out->retried = 1;
            status = alloc_block(cc, pool, stream, rounded, alloc_size, &block, out);
        }
        if (status != VB_OK) {
            if (status != VB_ERR_OOM) return status;
            return vb_error(VB_ERR_OOM,
                            "%s: out of memory: tried to allocate %llu bytes; %llu reserved, %llu allocated",
                            cc->name, (unsigned long long)rounded, (unsigned long long)cc->stats->reserved_bytes,
                            (unsigned long long)cc->stats->allocated_bytes);
        }
    }
    vb_cc_block *handed = alloc_found_block(cc, pool, block, rounded, should_split(cc, pool, block, rounded));
    if (cc->allocated_indexed &&
        vb_addr_map_put(&cc->allocated_blocks, handed->addr, (uint64_t)(uintptr_t)handed) != 0) {
        handed->allocated = 0;
        free_block(cc, handed);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    out->addr = handed->addr;
    out->size = handed->size;
    out->tag = (uint64_t)(uintptr_t)handed;
    return VB_OK;
}

/* Indexes every block handed out by address (vb_cc_allocated_at's first
 * call); 0, or -1 when host memory runs out (nothing indexed then). */
static int index_allocated(vb_cc_allocator *cc)
{
    for (vb_oset_node *node = vb_oset_first(&cc->segments); node; node = vb_oset_next(&cc->segments, node))
        for (vb_cc_block *block = VB_OSET_ENTRY(node, vb_cc_segment, node)->head; block; block = block->next)
            if (block->allocated == 1 &&
                vb_addr_map_put(&cc->allocated_blocks, block->addr, (uint64_t)(uintptr_t)block) != 0) {
                vb_addr_map_clear(&cc->allocated_blocks);
                return -1;
            }
    cc->allocated_indexed = 1;
    return 0;
}

vb_cc_block *vb_cc_allocated_at(vb_cc_allocator *cc, vb_addr addr)
{
    uint64_t value = 0;
    if (!cc->allocated_indexed && index_allocated(cc) != 0) return NULL;
    return vb_addr_map_get(&cc->allocated_blocks, addr, &value) ? (vb_cc_block *)(uintptr_t)value : NULL;
}

/* The block the seam's tag names, handed out at `addr` (the tag is the
 * block struct malloc gave as its grant's tag), or NULL when it is not one. */
static vb_cc_block *tagged_block(vb_addr addr, uint64_t tag)
{
    vb_cc_block *block = (vb_cc_block *)(uintptr_t)tag;
    return block && block->allocated == 1 && block->addr == addr ? block : NULL;
}

/* free: the block is cached at once, or, when record_stream named other
 * streams, once the work they had queued at this moment has completed.
 * allocated_bytes drops now, as in PyTorch; requested_bytes drops now too
 * (PyTorch waits for the events), so requested <= allocated always holds
 * and requested means what docs/design.md says: asked for and not yet freed. */
vb_status vb_cc_free(void *state, vb_addr addr, uint64_t tag)
{
    vb_cc_allocator *cc = state;
    vb_cc_block *block = tagged_block(addr, tag);
    if (!block)
        return vb_error(VB_ERR_INVALID, "%s: free of 0x%llx, which is not allocated (unknown or freed twice)",
                        cc->name, (unsigned long long)addr);
    if (cc->allocated_indexed) vb_addr_map_remove(&cc->allocated_blocks, addr, NULL);
    block->allocated = 0;
    /* The counts only when in_use says there are some: they are in the
     * block's second cache line, which a free reads no other way. */
    if (block->in_use) {
        if (block->use_count) insert_events(cc, block);
        if (block->event_count) return VB_OK;
    }
    free_block(cc, block);
    return VB_OK;
}

/* The size a free of `block` leaves in its pool: its own and that of each
 * neighbour it would merge with (as vb_cc_try_merge decides). */
static uint64_t size_after_merges(const vb_cc_block *block)
{
    uint64_t size = block->size;
    if (vb_cc_block_available(block->prev) && block->prev->mapped == block->mapped) size += block->prev->size;
    if (vb_cc_block_available(block->next) && block->next->mapped == block->mapped) size += block->next->size;
    return size;
}

/* Asks for the entries of heap class `c` of `index` that an insert writes
 * (the free end, and the parent it is compared with first), when the
 * class is a heap that exists. */
static void prefetch_heap_insert(const vb_cc_size_index *index, uint32_t c)
{
    if (!index || !is_heap_class(index, c) || !index->heap_pages[c / 64]) return;
    const class_heap *heap = heap_of(index, c);
    if (heap->count >= heap->capacity) return;
    __builtin_prefetch(&heap->entries[heap->count], 1);
    if (heap->count) __builtin_prefetch(&heap->entries[(heap->count - 1) / HEAP_ARITY]);
}

/* prefetch_free: the block (the tag is its struct), then the first line
 * of each address neighbour, which free_block merges with or looks at,
 * then (those in the cache by then) the size class's heap the merged
 * block goes into, and the second line of a neighbour that leaves a set. */
void vb_cc_prefetch_free(void *state, const uint64_t tags[VB_STRATEGY_PREFETCH_STAGES])
{
    vb_cc_allocator *cc = state;
    const vb_cc_block *block = (const vb_cc_block *)(uintptr_t)tags[0];
    prefetch_first_line(block);
    if ((block = (const vb_cc_block *)(uintptr_t)tags[1])) {
        prefetch_first_line(block->prev);
        prefetch_first_line(block->next);
    }
    block = (const vb_cc_block *)(uintptr_t)tags[2];
    if (!block) return;
    prefetch_merged_set_node(block->prev);
    prefetch_merged_set_node(block->next);
    vb_cc_pool *pool = vb_cc_block_pool(cc, block);
    if (block->mapped && !pool->blocks_kept)
        prefetch_heap_insert(index_of(pool, block->stream, 0), size_class(size_after_merges(block)));
}

/* record_stream: remembers a use on another stream (the allocation stream
 * needs no event: its own order protects it). */
vb_status vb_cc_record_stream(void *state, vb_addr addr, uint64_t tag, vb_stream stream)
{
    vb_cc_allocator *cc = state;
    vb_cc_block *block = tagged_block(addr, tag);
    if (!block)
        return vb_error(VB_ERR_INVALID, "%s: record_stream on 0x%llx, which is not allocated", cc->name,
                        (unsigned long long)addr);
    if (stream == block->stream) return VB_OK;
    uint32_t capacity = uses_capacity(block->use_count);
    vb_status status = vb_stream_list_add(&block->uses, &block->use_count, &capacity, stream);
    note_in_use(block);
    return status;
}

/* empty_cache: release_cached_blocks. */
vb_status vb_cc_empty_cache(void *state)
{
    release_cached_blocks(state);
    return VB_OK;
}

/* The largest free block of a pool: the last block of each stream, from
 * the indexes (or from pool->blocks while the pool keeps it). */
static uint64_t largest_in(const vb_cc_pool *pool)
{
    uint64_t largest = 0;
    if (pool->blocks_kept) {
        const vb_ordered_set *set = &pool->blocks;
        vb_cc_block *first = block_of(vb_oset_first(set));
        while (first) {
            vb_cc_block probe = probe_block(first->stream, UINT64_MAX, UINT64_MAX);
            vb_cc_block *last = block_of(vb_oset_last_before(set, &probe.class_node));
            if (last && last->size > largest) largest = last->size;
            first = block_of(vb_oset_lower_bound(set, &probe.class_node));
        }
        return largest;
    }
    for (size_t i = 0; i < pool->index_count; i++) {
        const vb_cc_size_index *index = pool->indexes[i];
        int c = last_class_in_use(index);
        if (c < 0) continue;
        /* A heap class's blocks all have its size; a set's last is its largest. */
        uint64_t size = is_heap_class(index, (uint32_t)c) ? (uint64_t)c * VB_CC_MIN_BLOCK_SIZE
                                                           : class_last(index, (uint32_t)c)->size;
        if (size > largest) largest = size;
    }
    return largest;
}

/* The largest free block of either pool (blocks waiting for other streams'
 * events are cached bytes too, but not free). */
uint64_t vb_cc_largest_free_block(void *state)
{
    vb_cc_allocator *cc = state;
    uint64_t small = largest_in(&cc->small_pool), large = largest_in(&cc->large_pool);
    return small > large ? small : large;
}

/* Visits the blocks of every segment in address order. A segment, as in
 * PyTorch's snapshot, is a contiguous mapped range: a whole driver segment,
 * or each mapped run of an expandable one. */
void vb_cc_segments(void *state, vb_block_visitor visit, void *context)
{
    vb_cc_allocator *cc = state;
    for (vb_oset_node *node = vb_oset_first(&cc->segments); node; node = vb_oset_next(&cc->segments, node)) {
        vb_cc_segment *segment = VB_OSET_ENTRY(node, vb_cc_segment, node);
        vb_cc_block *block = segment->head;
        while (block) {
            if (!block->mapped) {
                block = block->next;
                continue;
            }
            uint64_t run_size = 0;
            for (vb_cc_block *b = block; b && b->mapped; b = b->next) run_size += b->size;
            vb_addr run_start = block->addr;
            for (; block && block->mapped; block = block->next) {
                if (block->allocated == VB_CC_LENT) continue;
                vb_block_info info = {run_start, run_size, block->addr, block->size, block->allocated, block->stream};
                visit(context, &info);
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Set-up and tear-down                                                       */
/* ------------------------------------------------------------------------ */

void vb_cc_default_settings(vb_cc_settings *settings)
{
    settings->max_split_size_mb = UINT64_MAX;
    settings->max_non_split_rounding_mb = VB_CC_LARGE_BUFFER / VB_MiB;
    for (size_t i = 0; i < VB_CC_ROUNDUP_INTERVALS; i++) settings->roundup_power2_divisions[i] = 0;
    settings->garbage_collection_threshold = 0.0;
    settings->memory_fraction = -1.0;
    settings->chunk_mb = 0;
    settings->handle_max_mb = 0;
}

/* MiB to bytes, where anything too large to express means "no limit". */
static uint64_t mib_to_bytes(uint64_t mib)
{
    return mib >= UINT64_MAX / VB_MiB ? UINT64_MAX : mib * VB_MiB;
}

vb_status vb_cc_init(vb_cc_allocator *cc, vb_device *dev, const vb_cc_source *source,
                     const vb_cc_settings *settings, const char *name)
{
    for (size_t i = 0; i < VB_CC_ROUNDUP_INTERVALS; i++) {
        uint64_t divisions = settings->roundup_power2_divisions[i];
        if (divisions & (divisions - 1))
            return vb_error(VB_ERR_INVALID,
                            "%s: bad value '%llu' for roundup_power2_divisions (0 or a power of two)", name,
                            (unsigned long long)divisions);
        cc->roundup_power2_divisions[i] = divisions;
    }
    if (settings->garbage_collection_threshold < 0.0 || settings->garbage_collection_threshold >= 1.0)
        return vb_error(VB_ERR_INVALID, "%s: bad value '%g' for garbage_collection_threshold (0 = off, or in (0, 1))",
                        name, settings->garbage_collection_threshold);
    if (settings->max_split_size_mb < VB_CC_LARGE_BUFFER / VB_MiB ||
        settings->max_non_split_rounding_mb < VB_CC_LARGE_BUFFER / VB_MiB)
        return vb_error(VB_ERR_INVALID, "%s: max_split_size_mb and max_non_split_rounding_mb must be >= 20", name);
    cc->device = dev;
    cc->stats = vb_seam_stats(dev);
    cc->source = source;
    cc->name = name;
    cc->max_split_size = mib_to_bytes(settings->max_split_size_mb);
    cc->max_non_split_rounding = mib_to_bytes(settings->max_non_split_rounding_mb);
    cc->gc_threshold = settings->garbage_collection_threshold;
    cc->large_chunk = settings->chunk_mb ? mib_to_bytes(settings->chunk_mb) : VB_CC_LARGE_BUFFER;
    cc->handle_max = mib_to_bytes(settings->handle_max_mb);
    cc->stitch_max_maps = settings->stitch_max_maps;
    uint64_t granularity = dev->ops->vm_granularity ? dev->ops->vm_granularity(dev) : 0;
    if (settings->chunk_mb && granularity && cc->large_chunk % granularity != 0)
        return vb_error(VB_ERR_INVALID, "%s: chunk_mb=%llu is not a multiple of the device's granularity (%llu bytes)",
                        name, (unsigned long long)settings->chunk_mb, (unsigned long long)granularity);
    /* A handle is whole mapping units and at least one growth step
     * (vm_range.c): another limit would be changed without a word. */
    if (cc->handle_max && ((granularity && cc->handle_max % granularity != 0) || cc->handle_max < cc->large_chunk))
        return vb_error(VB_ERR_INVALID,
                        "%s: handle_max_mb=%llu must be 0 (no limit), or a multiple of the device's granularity "
                        "(%llu bytes) of at least chunk_mb (%llu)",
                        name, (unsigned long long)settings->handle_max_mb, (unsigned long long)granularity,
                        (unsigned long long)(cc->large_chunk / VB_MiB));
    /* setMemoryFraction (PyTorch 2.10 on): a fraction of 1 sets no limit at
     * all (allowed_memory_maximum = nullopt), and so no garbage collection. */
    if (settings->memory_fraction >= 0.0 && settings->memory_fraction < 1.0) {
        uint64_t free_bytes = 0, total_bytes = 0;
        vb_status status = dev->ops->mem_info(dev, &free_bytes, &total_bytes);
        if (status != VB_OK) return status;
        cc->set_fraction = 1;
        cc->allowed_memory_maximum = (uint64_t)(settings->memory_fraction * (double)total_bytes);
    }
    if (!source->expandable) {
        cc->heap_stamps = 1;
        cc->small_pool.heap_stamps = cc->large_pool.heap_stamps = &cc->heap_stamps;
    }
    vb_oset_init(&cc->small_pool.blocks, compare_by_size);
    vb_oset_init(&cc->small_pool.unmapped, compare_by_address);
    cc->small_pool.is_small = 1;
    vb_oset_init(&cc->large_pool.blocks, compare_by_size);
    vb_oset_init(&cc->large_pool.unmapped, compare_by_address);
    vb_oset_init(&cc->segments, compare_segments);
    cc->allocated_blocks.sparse = 1; /* a lookup on every free */
    return VB_OK;
}

vb_status vb_cc_create(vb_device *dev, const vb_config *config, const vb_option *options, size_t option_count,
                       const vb_cc_source *source, const char *name, void **state)
{
    vb_cc_settings settings;
    vb_cc_default_settings(&settings);
    return vb_cc_create_with(dev, config, options, option_count, source, name, &settings, state);
}

vb_status vb_cc_create_with(vb_device *dev, const vb_config *config, const vb_option *options, size_t option_count,
                            const vb_cc_source *source, const char *name, const vb_cc_settings *defaults,
                            void **state)
{
    vb_cc_settings settings = *defaults;
    vb_status status = vb_config_apply(config, options, option_count, &settings, name);
    if (status != VB_OK) return status;
    vb_cc_allocator *cc = calloc(1, sizeof *cc);
    if (!cc) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    status = vb_cc_init(cc, dev, source, &settings, name);
    if (status != VB_OK) {
        free(cc);
        return status;
    }
    *state = cc;
    return VB_OK;
}

/* Frees every slab and the uses array of every struct handed out of them. */
static void free_slabs(vb_cc_allocator *cc)
{
    while (cc->slabs) {
        vb_cc_slab *slab = cc->slabs;
        for (size_t i = 0; i < slab->used; i++) free(slab_block(slab, i)->uses);
        cc->slabs = slab->next;
        vb_host_chunk_give(slab);
    }
    cc->spare_blocks = NULL;
}

/* Returns everything to the device: outstanding events are waited for,
 * every segment (with whatever is still allocated in it) goes back, those
 * that map memory other segments hold first (a handle goes back only
 * once it is mapped nowhere). */
void vb_cc_destroy(void *state)
{
    vb_cc_allocator *cc = state;
    synchronize_and_free_events(cc);
    for (int borrowed = 1; borrowed >= 0; borrowed--) {
        vb_oset_node *node = vb_oset_first(&cc->segments);
        while (node) {
            vb_oset_node *next = vb_oset_next(&cc->segments, node);
            vb_cc_segment *segment = VB_OSET_ENTRY(node, vb_cc_segment, node);
            node = next;
            if (segment->borrowed != borrowed) continue;
            segment->head = NULL; /* its block structs go with the slabs */
            vb_cc_segment_remove(cc, segment);
            cc->source->destroy_segment(cc, segment);
        }
    }
    free_slabs(cc);
    for (size_t i = 0; i < cc->spare_event_count; i++) cc->device->ops->event_destroy(cc->device, cc->spare_events[i]);
    free(cc->spare_events);
    for (size_t i = 0; i < cc->event_stream_count; i++) free(cc->event_streams[i].ring);
    free(cc->event_streams);
    free_indexes(&cc->small_pool);
    free_indexes(&cc->large_pool);
    for (size_t i = 0; i < cc->small_pool.spare_count; i++)
        cc->device->ops->vm_release(cc->device, cc->small_pool.spare_chunks[i].handle);
    for (size_t i = 0; i < cc->large_pool.spare_count; i++)
        cc->device->ops->vm_release(cc->device, cc->large_pool.spare_chunks[i].handle);
    free(cc->small_pool.spare_chunks);
    free(cc->large_pool.spare_chunks);
    free(cc->small_pool.stitched);
    free(cc->large_pool.stitched);
    free(cc->small_pool.whole_blocks);
    free(cc->large_pool.whole_blocks);
    free(cc->small_pool.whole_victims);
    free(cc->large_pool.whole_victims);
    free(cc->stitch_free);
    vb_addr_map_clear(&cc->allocated_blocks);
    free(cc);
}
