/* vrambench — shards of a run (see shard.h). */
#include "shard.h"

#include <errno.h>
#include <stdlib.h>

/* A whole number in [1, VB_SHARD_MAX] from `text` up to `end`; 0 when bad. */
static size_t whole(const char *text, const char *end)
{
    if (text == end || *text < '0' || *text > '9') return 0;
    char *stop = NULL;
    errno = 0;
    unsigned long long value = strtoull(text, &stop, 10);
    if (errno != 0 || stop != end || value < 1 || value > VB_SHARD_MAX) return 0;
    return (size_t)value;
}

int vb_shard_parse(const char *text, vb_shard *out)
{
    const char *slash = text;
    while (*slash && *slash != '/') slash++;
    if (*slash != '/') return -1;
    const char *end = slash + 1;
    while (*end) end++;
    size_t index = whole(text, slash), count = whole(slash + 1, end);
    if (!index || !count || index > count) return -1;
    *out = (vb_shard){index, count};
    return 0;
}

int vb_shard_has(vb_shard shard, size_t k)
{
    return shard.count <= 1 || k % shard.count == shard.index - 1;
}

size_t vb_shard_size(vb_shard shard, size_t total)
{
    if (shard.count <= 1) return total;
    return total / shard.count + (total % shard.count >= shard.index ? 1 : 0);
}

int vb_shard_describe(json_t *context, vb_shard shard, size_t total)
{
    if (shard.count <= 1) return 0;
    json_t *value = json_pack("{s:I,s:I,s:I}", "index", (json_int_t)shard.index, "count", (json_int_t)shard.count,
                              "cases", (json_int_t)total);
    return value && json_object_set_new(context, "shard", value) == 0 ? 0 : -1;
}
