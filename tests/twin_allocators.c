/* vrambench tests — twin allocators (twin_allocators.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "twin_allocators.h"

void twin_open(twin *t, const char *name, const char *const *settings)
{
    static char text[4][64]; /* the entries point into it until the allocator is made */
    vb_config_entry entries[4];
    size_t count = 0;
    for (; settings && settings[count]; count++) {
        assert_true(count < 4);
        snprintf(text[count], sizeof text[count], "%s", settings[count]);
        assert_int_equal(vb_config_entry_parse(text[count], &entries[count]), VB_OK);
    }
    vb_config config = {entries, count};
    memset(t, 0, sizeof *t);
    assert_int_equal(vb_sim_open(TWIN_CAPACITY, &t->dev), VB_OK);
    assert_int_equal(vb_allocator_create(name, t->dev, &config, &t->allocator), VB_OK);
    t->streams[0] = NULL;
    assert_int_equal(t->dev->ops->stream_create(t->dev, &t->streams[1]), VB_OK);
}

void twin_close(twin *t)
{
    vb_allocator_destroy(t->allocator);
    t->dev->ops->stream_destroy(t->dev, t->streams[1]);
    vb_device_close(t->dev);
}

void twin_malloc_both(twin *a, twin *b, size_t slot, uint64_t size, int stream)
{
    vb_status status_a = vb_malloc(a->allocator, size, a->streams[stream], &a->live[slot]);
    vb_status status_b = vb_malloc(b->allocator, size, b->streams[stream], &b->live[slot]);
    assert_int_equal(status_a, status_b);
    if (status_a != VB_OK) a->live[slot] = b->live[slot] = 0;
    assert_int_equal(a->live[slot], b->live[slot]);
}

void twin_close_equal(twin *a, twin *b)
{
    vb_alloc_stats stats_a, stats_b;
    vb_allocator_stats(a->allocator, &stats_a);
    vb_allocator_stats(b->allocator, &stats_b);
    assert_memory_equal(&stats_a, &stats_b, sizeof stats_a);
    twin_close(a);
    twin_close(b);
}

uint64_t twin_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t twin_random_size(uint64_t *rng)
{
    static const uint64_t repeated[] = {512, 4096, 1 << 20, 3 << 20, 12 << 20, 40 << 20};
    uint64_t pick = twin_random(rng);
    if (pick % 2 == 0) return repeated[(pick >> 8) % (sizeof repeated / sizeof repeated[0])];
    if (pick % 4 == 1) return 1 + twin_random(rng) % VB_MiB;
    return 1 + twin_random(rng) % (96 * VB_MiB);
}
