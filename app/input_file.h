/* vrambench — input files: the one way every command reads a file it is
 * given (a trace, a snapshot pickle, a measurements JSON).
 *
 * A regular file is read where it is, as often as needed. Anything else
 * that can be read (a pipe, /dev/stdin, a FIFO, a character device) gives
 * its bytes once: vb_input_spool reads it once into a scratch file
 * (app/scratch.h: in $TMPDIR, unlinked, so nothing is left behind), and
 * every later vb_input_open of the same path reads that copy. The copy is
 * bounded: at most $VB_SPOOL_LIMIT bytes (K/M/G/T suffixes; default 4 GiB),
 * so `replay /dev/zero` ends with an error naming the limit instead of
 * filling the disk.
 *
 * A FIFO is opened without blocking and then waited on until its writer
 * sends something or closes it (as cat waits), with a note on stderr when
 * nothing came for two seconds: never a silent hang. */
#ifndef VB_INPUT_FILE_H
#define VB_INPUT_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "base/status.h"

#define VB_INPUT_SPOOL_LIMIT_ENV "VB_SPOOL_LIMIT"
#define VB_INPUT_DEFAULT_SPOOL_LIMIT ((uint64_t)4 << 30)

/* The bound on a spooled copy: $VB_SPOOL_LIMIT, else 4 GiB. VB_ERR_INVALID
 * when the variable is not a byte count. */
vb_status vb_input_spool_limit(uint64_t *out);

/* Makes `path` readable more than once: a non-seekable input is read now
 * into a scratch file, which later vb_input_open calls of the same path
 * read instead; a regular file (or a directory, whose error comes from the
 * reader) is left alone. VB_ERR_IO when it cannot be read or copied,
 * VB_ERR_INVALID when it is longer than the limit. */
vb_status vb_input_spool(const char *path);

/* vb_input_spool, reading at most `cap` bytes when that is below the
 * limit: for a reader that takes no more (a JSON input), so that an endless
 * pipe is refused at its size, not copied to the spool limit first. */
vb_status vb_input_spool_capped(const char *path, uint64_t cap);

/* Reads everything `fd` gives (a pipe from a child process) into a scratch
 * file, bounded as vb_input_spool, which vb_input_open(`name`) then reads.
 * `fd` is not closed. */
vb_status vb_input_spool_fd(const char *name, int fd);

/* Lists `fd`, a scratch file (app/scratch.h) the command has written (a
 * trace it made), as the spooled copy of `name`: vb_input_open(name) reads
 * it from then on. The descriptor is the list's from now on (closed by
 * vb_input_forget or vb_input_release, or at once when this fails). */
vb_status vb_input_adopt(const char *name, int fd);

/* Closes `name`'s spooled copy, if it has one (its space is given back). */
void vb_input_forget(const char *name);

/* 1 when `path` has a spooled copy. */
int vb_input_is_spooled(const char *path);

/* A new read-only descriptor of `path`: its spooled copy (at offset 0; the
 * copy's descriptors share their offset: read one at a time, or pread),
 * else the file itself (a FIFO waited on as above), and its fstat in *info
 * (when not NULL). -1 with errno set; EISDIR for a directory. */
int vb_input_open(const char *path, struct stat *info);

/* Reads all of `path` into a new NUL-terminated buffer (free it): for
 * inputs parsed whole, such as JSON. A pipe, FIFO or device is spooled
 * first (vb_input_spool: waited on with the note, bounded by
 * $VB_SPOOL_LIMIT, readable again through vb_input_open). More than `limit`
 * bytes is VB_ERR_INVALID; an unreadable file VB_ERR_IO. Messages name the
 * path. */
vb_status vb_input_read_all(const char *path, size_t limit, char **data, size_t *length);

/* Closes every spooled copy. */
void vb_input_release(void);

#endif
