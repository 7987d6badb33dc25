/* vrambench — the command-line subcommands. Each lives in its own
 * app/cmd_NAME.c and is listed in main.c's table.
 *
 * A subcommand returns the process exit status: 0 success, 1 runtime
 * failure, 2 bad usage or bad input. Errors are printed with vb_cli_error. */
#ifndef VB_CLI_H
#define VB_CLI_H

#include <stdint.h>

#include "base/status.h"

#define VB_EXIT_OK 0
#define VB_EXIT_FAILURE 1
#define VB_EXIT_USAGE 2
#define VB_EXIT_OOM 3      /* --fail-on-oom: an allocator ran out of memory */

typedef int (*vb_command_fn)(int argc, char **argv); /* argv[0] is the subcommand's name */

/* Prints "vrambench: error: <message>" on stderr and returns `exit_status`. */
int vb_cli_error(int exit_status, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* Prints the last vb_error() message and returns 2 for VB_ERR_INVALID (bad
 * input) or 1 for anything else. */
int vb_cli_status_error(vb_status status);

/* A list of names from "all" or "a,b,c", checked against the known ones. */
typedef struct vb_name_list {
    char *storage;        /* the split copy of the spec */
    const char **names;
    size_t count;
} vb_name_list;

/* Expands `spec` ("all", or comma-separated names) against `known` (NULL-
 * terminated). On an unknown or empty name prints one error naming `what`
 * and the known names, and returns 2; else fills `out` and returns 0. */
int vb_cli_names(const char *spec, const char *what, const char *const *known, vb_name_list *out);
void vb_name_list_free(vb_name_list *list);

/* The registered allocator names, NULL-terminated (static storage). */
const char *const *vb_cli_allocator_names(void);

/* Parses bytes: a whole number > 0 with an optional K/M/G/T suffix (powers
 * of 1024, "KiB"/"KB"/"K" alike); 0 on success, -1 when malformed. */
int vb_cli_parse_bytes(const char *text, uint64_t *out);

/* For a --param given to scenario `name`, which takes none: one error line
 * naming the scenarios that do take one; VB_EXIT_USAGE. */
int vb_cli_param_refused(const char *command, const char *name);

/* Parses `command`'s `option`, a simulated device's memory: bytes as
 * vb_cli_parse_bytes reads them, from `minimum` to VB_SIM_MAX_CAPACITY.
 * 0, or VB_EXIT_USAGE after one error line (naming the limit when above). */
int vb_cli_parse_capacity(const char *command, const char *option, const char *text, uint64_t minimum,
                          uint64_t *out);

int vb_cmd_list(int argc, char **argv);
int vb_cmd_tune(int argc, char **argv);
int vb_cmd_claims(int argc, char **argv);
int vb_cmd_replay(int argc, char **argv);
int vb_cmd_microbench(int argc, char **argv);
int vb_cmd_run(int argc, char **argv);
int vb_cmd_gen_trace(int argc, char **argv);
int vb_cmd_check_sim(int argc, char **argv);

#endif
