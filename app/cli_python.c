/* vrambench — the product's Python package (python/vrambench), for the
 * commands that run a part of it (tune's snapshot reader, report). */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "scratch.h"

int vb_cli_python_dir(char *out, size_t capacity)
{
    const char *env = getenv("VB_PYTHON_DIR");
    char exe[PATH_MAX], probe[PATH_MAX + 64];
    if (env && *env) {
        /* a folder without the package is as good as none (Python's own error would not name the variable) */
        snprintf(probe, sizeof probe, "%s/vrambench/results.py", env);
        return snprintf(out, capacity, "%s", env) < (int)capacity && access(probe, R_OK) == 0 ? 0 : -1;
    }
    ssize_t length = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (length > 0) {
        exe[length] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        /* build/vrambench, build/SANITIZER/vrambench, or an installed PREFIX/bin (make install) */
        static const char *const relative[] = {"/../python", "/../../python", "/../share/vrambench/python"};
        for (size_t i = 0; i < sizeof relative / sizeof relative[0]; i++) {
            snprintf(probe, sizeof probe, "%s%s/vrambench/results.py", exe, relative[i]);
            if (access(probe, R_OK) == 0)
                return (size_t)snprintf(out, capacity, "%s%s", exe, relative[i]) < capacity ? 0 : -1;
        }
    }
    snprintf(out, capacity, "python");
    return access("python/vrambench/results.py", R_OK) == 0 ? 0 : -1;
}

const char *vb_cli_python(void)
{
    const char *env = getenv("VB_PYTHON");
    if (env && *env) return env;
    /* Debian's python3 has python3-matplotlib; a pyenv or venv python3 earlier on PATH may not (as the Makefile's PLOT_PYTHON) */
    return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

/* One line of `text` without its end: its newline and trailing blanks. */
static void trim_line(char *text)
{
    size_t length = strlen(text);
    while (length > 0 && (text[length - 1] == '\n' || text[length - 1] == '\r' || text[length - 1] == ' ')) length--;
    text[length] = '\0';
}

int vb_cli_child_ended(const char *what, pid_t pid, int captured, const char *prefix, const char *command)
{
    int wait_status = 0;
    pid_t waited;
    while ((waited = waitpid(pid, &wait_status, 0)) < 0 && errno == EINTR) {}
    if (waited < 0) return vb_cli_error(VB_EXIT_FAILURE, "%s: waiting for it: %s", what, strerror(errno));
    int succeeded = WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
    int said = 0; /* the child printed its own error line */
    char last[512] = ""; /* the last other line: a traceback's exception, perhaps */
    FILE *in = vb_scratch_stream(captured, "r");
    char *line = NULL;
    size_t capacity = 0;
    while (in && getline(&line, &capacity, in) >= 0) {
        int own = strncmp(line, prefix, strlen(prefix)) == 0 || strncmp(line, "vrambench: ", 11) == 0;
        if (succeeded || own) {
            size_t prefix_length = strlen(prefix);
            if (!succeeded && command && strncmp(line, prefix, prefix_length) == 0 &&
                strncmp(line + prefix_length, " error: ", 8) == 0)
                fprintf(stderr, "vrambench: error: %s: %s", command, line + prefix_length + 8);
            else fputs(line, stderr); /* its notes, warnings and error lines, as it wrote them */
            if (!succeeded && strstr(line, "error:")) said = 1;
            continue;
        }
        trim_line(line);
        if (line[0] && line[0] != ' ' && line[0] != '\t') snprintf(last, sizeof last, "%s", line);
    }
    free(line);
    if (in) fclose(in);
    if (succeeded) return VB_EXIT_OK;
    int status = WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == VB_EXIT_USAGE ? VB_EXIT_USAGE : VB_EXIT_FAILURE;
    if (said) return status;
    char how[96];
    if (WIFSIGNALED(wait_status))
        snprintf(how, sizeof how, "killed by signal %d (%s)", WTERMSIG(wait_status), strsignal(WTERMSIG(wait_status)));
    else
        snprintf(how, sizeof how, "exit status %d", WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1);
    return last[0] ? vb_cli_error(status, "%s failed (%s): %s", what, how, last)
                   : vb_cli_error(status, "%s failed (%s)", what, how);
}
