/* vrambench — output files. Every file vrambench writes (results JSON,
 * gen-trace's trace) is written to a new, uniquely named temporary file in
 * the target's directory (never an existing file), each write checked,
 * fsync'ed and closed, then renamed over the target. Only a regular file or
 * a missing path is replaced: a symbolic link, device, directory, FIFO or
 * socket is refused. On any failure the temporary file is removed and the
 * target is left as it was; nothing we did not create is ever removed. The
 * temporary file is registered with app/scratch.h while it exists, so a
 * signal (SIGINT, SIGTERM, SIGHUP, ...) removes it too.
 *
 * No output may be one of the command's inputs or another of its outputs
 * (vb_output_check_distinct): `replay T --out T` would replace the trace
 * with its result. */
#ifndef VB_OUTPUT_FILE_H
#define VB_OUTPUT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct vb_output {
    char path[4096]; /* the target */
    char temp[4096]; /* the temporary file ("" when there is none) */
    int fd;          /* the temporary file, open for writing (-1 when closed) */
    int handle;      /* its vb_temp_register handle (-1: none) */
} vb_output;

/* A file a command names, for vb_output_check_distinct. */
typedef struct vb_named_file {
    const char *what; /* as the user knows it: "the trace", "--out", "--snapshot" */
    const char *path; /* NULL: not given (skipped) */
    int is_output;
} vb_named_file;

/* Refuses an output that is the same file as one of the command's inputs or
 * another of its outputs: by identity, not by name: the same device and
 * inode (stat: symbolic and hard links are seen through), or, for an output
 * that does not exist yet, the same path once its directory is resolved
 * (realpath). VB_ERR_INVALID with one message naming both. */
vb_status vb_output_check_distinct(const vb_named_file *files, size_t count);

/* Checks, before any work, that `path` can be written: a regular file or a
 * missing one (not a symlink, device, directory, FIFO), a name that fits,
 * and a directory where a temporary file can be created (it is removed
 * again). A name that starts with '-' is refused as an option that took
 * the place of a file name (`--out --quiet`); "./-name" names such a file.
 * VB_ERR_INVALID with a message naming the path when not. */
vb_status vb_output_check(const char *path);

/* The bytes an unprivileged writer may still put on the file system that
 * holds `path`'s directory (statvfs: free blocks not reserved for root), so
 * a command can refuse up front an output that cannot fit. VB_ERR_IO when
 * the file system cannot be asked. */
vb_status vb_output_room(const char *path, uint64_t *free_bytes);

/* Creates the temporary file for `path` in *out. VB_ERR_IO on failure
 * (nothing is left behind). */
vb_status vb_output_open(vb_output *out, const char *path);

/* Writes all `length` bytes to the temporary file; VB_ERR_IO on a failed
 * or short write (a full disk). The caller then abandons the output. */
vb_status vb_output_write(vb_output *out, const void *bytes, size_t length);

/* fsyncs and closes the temporary file and renames it over the target (if
 * that is still a regular file or missing). On failure VB_ERR_IO with a
 * message naming the target; the temporary file is removed and the target
 * is untouched. */
vb_status vb_output_commit(vb_output *out);

/* 1 when an output named `path` is written gzip'd: its name ends in ".gz". */
int vb_output_is_gzip_name(const char *path);

/* For an output that is never gzip'd (an HTML page, a snapshot pickle):
 * VB_ERR_INVALID, naming `what` the file is, when `path` ends in ".gz" (the
 * name would promise a compressed file); else VB_OK. */
vb_status vb_output_check_uncompressed(const char *path, const char *what);

/* Closes and removes the temporary file (a no-op once committed). */
void vb_output_abandon(vb_output *out);

/* For a command that writes several outputs (replay --out and --snapshot):
 * from now on vb_output_commit finishes each output (written, fsync'ed,
 * closed, its target checked) but leaves it in its temporary file, still
 * removed on a signal, until vb_output_release. So a command that fails,
 * or is killed, after one output was written leaves none of them behind. */
void vb_output_defer(void);

/* Ends vb_output_defer: `keep` renames every deferred output over its
 * target (each target checked first: VB_ERR_IO naming one that is no
 * longer a regular file or missing, and none is replaced); 0 removes them
 * all, the targets left as they were. VB_OK when there were none. */
vb_status vb_output_release(int keep);

#endif
