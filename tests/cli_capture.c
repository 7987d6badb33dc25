/* vrambench tests — running a subcommand in-process (see cli_capture.h). */
#include "cli_capture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>

#include <cmocka.h>

/* Points file descriptor `target` at `file`; returns a copy of what it was. */
static int redirect(int target, FILE *file)
{
    int saved = dup(target);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(file), target) >= 0);
    return saved;
}

/* Undoes redirect. */
static void restore(int target, int saved)
{
    dup2(saved, target);
    close(saved);
}

int vb_run_quietly(vb_cli_command command, int argc, char **argv, const char *stderr_path)
{
    fflush(stdout);
    fflush(stderr);
    FILE *null = fopen("/dev/null", "w");
    assert_non_null(null);
    FILE *errors = NULL;
    if (stderr_path) {
        errors = fopen(stderr_path, "w");
        assert_non_null(errors);
    }
    int saved_out = redirect(STDOUT_FILENO, null);
    int saved_err = errors ? redirect(STDERR_FILENO, errors) : -1;
    int status = command(argc, argv);
    fflush(stdout);
    fflush(stderr);
    restore(STDOUT_FILENO, saved_out);
    if (errors) {
        restore(STDERR_FILENO, saved_err);
        fclose(errors);
    }
    fclose(null);
    return status;
}
