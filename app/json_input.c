/* vrambench — a JSON input read once into memory, bounded (json_input.h). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "json_input.h"
#include "input_file.h"

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

vb_status vb_json_input_read(const char *path, size_t limit, char **out, size_t *out_length, int *regular)
{
    *out = NULL;
    *out_length = 0;
    *regular = 0;
    char *bytes = NULL;
    size_t length = 0;
    vb_status status = vb_input_read_all(path, limit, &bytes, &length);
    /* every failure to read a JSON input is bad input (exit 2), as a trace's is */
    if (status != VB_OK) return status == VB_ERR_HOST_OOM ? status : VB_ERR_INVALID; /* its message stands */
    *regular = !vb_input_is_spooled(path);
    if (length == 0) {
        free(bytes);
        return vb_error(VB_ERR_INVALID, "%s: empty%s", path, *regular ? "" : " (its writer sent nothing)");
    }
    if (length >= 2 && (unsigned char)bytes[0] == 0x1f && (unsigned char)bytes[1] == 0x8b) {
        char *inflated = NULL;
        size_t inflated_length = 0;
        int error = gunzip_all(bytes, length, limit, &inflated, &inflated_length);
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
    *out = bytes;
    *out_length = length;
    return VB_OK;
}

vb_status vb_json_input_load(const char *path, size_t limit, json_t **out, int *regular)
{
    *out = NULL;
    char *bytes = NULL;
    size_t length = 0;
    vb_status status = vb_json_input_read(path, limit, &bytes, &length, regular);
    if (status != VB_OK) return status;
    json_error_t parse_error;
    *out = json_loadb(bytes, length, 0, &parse_error);
    free(bytes);
    if (!*out) return vb_error(VB_ERR_INVALID, "%s:%d: %s", path, parse_error.line, parse_error.text);
    return VB_OK;
}
