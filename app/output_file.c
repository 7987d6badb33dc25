/* vrambench — the one safe writer of output files (see output_file.h). */
#include "output_file.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "scratch.h"

/* The directory part of `path` ("." for a bare name, "/" for "/NAME") into
 * `out`, and where the file name starts; -1 when it does not fit. */
static int split_directory(const char *path, char *out, size_t capacity, const char **name)
{
    const char *slash = strrchr(path, '/');
    *name = slash ? slash + 1 : path;
    if (!slash) return (size_t)snprintf(out, capacity, ".") < capacity ? 0 : -1;
    size_t length = slash == path ? 1 : (size_t)(slash - path);
    if (length >= capacity) return -1;
    memcpy(out, path, length);
    out[length] = '\0';
    return 0;
}

/* What an existing non-regular `mode` is, for an error message. */
static const char *file_kind(mode_t mode)
{
    if (S_ISLNK(mode)) return "a symbolic link";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

/* The process's umask (read by setting it and setting it back). */
static mode_t current_umask(void)
{
    mode_t mask = umask(022);
    umask(mask);
    return mask;
}

/* Creates a new, uniquely named temporary file in `directory` (mkstemp:
 * never an existing file), its name in `temp`, registered for removal on a
 * signal (*handle); the descriptor, or -1 with errno set. The name is short
 * and fixed in length, so it fits wherever the target's name fits. */
static int create_temp(const char *directory, char *temp, size_t capacity, int *handle)
{
    *handle = -1;
    if ((size_t)snprintf(temp, capacity, "%s/.vrambench-XXXXXX", directory) >= capacity) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = vb_temp_create(temp, handle);
    /* mkstemp makes it 0600; a result file is as readable as any new file. */
    if (fd >= 0) fchmod(fd, 0666 & ~current_umask());
    return fd;
}

vb_status vb_output_check(const char *path)
{
    char directory[4096], temp[4096];
    const char *name;
    struct stat info;
    if (path[0] == '\0') return vb_error(VB_ERR_INVALID, "cannot write '': an empty file name");
    if (path[0] == '-')
        return vb_error(VB_ERR_INVALID,
                        "cannot write '%s': an output name that starts with '-' looks like an option (did an option "
                        "lose its value?); to mean that file, write ./%s",
                        path, path);
    if (split_directory(path, directory, sizeof directory, &name) != 0)
        return vb_error(VB_ERR_INVALID, "output path '%s' is too long", path);
    if (*name == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return vb_error(VB_ERR_INVALID, "cannot write '%s': it names a directory, not a file", path);
    if (strlen(name) > NAME_MAX)
        return vb_error(VB_ERR_INVALID, "cannot write '%s': file name longer than %d bytes", path, NAME_MAX);
    if (lstat(path, &info) == 0 && !S_ISREG(info.st_mode))
        return vb_error(VB_ERR_INVALID, "cannot write '%s': it is %s (an output replaces only a regular file)", path,
                        file_kind(info.st_mode));
    int handle;
    int fd = create_temp(directory, temp, sizeof temp, &handle);
    if (fd < 0) return vb_error(VB_ERR_INVALID, "cannot write '%s': %s", path, strerror(errno));
    close(fd);
    unlink(temp);
    vb_temp_forget(handle);
    return VB_OK;
}

vb_status vb_output_room(const char *path, uint64_t *free_bytes)
{
    char directory[4096];
    const char *name;
    struct statvfs info;
    if (split_directory(path, directory, sizeof directory, &name) != 0)
        return vb_error(VB_ERR_IO, "output path '%s' is too long", path);
    if (statvfs(directory, &info) != 0)
        return vb_error(VB_ERR_IO, "cannot ask the file system of '%s': %s", path, strerror(errno));
    uint64_t block = info.f_frsize ? info.f_frsize : info.f_bsize;
    /* Saturates: a huge file system is "more than any trace needs". */
    *free_bytes = block && info.f_bavail > UINT64_MAX / block ? UINT64_MAX : (uint64_t)info.f_bavail * block;
    return VB_OK;
}

vb_status vb_output_open(vb_output *out, const char *path)
{
    char directory[4096];
    const char *name;
    out->fd = -1;
    out->handle = -1;
    out->temp[0] = '\0';
    if ((size_t)snprintf(out->path, sizeof out->path, "%s", path) >= sizeof out->path ||
        split_directory(path, directory, sizeof directory, &name) != 0)
        return vb_error(VB_ERR_IO, "output path '%s' is too long", path);
    out->fd = create_temp(directory, out->temp, sizeof out->temp, &out->handle);
    if (out->fd < 0) {
        out->temp[0] = '\0';
        return vb_error(VB_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    }
    return VB_OK;
}

vb_status vb_output_write(vb_output *out, const void *bytes, size_t length)
{
    const char *at = bytes;
    while (length > 0) {
        ssize_t written = write(out->fd, at, length);
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) return vb_error(VB_ERR_IO, "cannot write '%s': %s", out->path, written < 0 ? strerror(errno) : "no progress");
        at += written;
        length -= (size_t)written;
    }
    return VB_OK;
}

int vb_output_is_gzip_name(const char *path)
{
    size_t length = strlen(path);
    return length > 3 && strcmp(path + length - 3, ".gz") == 0;
}

vb_status vb_output_check_uncompressed(const char *path, const char *what)
{
    if (!vb_output_is_gzip_name(path)) return VB_OK;
    return vb_error(VB_ERR_INVALID, "cannot write '%s': %s is written uncompressed, and a name ending in .gz says gzip: "
                    "name it without .gz", path, what);
}

void vb_output_abandon(vb_output *out)
{
    if (out->fd >= 0) close(out->fd);
    out->fd = -1;
    if (out->temp[0]) unlink(out->temp); /* ours: mkstemp created it */
    out->temp[0] = '\0';
    vb_temp_forget(out->handle);
    out->handle = -1;
}

/* The outputs committed while deferring (vb_output_defer): each finished
 * (fsync'ed, closed) temporary file, still registered for removal, waiting
 * to be renamed over its target by vb_output_release. */
typedef struct deferred_output {
    char path[4096];
    char temp[4096];
    int handle;
} deferred_output;
static deferred_output *deferred;
static size_t deferred_count;
static int deferring;

/* The target of `out` (or of a deferred output) is still a regular file or
 * missing: else VB_ERR_IO naming it (an output replaces only a regular file). */
static vb_status target_replaceable(const char *path)
{
    struct stat info;
    if (lstat(path, &info) == 0 && !S_ISREG(info.st_mode))
        return vb_error(VB_ERR_IO, "cannot write '%s': it is now %s (an output replaces only a regular file)", path,
                        file_kind(info.st_mode));
    return VB_OK;
}

vb_status vb_output_commit(vb_output *out)
{
    int error = 0;
    if (fsync(out->fd) != 0) error = errno;
    if (close(out->fd) != 0 && !error) error = errno;
    out->fd = -1;
    if (!error && target_replaceable(out->path) != VB_OK) {
        vb_output_abandon(out);
        return VB_ERR_IO;
    }
    if (!error && deferring) { /* the rename waits for vb_output_release; the list holds the temporary file now */
        deferred_output *grown = realloc(deferred, (deferred_count + 1) * sizeof *deferred);
        if (!grown) {
            vb_output_abandon(out);
            return vb_error(VB_ERR_HOST_OOM, "cannot write '%s': out of host memory", out->path);
        }
        deferred = grown;
        deferred_output *d = &deferred[deferred_count++];
        memcpy(d->path, out->path, sizeof d->path);
        memcpy(d->temp, out->temp, sizeof d->temp);
        d->handle = out->handle;
        out->temp[0] = '\0';
        out->handle = -1;
        return VB_OK;
    }
    if (!error) vb_signals_hold_to_exit(); /* from the rename on, the result stands (scratch.h) */
    if (!error && rename(out->temp, out->path) != 0) error = errno;
    if (!error) {
        out->temp[0] = '\0';
        vb_temp_forget(out->handle);
        out->handle = -1;
        return VB_OK;
    }
    vb_output_abandon(out);
    return vb_error(VB_ERR_IO, "cannot write '%s': %s", out->path, strerror(error));
}

void vb_output_defer(void)
{
    deferring = 1;
}

vb_status vb_output_release(int keep)
{
    vb_status status = VB_OK;
    /* Every target checked before any is replaced: a refusal leaves them all as they were. */
    for (size_t i = 0; keep && i < deferred_count && status == VB_OK; i++)
        status = target_replaceable(deferred[i].path);
    if (keep && status == VB_OK && deferred_count) vb_signals_hold_to_exit(); /* the renames stand (scratch.h) */
    for (size_t i = 0; i < deferred_count; i++) {
        int renamed = keep && status == VB_OK && rename(deferred[i].temp, deferred[i].path) == 0;
        if (keep && status == VB_OK && !renamed)
            status = vb_error(VB_ERR_IO, "cannot write '%s': %s", deferred[i].path, strerror(errno));
        if (!renamed) unlink(deferred[i].temp); /* ours: mkstemp created it */
        vb_temp_forget(deferred[i].handle);
    }
    free(deferred);
    deferred = NULL;
    deferred_count = 0;
    deferring = 0;
    return status;
}

/* What identifies a file: its device and inode when it exists, else its
 * path with the directory resolved. */
typedef struct file_identity {
    int exists;
    dev_t device;
    ino_t inode;
    char resolved[PATH_MAX + NAME_MAX + 2];
} file_identity;

static void identify(const char *path, file_identity *out)
{
    struct stat info;
    memset(out, 0, sizeof *out);
    if (stat(path, &info) == 0) {
        out->exists = 1;
        out->device = info.st_dev;
        out->inode = info.st_ino;
        return;
    }
    char directory[4096], real[PATH_MAX];
    const char *name;
    if (split_directory(path, directory, sizeof directory, &name) == 0 && realpath(directory, real))
        snprintf(out->resolved, sizeof out->resolved, "%s/%s", strcmp(real, "/") == 0 ? "" : real, name);
    else snprintf(out->resolved, sizeof out->resolved, "%s", path);
}

static int same_identity(const file_identity *a, const file_identity *b)
{
    if (a->exists != b->exists) return 0;
    if (a->exists) return a->device == b->device && a->inode == b->inode;
    return strcmp(a->resolved, b->resolved) == 0;
}

vb_status vb_output_check_distinct(const vb_named_file *files, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (!files[i].path || !files[i].is_output) continue;
        file_identity output;
        identify(files[i].path, &output);
        for (size_t j = 0; j < count; j++) {
            if (j == i || !files[j].path || (files[j].is_output && j > i)) continue;
            file_identity other;
            identify(files[j].path, &other);
            if (!same_identity(&output, &other)) continue;
            return vb_error(VB_ERR_INVALID,
                            "%s '%s' is the same file as %s '%s': writing it would replace %s; name another file",
                            files[i].what, files[i].path, files[j].what, files[j].path,
                            files[j].is_output ? "the other output" : "the input");
        }
    }
    return VB_OK;
}
