/* vrambench — input files, read the same way by every command (see
 * input_file.h). */
#include "input_file.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "scratch.h"

/* How long a FIFO may stay silent before a note says what we wait for. */
#define FIFO_NOTE_AFTER_MS 2000

/* A non-seekable input read once into a scratch file. */
typedef struct spooled {
    char *path;
    int fd;
    struct spooled *next;
} spooled;

/* The process's spooled inputs; a command spools one or two, so a list is
 * plenty. */
static spooled *spooled_inputs;

static spooled *find_spooled(const char *path)
{
    for (spooled *s = spooled_inputs; s; s = s->next)
        if (strcmp(s->path, path) == 0) return s;
    return NULL;
}

int vb_input_is_spooled(const char *path)
{
    return find_spooled(path) != NULL;
}

vb_status vb_input_spool_limit(uint64_t *out)
{
    const char *text = getenv(VB_INPUT_SPOOL_LIMIT_ENV);
    *out = VB_INPUT_DEFAULT_SPOOL_LIMIT;
    if (!text || !*text) return VB_OK;
    if (vb_cli_parse_bytes(text, out) != 0 || *out == 0) /* 0 would refuse every piped input: torch2trace refuses it too */
        return vb_error(VB_ERR_INVALID, "%s='%s' is not a byte count (e.g. 4GiB, 512M)", VB_INPUT_SPOOL_LIMIT_ENV,
                        text);
    return VB_OK;
}

/* `bytes` as "4 GiB", "512 MiB", ... when whole, else a number of bytes. */
static void format_size(uint64_t bytes, char *out, size_t capacity)
{
    static const char *const units[] = {"TiB", "GiB", "MiB", "KiB"};
    for (int i = 0; i < 4; i++) {
        uint64_t unit = (uint64_t)1 << (10 * (4 - i));
        if (bytes >= unit && bytes % unit == 0) {
            snprintf(out, capacity, "%llu %s", (unsigned long long)(bytes / unit), units[i]);
            return;
        }
    }
    snprintf(out, capacity, "%llu bytes", (unsigned long long)bytes);
}

/* Opens `path` for reading. A FIFO is opened without blocking (no writer
 * yet is no reason to hang in open), then waited on until its writer sends
 * something or hangs up, with a note after FIFO_NOTE_AFTER_MS. */
static int open_input(const char *path)
{
    struct stat info;
    if (stat(path, &info) != 0 || !S_ISFIFO(info.st_mode)) return open(path, O_RDONLY | O_CLOEXEC);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -1;
    struct pollfd wait = {.fd = fd, .events = POLLIN};
    int ready = poll(&wait, 1, FIFO_NOTE_AFTER_MS);
    if (ready == 0) {
        vb_cli_line(stderr, "vrambench: note: waiting for something to write to the FIFO %s", path);
        while ((ready = poll(&wait, 1, -1)) < 0 && errno == EINTR) {}
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

/* Copies what `from` gives into `to`, at most `limit` bytes: 0, an errno
 * value, or -1 when there was more than `limit`. */
static int copy_bounded(int from, int to, uint64_t limit)
{
    static char chunk[64 * 1024];
    uint64_t total = 0;
    for (;;) {
        ssize_t got = read(from, chunk, sizeof chunk);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return errno;
        if (got == 0) return 0;
        if ((uint64_t)got > limit - total) return -1;
        total += (uint64_t)got;
        for (ssize_t done = 0; done < got;) {
            ssize_t put = write(to, chunk + done, (size_t)(got - done));
            if (put < 0 && errno == EINTR) continue;
            if (put <= 0) return put < 0 ? errno : EIO;
            done += put;
        }
    }
}

/* Lists `copy` (a scratch file) as the spooled copy of `name`; 0, or -1
 * when out of host memory (nothing listed, `copy` left open). */
static int list_copy(const char *name, int copy)
{
    spooled *entry = calloc(1, sizeof *entry);
    if (entry) entry->path = strdup(name);
    if (!entry || !entry->path) {
        free(entry);
        return -1;
    }
    entry->fd = copy;
    entry->next = spooled_inputs;
    spooled_inputs = entry;
    return 0;
}

/* Reads `from` into a new scratch file listed under `name`: at most
 * $VB_SPOOL_LIMIT bytes, or `cap`, the most its reader takes, when less. */
static vb_status spool_from(const char *name, int from, uint64_t cap)
{
    uint64_t spool_limit;
    vb_status status = vb_input_spool_limit(&spool_limit);
    if (status != VB_OK) return status;
    uint64_t limit = cap < spool_limit ? cap : spool_limit;
    int copy = vb_scratch_file();
    if (copy < 0)
        return vb_error(VB_ERR_IO, "%s: cannot keep a copy of it (it is not a regular file) in %s: %s", name,
                        vb_scratch_directory(), strerror(errno));
    int error = copy_bounded(from, copy, limit);
    if (error || list_copy(name, copy) != 0) {
        close(copy);
        char size[32];
        format_size(limit, size, sizeof size);
        if (error == -1 && limit < spool_limit)
            return vb_error(VB_ERR_INVALID, "%s: larger than %s, the most this input may hold", name, size);
        if (error == -1)
            return vb_error(VB_ERR_INVALID,
                            "%s: longer than %s: input that is not a regular file (a pipe, FIFO or device) is "
                            "copied to %s to be read more than once, and at most %s=%s of it (save it to a file, "
                            "or raise the limit)",
                            name, size, vb_scratch_directory(), VB_INPUT_SPOOL_LIMIT_ENV, size);
        if (error) return vb_error(VB_ERR_IO, "%s: cannot read it into a temporary copy: %s", name, strerror(error));
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    return VB_OK;
}

vb_status vb_input_spool(const char *path)
{
    return vb_input_spool_capped(path, UINT64_MAX);
}

vb_status vb_input_spool_capped(const char *path, uint64_t cap)
{
    if (find_spooled(path)) return VB_OK;
    int fd = open_input(path);
    if (fd < 0) return vb_error(VB_ERR_IO, "%s: cannot open it: %s", path, strerror(errno));
    struct stat info;
    if (fstat(fd, &info) != 0 || S_ISREG(info.st_mode) || S_ISDIR(info.st_mode)) {
        close(fd); /* a regular file is read again as it is; the reader names a directory's problem */
        return VB_OK;
    }
    vb_status status = spool_from(path, fd, cap);
    close(fd);
    return status;
}

vb_status vb_input_spool_fd(const char *name, int fd)
{
    spooled *old = find_spooled(name);
    if (old) return vb_error(VB_ERR_INVALID, "%s: spooled twice", name);
    return spool_from(name, fd, UINT64_MAX);
}

vb_status vb_input_adopt(const char *name, int fd)
{
    if (find_spooled(name)) {
        close(fd);
        return vb_error(VB_ERR_INVALID, "%s: spooled twice", name);
    }
    if (list_copy(name, fd) == 0) return VB_OK;
    close(fd);
    return vb_error(VB_ERR_HOST_OOM, "out of host memory");
}

void vb_input_forget(const char *name)
{
    for (spooled **link = &spooled_inputs; *link; link = &(*link)->next) {
        spooled *entry = *link;
        if (strcmp(entry->path, name) != 0) continue;
        *link = entry->next;
        close(entry->fd);
        free(entry->path);
        free(entry);
        return;
    }
}

int vb_input_open(const char *path, struct stat *info)
{
    spooled *copy = find_spooled(path);
    int fd = copy ? fcntl(copy->fd, F_DUPFD_CLOEXEC, 0) : open_input(path);
    struct stat own;
    if (!info) info = &own;
    int error = fd < 0 ? errno : 0;
    if (!error && fstat(fd, info) != 0) error = errno;
    if (!error && S_ISDIR(info->st_mode)) error = EISDIR;
    if (!error && copy && lseek(fd, 0, SEEK_SET) != 0) error = errno;
    if (!error) return fd;
    if (fd >= 0) close(fd);
    errno = error;
    return -1;
}

vb_status vb_input_read_all(const char *path, size_t limit, char **data, size_t *length)
{
    *data = NULL;
    *length = 0;
    if (limit > SIZE_MAX / 4) limit = SIZE_MAX / 4;
    /* A pipe, FIFO or device is spooled first, as a trace is: a FIFO is waited
     * on (with the note), what it gives is bounded by $VB_SPOOL_LIMIT, and
     * the copy can be read again (report's Python reads it after us). */
    vb_status spooled = vb_input_spool_capped(path, limit); /* not 4 GiB of /dev/zero for a JSON of 256 MiB */
    if (spooled != VB_OK) return spooled;
    struct stat info;
    int fd = vb_input_open(path, &info);
    if (fd < 0) return vb_error(VB_ERR_IO, "%s: cannot read it: %s", path, strerror(errno));
    char size[32];
    format_size(limit, size, sizeof size);
    if (S_ISREG(info.st_mode) && (uint64_t)info.st_size > limit) {
        close(fd);
        return vb_error(VB_ERR_INVALID, "%s: larger than %s", path, size);
    }
    size_t capacity = S_ISREG(info.st_mode) ? (size_t)info.st_size + 1 : 64 * 1024, used = 0;
    char *buffer = malloc(capacity + 1);
    vb_status status = buffer ? VB_OK : vb_error(VB_ERR_HOST_OOM, "out of host memory");
    while (status == VB_OK) {
        if (used == capacity) {
            size_t grown_capacity = capacity * 2 > limit + 1 ? limit + 1 : capacity * 2;
            char *grown = grown_capacity > capacity ? realloc(buffer, grown_capacity + 1) : NULL;
            if (!grown) {
                status = grown_capacity > capacity ? vb_error(VB_ERR_HOST_OOM, "out of host memory")
                                                   : vb_error(VB_ERR_INVALID, "%s: larger than %s", path, size);
                break;
            }
            buffer = grown;
            capacity = grown_capacity;
        }
        ssize_t got = read(fd, buffer + used, capacity - used);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) status = vb_error(VB_ERR_IO, "%s: cannot read it: %s", path, strerror(errno));
        if (got <= 0) break;
        used += (size_t)got;
        if (used > limit) status = vb_error(VB_ERR_INVALID, "%s: larger than %s", path, size);
    }
    close(fd);
    if (status != VB_OK) {
        free(buffer);
        return status;
    }
    buffer[used] = '\0';
    *data = buffer;
    *length = used;
    return VB_OK;
}

void vb_input_release(void)
{
    while (spooled_inputs) {
        spooled *next = spooled_inputs->next;
        close(spooled_inputs->fd);
        free(spooled_inputs->path);
        free(spooled_inputs);
        spooled_inputs = next;
    }
}
