/* vrambench tests — running a subcommand in-process (what main() dispatches
 * to) without its normal output in the test log. */
#ifndef VB_TEST_CLI_CAPTURE_H
#define VB_TEST_CLI_CAPTURE_H

/* A subcommand entry point, as app/cli.h declares them. */
typedef int (*vb_cli_command)(int argc, char **argv);

/* Runs `command` with stdout sent to /dev/null and, when `stderr_path` is
 * not NULL, stderr written to that file (replacing it); returns the
 * command's exit status. Both streams are restored afterwards. */
int vb_run_quietly(vb_cli_command command, int argc, char **argv, const char *stderr_path);

#endif
