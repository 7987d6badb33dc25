/* vrambench — the streams a block was used on besides its own (see stream_list.h). */
#include "stream_list.h"

#include <stdlib.h>

vb_status vb_stream_list_add(vb_stream **streams, uint32_t *count, uint32_t *capacity, vb_stream stream)
{
    for (uint32_t i = 0; i < *count; i++)
        if ((*streams)[i] == stream) return VB_OK;
    if (*count == *capacity) {
        uint32_t grown_capacity = *capacity ? *capacity * 2 : 2;
        vb_stream *grown = realloc(*streams, grown_capacity * sizeof *grown);
        if (!grown) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        *streams = grown;
        *capacity = grown_capacity;
    }
    (*streams)[(*count)++] = stream;
    return VB_OK;
}
