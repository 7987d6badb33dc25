/* vrambench — the product's Python package (python/vrambench), for the
 * commands that run a part of it (tune's snapshot reader, report). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

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
