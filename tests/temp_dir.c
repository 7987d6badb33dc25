/* vrambench tests — a scratch directory under /tmp (see temp_dir.h). */
#include "temp_dir.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

int vb_temp_dir_make(vb_temp_dir *dir, const char *label)
{
    memset(dir, 0, sizeof *dir);
    snprintf(dir->path, sizeof dir->path, "/tmp/vb-test-%s-XXXXXX", label);
    return mkdtemp(dir->path) ? 0 : -1;
}

const char *vb_temp_dir_file(vb_temp_dir *dir, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir->path, name);
    for (size_t i = 0; i < dir->file_count; i++)
        if (strcmp(dir->files[i], path) == 0) return dir->files[i];
    assert_true(dir->file_count < VB_TEMP_DIR_MAX_FILES);
    dir->files[dir->file_count] = strdup(path);
    assert_non_null(dir->files[dir->file_count]);
    return dir->files[dir->file_count++];
}

int vb_temp_dir_remove(vb_temp_dir *dir)
{
    for (size_t i = 0; i < dir->file_count; i++) {
        unlink(dir->files[i]);
        free(dir->files[i]);
    }
    dir->file_count = 0;
    return rmdir(dir->path);
}

int vb_path_exists(const char *path)
{
    struct stat info;
    return stat(path, &info) == 0;
}
