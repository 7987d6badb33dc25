/* vrambench — a JSON input read once into memory, bounded.
 *
 * A results file, or any JSON a command reads, is opened without waiting
 * (a FIFO with no writer reads as empty rather than hanging), read once (a
 * pipe or FIFO cannot be read twice) and never past a limit: a regular file
 * larger than it is refused before a byte is read, any other input once it
 * has given more. Nothing is spooled to disk. */
#ifndef VB_JSON_INPUT_H
#define VB_JSON_INPUT_H

#include <stddef.h>

#include <jansson.h>

#include "base/status.h"

/* The most bytes of a results file a command reads. */
#define VB_JSON_INPUT_MAX_BYTES ((size_t)256 << 20)

/* Reads and parses the JSON at `path`, at most `limit` bytes. On success
 * *out holds the document (the caller's reference) and *regular is 1 for a
 * regular file, which can be read again, and 0 for a pipe, FIFO or device,
 * which cannot. Failures are VB_ERR_INVALID (bad input: missing, a
 * directory, empty, too large, not JSON) or VB_ERR_HOST_OOM, with one line
 * that starts with the path ("PATH:LINE: ..." for a parse error). */
vb_status vb_json_input_load(const char *path, size_t limit, json_t **out, int *regular);

#endif
