/* vrambench — temporary files, and their removal on every way out.
 *
 * Two kinds:
 *  - scratch files (a spooled pipe, a tune process's answer, a converted
 *    snapshot): created in $TMPDIR (/tmp when unset or empty) and unlinked
 *    at once, so they hold no name that could be left behind, whatever ends
 *    the process;
 *  - named temporary files (an output's temporary file beside its target,
 *    app/output_file.h): registered here while they exist, and removed when
 *    the process is ended by SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE or
 *    SIGXFSZ (the handler unlinks them with async-signal-safe calls only,
 *    then re-raises the signal with its default action, so the exit status
 *    still says which signal it was) or exits through exit().
 *
 * A signal whose disposition was SIG_IGN when the first file was registered
 * (nohup's SIGHUP, a caller's ignored SIGXFSZ) stays ignored. A forked child
 * inherits the table but never removes its parent's files: each entry
 * remembers the process that registered it. */
#ifndef VB_SCRATCH_H
#define VB_SCRATCH_H

#include <stddef.h>
#include <stdio.h>

/* The directory scratch files go in: $TMPDIR when set and not empty, else
 * /tmp. */
const char *vb_scratch_directory(void);

/* A new, empty scratch file open for reading and writing, already unlinked
 * (O_TMPFILE, else mkstemp then unlink), close-on-exec; -1 with errno set. */
int vb_scratch_file(void);

/* A stdio stream on scratch file `fd` from its start, through a descriptor
 * of its own (closing the stream leaves `fd` open), `mode` as fopen's; NULL
 * with errno set. */
FILE *vb_scratch_stream(int fd, const char *mode);

/* Registers `path`, a temporary file this process has just created, for
 * removal on a signal or exit(); a handle for vb_temp_forget, or -1 when the
 * path is too long or the table is full (then it is not removed on a
 * signal, nothing else changes). Installs the signal handlers on first use. */
int vb_temp_register(const char *path);

/* mkstemp(path_template) registered at once (vb_temp_register), the fatal
 * signals blocked in between: a descriptor and the handle in *handle, or -1
 * with errno set (nothing is created). */
int vb_temp_create(char *path_template, int *handle);

/* The temporary file is gone (renamed over its target, or removed): no
 * longer removed on a signal. A handle of -1 is ignored. */
void vb_temp_forget(int handle);

/* Holds the fatal signals back for the rest of the process: called as an
 * output is renamed into place (app/output_file.h), after which the
 * command's result stands. A SIGINT arriving then ended the process with
 * 128+SIGINT although the old file had been replaced, so a caller trusting
 * the status thought it kept; now the command finishes and says so. */
void vb_signals_hold_to_exit(void);

#endif
