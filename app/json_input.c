/* vrambench — a JSON input read once into memory, bounded (json_input.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "json_input.h"
#include "input_file.h"

/* Reads all of `fd` into a buffer it allocates, giving up once it holds more
 * than `limit` bytes (*length is then limit + 1). 0, or an errno value. */
static int read_all(int fd, size_t limit, size_t size_hint, char **bytes, size_t *length)
{
    size_t capacity = size_hint + 1 < limit + 1 ? size_hint + 1 : limit + 1, used = 0;
    if (capacity < 4096) capacity = 4096;
    char *buffer = malloc(capacity);
    if (!buffer) return ENOMEM;
    for (;;) {
        if (used == capacity) {
            if (used > limit) break;
            size_t grown = capacity > (limit + 1) / 2 ? limit + 1 : capacity * 2;
            char *larger = realloc(buffer, grown);
            if (!larger) {
                free(buffer);
                return ENOMEM;
            }
            buffer = larger;
            capacity = grown;
        }
        ssize_t got = read(fd, buffer + used, capacity - used);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int error = errno;
            free(buffer);
            return error;
        }
        if (got == 0) break;
        used += (size_t)got;
    }
    *bytes = buffer;
    *length = used;
    return 0;
}

/* Inflates the gzip member(s) in `bytes` into a buffer it allocates, giving
 * up past `limit` bytes (*length is then limit + 1). 0, ENOMEM, or EINVAL
 * for a broken stream. The large committed results are stored gzipped. */
static int gunzip_all(const char *bytes, size_t size, size_t limit, char **out, size_t *length)
{
    z_stream stream = {0};
    if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK) return ENOMEM;
    size_t capacity = 1 << 20, used = 0;
    char *buffer = malloc(capacity);
    int error = buffer ? 0 : ENOMEM;
    stream.next_in = (Bytef *)bytes;
    stream.avail_in = (uInt)(size < UINT32_MAX ? size : UINT32_MAX);
    while (!error) {
        if (used == capacity) {
            if (used > limit) break;
            size_t grown = capacity > (limit + 1) / 2 ? limit + 1 : capacity * 2;
            char *larger = realloc(buffer, grown);
            if (!larger) {
                error = ENOMEM;
                break;
            }
            buffer = larger;
            capacity = grown;
        }
        stream.next_out = (Bytef *)buffer + used;
        stream.avail_out = (uInt)(capacity - used < UINT32_MAX ? capacity - used : UINT32_MAX);
        int result = inflate(&stream, Z_NO_FLUSH);
        used = (size_t)((char *)stream.next_out - buffer);
        if (result == Z_STREAM_END) {
            if (stream.avail_in == 0) break;
            inflateReset(&stream);  /* another member follows */
        } else if (result == Z_BUF_ERROR && stream.avail_out == 0) {
            continue;               /* more room needed */
        } else if (result != Z_OK) {
            /* Z_BUF_ERROR with room left: the input ended inside a member. */
            error = result == Z_MEM_ERROR ? ENOMEM : EINVAL;
        }
    }
    inflateEnd(&stream);
    if (error) {
        free(buffer);
        return error;
    }
    *out = buffer;
    *length = used;
    return 0;
}

vb_status vb_json_input_load(const char *path, size_t limit, json_t **out, int *regular)
{
    *out = NULL;
    *regular = 0;
    vb_status checked = vb_input_check_spool_limit(path);
    if (checked != VB_OK) return checked;
    /* O_NONBLOCK: opening a FIFO for reading waits for a writer otherwise. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return vb_error(VB_ERR_INVALID, "%s: cannot open: %s", path, strerror(errno));
    struct stat info;
    int error = fstat(fd, &info) != 0 ? errno : S_ISDIR(info.st_mode) ? EISDIR : 0;
    if (!error && S_ISREG(info.st_mode) && (uint64_t)info.st_size > limit) error = EFBIG;
    /* Reads wait for data again (a FIFO without a writer gives end of file). */
    int flags = error ? -1 : fcntl(fd, F_GETFL);
    if (!error && (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)) error = errno;
    char *bytes = NULL;
    size_t length = 0;
    if (!error) error = read_all(fd, limit, S_ISREG(info.st_mode) ? (size_t)info.st_size : 0, &bytes, &length);
    close(fd);
    if (!error && length > limit) error = EFBIG;
    if (error) {
        free(bytes);
        if (error == ENOMEM) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        if (error == EFBIG)
            return vb_error(VB_ERR_INVALID, "%s: larger than %zu MiB, the most a JSON input may hold", path,
                            limit >> 20);
        return vb_error(VB_ERR_INVALID, "%s: cannot read: %s", path, strerror(error));
    }
    *regular = S_ISREG(info.st_mode);
    if (length == 0) {
        free(bytes);
        return vb_error(VB_ERR_INVALID, "%s: empty%s", path,
                        *regular ? "" : " (nothing came from it: a pipe or FIFO without a writer?)");
    }
    if (length >= 2 && (unsigned char)bytes[0] == 0x1f && (unsigned char)bytes[1] == 0x8b) {
        char *inflated = NULL;
        size_t inflated_length = 0;
        error = gunzip_all(bytes, length, limit, &inflated, &inflated_length);
        free(bytes);
        if (error == ENOMEM) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        if (error) return vb_error(VB_ERR_INVALID, "%s: not a valid gzip file", path);
        if (inflated_length > limit) {
            free(inflated);
            return vb_error(VB_ERR_INVALID, "%s: larger than %zu MiB uncompressed, the most a JSON input may hold",
                            path, limit >> 20);
        }
        bytes = inflated;
        length = inflated_length;
    }
    json_error_t parse_error;
    *out = json_loadb(bytes, length, 0, &parse_error);
    free(bytes);
    if (!*out) return vb_error(VB_ERR_INVALID, "%s:%d: %s", path, parse_error.line, parse_error.text);
    return VB_OK;
}
