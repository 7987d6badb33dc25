/* vrambench tests — a scratch directory under /tmp for tests that write
 * files (results, traces), removed again with everything named in it.
 *
 * Files are named through vb_temp_dir_file, which remembers each path, so
 * the clean-up removes exactly what the test could have made (a result
 * file's ".tmp" sibling included, when the test names it). */
#ifndef VB_TEST_TEMP_DIR_H
#define VB_TEST_TEMP_DIR_H

#include <stddef.h>

#define VB_TEMP_DIR_MAX_FILES 96

typedef struct vb_temp_dir {
    char path[64];                          /* the directory */
    char *files[VB_TEMP_DIR_MAX_FILES];     /* paths handed out, owned */
    size_t file_count;
} vb_temp_dir;

/* Creates a fresh /tmp/vb-test-LABEL-XXXXXX; 0, or -1 when it cannot
 * (for use as a cmocka setup's result). */
int vb_temp_dir_make(vb_temp_dir *dir, const char *label);

/* The path of `name` inside the directory, remembered for removal; the same
 * string for the same name. Valid until vb_temp_dir_remove. */
const char *vb_temp_dir_file(vb_temp_dir *dir, const char *name);

/* Removes every file named (missing ones are fine), then the directory;
 * the result of rmdir (0 when the test left nothing else behind). */
int vb_temp_dir_remove(vb_temp_dir *dir);

/* 1 when something exists at `path`. */
int vb_path_exists(const char *path);

#endif
