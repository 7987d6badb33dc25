/* vrambench — the streams a block was used on besides its own.
 *
 * record_stream(block, stream) in every strategy that honours it (caching,
 * expandable, async, and the chunk-based bfc, buddy, binning) remembers the
 * stream once, in a growable array kept with the block; the chunk-based
 * strategies reuse the array when the struct is recycled, caching_core.c
 * frees it when the uses end (its structs keep no capacity field). */
#ifndef VB_STREAM_LIST_H
#define VB_STREAM_LIST_H

#include <stdint.h>

#include "base/device.h"
#include "base/status.h"

/* Adds `stream` to streams[0..*count) unless it is there already, doubling
 * the array (from 2) when it is full. VB_ERR_HOST_OOM, with the list unchanged,
 * when host memory runs out. */
vb_status vb_stream_list_add(vb_stream **streams, uint32_t *count, uint32_t *capacity, vb_stream stream);

#endif
