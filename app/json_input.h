/* vrambench — a JSON input read once into memory, bounded.
 *
 * A results file, or any JSON a command reads, is read as every input is
 * (app/input_file.h, vb_input_read_all): a pipe, FIFO or device is spooled
 * once (a FIFO waited on for its writer, with a note after two seconds;
 * bounded by $VB_SPOOL_LIMIT), and no more than a limit is read into
 * memory: a regular file larger than it is refused before a byte is read.
 * A gzip file is read decompressed (the large committed results are stored
 * so), bounded by the same limit. */
#ifndef VB_JSON_INPUT_H
#define VB_JSON_INPUT_H

#include <stddef.h>

#include <jansson.h>

#include "base/status.h"

/* The most bytes of a results file a command reads. */
#define VB_JSON_INPUT_MAX_BYTES ((size_t)256 << 20)

/* Reads the JSON text at `path` (decompressed when gzip), at most `limit`
 * bytes, into a new buffer in *bytes (free it), *length
 * bytes; *regular as vb_json_input_load's. Failures as vb_json_input_load's
 * (all but running out of host memory are VB_ERR_INVALID). */
vb_status vb_json_input_read(const char *path, size_t limit, char **bytes, size_t *length, int *regular);

/* Reads and parses the JSON at `path`, at most `limit` bytes. On success
 * *out holds the document (the caller's reference) and *regular is 1 for a
 * regular file, and 0 for a pipe, FIFO or device (read once: its spooled
 * copy is what vb_input_open gives from then on). Failures are
 * VB_ERR_INVALID (bad input: missing, a directory, empty, too large, not
 * JSON) or VB_ERR_HOST_OOM, with one line
 * that starts with the path ("PATH:LINE: ..." for a parse error). */
vb_status vb_json_input_load(const char *path, size_t limit, json_t **out, int *regular);

#endif
