/* vrambench — the streaming trace reader (vrambench's own format and RMM's
 * logging_resource_adaptor CSV). See trace.h and docs/trace-format.md. */
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/addr_map.h"
#include "base/id_map.h"
#include "input_file.h"
#include "text.h"

/* The longest line, without its "\n" or "\r\n" (so one limit for either
 * ending), and the one buffer a trace holds: room for it and its ending. */
#define TRACE_LINE_MAX (64 * 1024 - 1)
#define TRACE_BUFFER_BYTES (TRACE_LINE_MAX + 2)
/* Bytes allocated after it: the sentinel (or a final NUL), and room for
 * fast_decimal's 8-byte loads, which start at most at the sentinel. */
#define TRACE_BUFFER_SLACK 8
/* zlib's own input buffer (bigger than its 8 KiB default: fewer read calls). */
#define TRACE_ZLIB_BUFFER_BYTES (128 * 1024)

#define VBTRACE_HEADER "vbtrace"
#define VBTRACE_VERSION 1
#define RMM_HEADER "Thread,Time,Action,Pointer,Size,Stream"

/* An RMM allocation's id and tag, while it is live (or, unused, a link of
 * the free list). */
typedef struct rmm_record {
    uint64_t id, tag;
} rmm_record;

/* A line of the form the fast path reads ("a ID SIZE [STREAM]", "f ID
 * [STREAM]", single spaces, wholly buffered), parsed. */
typedef struct fast_line {
    char action;               /* 'a' or 'f'; 0: the line is not of that form (or not whole yet) */
    size_t length;             /* its bytes, the newline included */
    uint64_t id, size, stream;
} fast_line;

/* The bytes of the file, decompressed when they are gzip (RFC 1952: one
 * member or several in a row, as `cat a.gz b.gz` makes; anything else after
 * a member is an error, where zlib's gzread would drop it silently). */
typedef struct trace_input {
    int fd;
    int seekable;              /* a regular file: read with pread at `position` */
    uint64_t position;         /* file offset of the next read */
    int gzip;                  /* the file starts with gzip's magic bytes */
    int inflating;             /* inflateInit2 was called */
    int member_ended;          /* the current gzip member is complete */
    z_stream z;
    unsigned char *bytes;      /* TRACE_ZLIB_BUFFER_BYTES read from the file */
    size_t start, end;         /* unconsumed file bytes are bytes[start, end) */
    uint64_t base;             /* file offset of bytes[0] */
    int eof;                   /* the file has no more bytes */
} trace_input;

struct vb_trace {
    trace_input input;
    char *path;
    vb_trace_format format;
    char *buffer;              /* TRACE_BUFFER_BYTES + TRACE_BUFFER_SLACK: room for a final
                                * NUL, or the '\n' sentinel kept at buffer[end] */
    size_t start, end;         /* unread bytes are buffer[start, end) */
    int at_eof;                /* the file has no more bytes to give */
    uint64_t line;             /* lines handed out so far */
    uint64_t consumed_bytes;   /* uncompressed bytes of those lines */
    uint64_t total_bytes;      /* uncompressed size, 0 when unknown */
    vb_status failure;         /* sticky: once a call failed, all later ones do */
    char *failure_message;
    vb_id_map ids;             /* vbtrace: id -> tag (ids mostly come in order: base/id_map.h) */
    vb_addr_map live;          /* RMM: pointer -> record index */
    uint64_t *tag_slot;        /* where vb_trace_tag stores: the last ALLOC's tag, else NULL */
    rmm_record *records;       /* RMM: id and tag of each live allocation */
    size_t record_count, record_capacity;
    uint64_t free_record;      /* RMM: a free list through records[].id, + 1 (0: empty) */
    uint64_t next_rmm_id;      /* RMM allocations are numbered in order */
    vb_addr_map rmm_streams;   /* RMM stream handle (non-zero) -> small stream id */
    uint64_t rmm_stream_count; /* small ids handed out, 0 (the default stream) included */
    char name[VB_TRACE_MAX_NAME + 1];
};

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/* Records "PATH:LINE: message" (line 0: "PATH: gzip stream: message", an
 * error of the compressed data, which no line holds) as the error of
 * `trace` (sticky) and returns `status`. */
static vb_status fail_at(vb_trace *trace, uint64_t line, vb_status status, const char *format, va_list args)
{
    char message[400];
    vsnprintf(message, sizeof message, format, args);
    /* The message may quote the file's bytes: no control character of
     * theirs reaches the terminal (the error stays one line). */
    for (char *c = message; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    if (line) vb_error(status, "%s:%llu: %s", trace->path, (unsigned long long)line, message);
    else vb_error(status, "%s: gzip stream: %s", trace->path, message);
    trace->failure = status;
    free(trace->failure_message);
    trace->failure_message = strdup(vb_last_error());
    return status;
}

/* An error on the line being read now (the one after the last handed out). */
static vb_status fail(vb_trace *trace, vb_status status, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static vb_status fail(vb_trace *trace, vb_status status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vb_status result = fail_at(trace, trace->line, status, format, args);
    va_end(args);
    return result;
}

/* An error of the gzip data itself: inflate reads ahead of the lines
 * handed out, so no line number would be true. */
static vb_status fail_stream(vb_trace *trace, vb_status status, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static vb_status fail_stream(vb_trace *trace, vb_status status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vb_status result = fail_at(trace, 0, status, format, args);
    va_end(args);
    return result;
}

/* A consumer's error on the current line (not sticky: the trace may go on). */
/* "PATH:LINE: <message>" as the error of `status`. */
static vb_status trace_error_va(const vb_trace *trace, uint64_t line, vb_status status, const char *format,
                                va_list args)
{
    char message[400];
    vsnprintf(message, sizeof message, format, args);
    return vb_error(status, "%s:%llu: %s", trace->path, (unsigned long long)line, message);
}

vb_status vb_trace_error(const vb_trace *trace, vb_status status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    status = trace_error_va(trace, trace->line, status, format, args);
    va_end(args);
    return status;
}

vb_status vb_trace_error_at(const vb_trace *trace, uint64_t line, vb_status status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    status = trace_error_va(trace, line, status, format, args);
    va_end(args);
    return status;
}

/* ------------------------------------------------------------------------ */
/* Lines                                                                     */
/* ------------------------------------------------------------------------ */

/* Reads more file bytes after the unconsumed ones; sets eof when there are none. */
static vb_status input_fill(vb_trace *trace)
{
    trace_input *in = &trace->input;
    size_t pending = in->end - in->start;
    memmove(in->bytes, in->bytes + in->start, pending);
    in->base += in->start;
    in->start = 0;
    in->end = pending;
    for (;;) {
        size_t room = TRACE_ZLIB_BUFFER_BYTES - in->end;
        ssize_t got = in->seekable ? pread(in->fd, in->bytes + in->end, room, (off_t)in->position)
                                   : read(in->fd, in->bytes + in->end, room);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            trace->line++;
            return fail(trace, VB_ERR_IO, "read error: %s", strerror(errno));
        }
        if (got == 0) in->eof = 1;
        in->end += (size_t)got;
        in->position += (uint64_t)got;
        return VB_OK;
    }
}

/* Up to `capacity` bytes of the trace's text into `out` (*got 0 at its end):
 * file bytes as they are, or inflated. Errors name the line being read. */
static vb_status input_read(vb_trace *trace, char *out, size_t capacity, size_t *got)
{
    trace_input *in = &trace->input;
    *got = 0;
    if (!in->gzip) {
        if (in->start == in->end && !in->eof) {
            vb_status status = input_fill(trace);
            if (status != VB_OK) return status;
        }
        size_t count = in->end - in->start < capacity ? in->end - in->start : capacity;
        memcpy(out, in->bytes + in->start, count);
        in->start += count;
        *got = count;
        return VB_OK;
    }
    for (;;) {
        if (in->member_ended) {
            /* Another member, the end of the file, or data that is not gzip. */
            if (in->end - in->start < 2 && !in->eof) {
                vb_status status = input_fill(trace);
                if (status != VB_OK) return status;
                continue;
            }
            if (in->start == in->end) return VB_OK;
            if (in->end - in->start < 2 || in->bytes[in->start] != 0x1f || in->bytes[in->start + 1] != 0x8b) {
                trace->line++;
                return fail(trace, VB_ERR_INVALID,
                            "trailing data after the gzip data, at byte %llu of the file (not a gzip member)",
                            (unsigned long long)(in->base + in->start));
            }
            if (inflateReset(&in->z) != Z_OK) return fail(trace, VB_ERR_HOST_OOM, "cannot reset the decompressor");
            in->member_ended = 0;
        }
        if (in->start == in->end && !in->eof) {
            vb_status status = input_fill(trace);
            if (status != VB_OK) return status;
        }
        in->z.next_in = in->bytes + in->start;
        in->z.avail_in = (uInt)(in->end - in->start);
        in->z.next_out = (Bytef *)out;
        in->z.avail_out = (uInt)capacity;
        int result = inflate(&in->z, Z_NO_FLUSH);
        in->start = in->end - in->z.avail_in;
        *got = capacity - in->z.avail_out;
        if (result == Z_STREAM_END) in->member_ended = 1;
        else if (result == Z_NEED_DICT || result == Z_DATA_ERROR || result == Z_MEM_ERROR || result == Z_STREAM_ERROR) {
            return fail_stream(trace, result == Z_MEM_ERROR ? VB_ERR_HOST_OOM : VB_ERR_INVALID,
                               "corrupt data at byte %llu of the file: %s (%llu whole lines read before it)",
                               (unsigned long long)(in->base + in->start), in->z.msg ? in->z.msg : "invalid data",
                               (unsigned long long)trace->line);
        }
        if (*got > 0) return VB_OK;
        if (!in->member_ended && in->eof && in->start == in->end && trace->line == 0)
            return fail_stream(trace, VB_ERR_INVALID, "ends early, at byte %llu of the file (a truncated file, "
                               "without one whole line)", (unsigned long long)(in->base + in->end));
        if (!in->member_ended && in->eof && in->start == in->end) {
            trace->line++;
            return fail(trace, VB_ERR_INVALID,
                        "the gzip data ends early, at byte %llu of the file (a truncated file; line %llu is the last "
                        "whole line)",
                        (unsigned long long)(in->base + in->end), (unsigned long long)(trace->line - 1));
        }
    }
}

/* Moves the unread bytes to the front and reads more after them. */
static vb_status refill(vb_trace *trace)
{
    size_t pending = trace->end - trace->start;
    memmove(trace->buffer, trace->buffer + trace->start, pending);
    trace->start = 0;
    trace->end = pending;
    size_t got;
    vb_status status = input_read(trace, trace->buffer + pending, TRACE_BUFFER_BYTES - pending, &got);
    if (status != VB_OK) return status;
    if (got == 0) trace->at_eof = 1;
    trace->end += got;
    trace->buffer[trace->end] = '\n'; /* the fast parser's stop: see vbtrace_fast */
    return VB_OK;
}

/* The next line (NUL-terminated, without its "\n" or "\r\n") in *line, or
 * NULL at the end of the file. A last line without its newline is an error:
 * a trace cut short while it was written or copied ends that way. */
static vb_status next_line(vb_trace *trace, char **line)
{
    for (;;) {
        char *begin = trace->buffer + trace->start;
        char *newline = memchr(begin, '\n', trace->end - trace->start);
        if (newline) {
            size_t length = (size_t)(newline - begin);
            trace->start += length + 1;
            trace->consumed_bytes += length + 1;
            trace->line++;
            /* The parsers use C strings: a NUL inside would hide the rest of the line. */
            if (memchr(begin, '\0', length))
                return fail(trace, VB_ERR_INVALID, "malformed line: it holds a NUL byte (not a text trace?)");
            if (length > 0 && begin[length - 1] == '\r') length--;
            if (length > TRACE_LINE_MAX) return fail(trace, VB_ERR_INVALID, "line longer than %d bytes", TRACE_LINE_MAX);
            begin[length] = '\0';
            *line = begin;
            return VB_OK;
        }
        if (trace->at_eof) {
            if (trace->start == trace->end) {
                *line = NULL;
                return VB_OK;
            }
            trace->buffer[trace->end] = '\0';
            trace->line++;
            return fail(trace, VB_ERR_INVALID, "truncated line at end of file (no newline after \"%.40s\")",
                        trace->buffer + trace->start);
        }
        if (trace->end - trace->start == TRACE_BUFFER_BYTES) {
            trace->line++;
            return fail(trace, VB_ERR_INVALID, "line longer than %d bytes", TRACE_LINE_MAX);
        }
        vb_status status = refill(trace);
        if (status != VB_OK) return status;
    }
}

/* Field separators of the vbtrace format. */
static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Splits `line` at runs of blanks (or at each `separator` when it is not a
 * blank) into at most `max` fields, NUL-terminating them in place. Returns
 * the number of fields, or max + 1 when there are more. */
static int split(char *line, char separator, char **fields, int max)
{
    int count = 0;
    if (separator == ' ') {
        char *cursor = line;
        for (;;) {
            while (is_blank(*cursor)) cursor++;
            if (!*cursor) return count;
            if (count == max) return max + 1;
            fields[count++] = cursor;
            while (*cursor && !is_blank(*cursor)) cursor++;
            if (*cursor) *cursor++ = '\0';
        }
    }
    char *cursor = line;
    for (;;) {
        if (count == max) return max + 1;
        fields[count++] = cursor;
        char *next = strchr(cursor, separator);
        if (!next) return count;
        *next = '\0';
        cursor = next + 1;
    }
}

/* Parses a whole field as a decimal unsigned 64-bit number; 0 if it is not one. */
static int parse_decimal(const char *text, uint64_t *out)
{
    uint64_t value = 0;
    if (*text < '0' || *text > '9') return 0;
    for (; *text >= '0' && *text <= '9'; text++) {
        uint64_t digit = (uint64_t)(*text - '0');
        if (value > (UINT64_MAX - digit) / 10) return 0;
        value = value * 10 + digit;
    }
    if (*text) return 0;
    *out = value;
    return 1;
}

/* Parses a whole field as hexadecimal, with or without "0x"; 0 if it is not one. */
static int parse_hex(const char *text, uint64_t *out)
{
    uint64_t value = 0;
    if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) text += 2;
    if (!*text) return 0;
    for (; *text; text++) {
        int digit;
        if (*text >= '0' && *text <= '9') digit = *text - '0';
        else if (*text >= 'a' && *text <= 'f') digit = *text - 'a' + 10;
        else if (*text >= 'A' && *text <= 'F') digit = *text - 'A' + 10;
        else return 0;
        if (value >> 60) return 0;
        value = value << 4 | (uint64_t)digit;
    }
    *out = value;
    return 1;
}

/* ------------------------------------------------------------------------ */
/* vrambench's format                                                        */
/* ------------------------------------------------------------------------ */

/* Parses the optional STREAM field of an alloc or free line. */
static vb_status vbtrace_stream(vb_trace *trace, char *field, uint32_t *stream)
{
    uint64_t value = 0;
    if (field && !parse_decimal(field, &value))
        return fail(trace, VB_ERR_INVALID, "malformed stream '%s' (expected a number 0..%d)", field,
                    VB_TRACE_MAX_STREAMS - 1);
    if (value >= VB_TRACE_MAX_STREAMS)
        return fail(trace, VB_ERR_INVALID, "stream %llu out of range (0..%d)", (unsigned long long)value,
                    VB_TRACE_MAX_STREAMS - 1);
    *stream = (uint32_t)value;
    return VB_OK;
}

/* Parses an ID field (any number but the largest, which the id map cannot hold). */
static vb_status vbtrace_id(vb_trace *trace, const char *field, uint64_t *id)
{
    if (parse_decimal(field, id) && *id != UINT64_MAX) return VB_OK;
    /* Digits that do not make an id: past 2^64, or 2^64-1 itself. */
    if (field[0] && strspn(field, "0123456789") == strlen(field))
        return fail(trace, VB_ERR_INVALID, "id %.40s out of range (0 to %llu; 2^64-1 is reserved)", field,
                    (unsigned long long)UINT64_MAX - 1);
    return fail(trace, VB_ERR_INVALID, "malformed id '%s' (expected a number)", field);
}

/* An allocation of `id` becomes live; fills the event. */
static vb_status vbtrace_allocated(vb_trace *trace, uint64_t id, uint64_t size, uint32_t stream,
                                   vb_trace_event *event)
{
    int added;
    uint64_t *tag = vb_id_map_slot(&trace->ids, id, &added);
    if (!tag) return fail(trace, VB_ERR_HOST_OOM, "out of host memory");
    if (!added)
        return fail(trace, VB_ERR_INVALID, "id %llu allocated again while it is live", (unsigned long long)id);
    trace->tag_slot = tag;
    event->kind = VB_TRACE_ALLOC;
    event->id = id;
    event->size = size;
    event->stream = stream;
    return VB_OK;
}

/* A live allocation of `id` is freed; fills the event. */
static vb_status vbtrace_freed(vb_trace *trace, uint64_t id, uint32_t stream, vb_trace_event *event)
{
    if (!vb_id_map_remove(&trace->ids, id, &event->tag))
        return fail(trace, VB_ERR_INVALID, "free of id %llu, which is not live (never allocated, or already freed)",
                    (unsigned long long)id);
    event->kind = VB_TRACE_FREE;
    event->id = id;
    event->size = 0;
    event->stream = stream;
    return VB_OK;
}

/* `a ID SIZE [STREAM]` */
static vb_status vbtrace_alloc(vb_trace *trace, char **fields, int count, vb_trace_event *event)
{
    if (count < 3 || count > 4)
        return fail(trace, VB_ERR_INVALID, "malformed alloc line: expected 'a ID SIZE [STREAM]'");
    uint64_t id, size;
    uint32_t stream;
    vb_status status = vbtrace_id(trace, fields[1], &id);
    if (status != VB_OK) return status;
    if (!parse_decimal(fields[2], &size))
        return fail(trace, VB_ERR_INVALID, "malformed size '%s' (expected a number of bytes)", fields[2]);
    status = vbtrace_stream(trace, count == 4 ? fields[3] : NULL, &stream);
    if (status != VB_OK) return status;
    return vbtrace_allocated(trace, id, size, stream, event);
}

/* `f ID [STREAM]` */
static vb_status vbtrace_free(vb_trace *trace, char **fields, int count, vb_trace_event *event)
{
    if (count < 2 || count > 3)
        return fail(trace, VB_ERR_INVALID, "malformed free line: expected 'f ID [STREAM]'");
    uint64_t id;
    uint32_t stream;
    vb_status status = vbtrace_id(trace, fields[1], &id);
    if (status != VB_OK) return status;
    status = vbtrace_stream(trace, count == 3 ? fields[2] : NULL, &stream);
    if (status != VB_OK) return status;
    return vbtrace_freed(trace, id, stream, event);
}

/* `o SIZE [STREAM]`: an allocation of SIZE bytes that ran out of memory in
 * the recorded program (torch2trace's `oom` entries): nothing allocated. */
static vb_status vbtrace_failed(vb_trace *trace, char **fields, int count, vb_trace_event *event)
{
    if (count < 2 || count > 3)
        return fail(trace, VB_ERR_INVALID, "malformed out-of-memory line: expected 'o SIZE [STREAM]'");
    uint64_t size;
    uint32_t stream;
    if (!parse_decimal(fields[1], &size))
        return fail(trace, VB_ERR_INVALID, "malformed size '%s' (expected a number of bytes)", fields[1]);
    vb_status status = vbtrace_stream(trace, count == 3 ? fields[2] : NULL, &stream);
    if (status != VB_OK) return status;
    event->kind = VB_TRACE_FAILED_ALLOC;
    event->id = 0;
    event->size = size;
    event->stream = stream;
    return VB_OK;
}

/* `m NAME`: the name is the rest of the line, blanks around it dropped. */
static vb_status vbtrace_mark(vb_trace *trace, char *rest, vb_trace_event *event)
{
    while (is_blank(*rest)) rest++;
    size_t length = strlen(rest);
    while (length > 0 && is_blank(rest[length - 1])) length--;
    if (length == 0) return fail(trace, VB_ERR_INVALID, "malformed marker line: expected 'm NAME'");
    if (length > VB_TRACE_MAX_NAME)
        return fail(trace, VB_ERR_INVALID, "marker name longer than %d bytes", VB_TRACE_MAX_NAME);
    /* A name goes into the results JSON and the plots as it is. */
    if (!vb_text_valid(rest, length, 0))
        return fail(trace, VB_ERR_INVALID, "marker name is not UTF-8 text (invalid byte sequence or a control character)");
    memcpy(trace->name, rest, length);
    trace->name[length] = '\0';
    event->kind = VB_TRACE_MARK;
    event->name = trace->name;
    return VB_OK;
}

/* Reads a run of 1..19 decimal digits at *cursor (19 digits cannot
 * overflow 64 bits) and moves past it; 0 when there is none or it is longer.
 * Up to 7 digits (every id and size of gen-trace's random traces) are read
 * from one 8-byte load without a branch per digit: the loop's exit, at a
 * length that varies from number to number, was a mispredicted branch per
 * number. It may read 7 bytes past the run's end: the buffer keeps
 * TRACE_BUFFER_SLACK bytes after its sentinel for that. (A SWAR loop over
 * longer runs measured no faster on 7- and 8-digit numbers.) */
static inline __attribute__((always_inline)) int fast_decimal(const char **cursor, uint64_t *out)
{
    const char *at = *cursor;
    uint64_t word;
    memcpy(&word, at, sizeof word); /* little-endian: at[0] is the low byte */
    /* A byte 0x30..0x39 is 0x3 in both nibbles below, any other byte is
     * not (a carry out of a byte >= 0xfa only changes later bytes, past
     * the first that is no digit). */
    uint64_t not_digit = ((word & 0xf0f0f0f0f0f0f0f0ULL) | (((word + 0x0606060606060606ULL) & 0xf0f0f0f0f0f0f0f0ULL) >> 4)) ^
                         0x3333333333333333ULL;
    if (not_digit) {
        unsigned digits = (unsigned)__builtin_ctzll(not_digit) / 8;
        if (digits == 0) return 0;
        /* The digits to the top bytes, zeros (leading zeros) below them, then
         * pairs, quads and the eight combined. */
        uint64_t value = (word - 0x3030303030303030ULL) << (8 * (8 - digits));
        value = (value * 10 + (value >> 8)) & 0x00ff00ff00ff00ffULL;
        value = (value * 100 + (value >> 16)) & 0x0000ffff0000ffffULL;
        value = (value * 10000 + (value >> 32)) & 0xffffffffULL;
        *cursor = at + digits;
        *out = value;
        return 1;
    }
    uint64_t value = 0;
    int digits = 0;
    while ((unsigned char)(at[digits] - '0') < 10) {
        if (digits == 19) return 0;
        value = value * 10 + (uint64_t)(at[digits] - '0');
        digits++;
    }
    *cursor = at + digits;
    *out = value;
    return 1;
}

/* Parses the line at buffer offset `at` the way the fast path reads
 * lines: "a ID SIZE [STREAM]" and "f ID [STREAM]" with single spaces, as
 * gen-trace and torch2trace write them. It parses in place, without
 * copying or splitting the line, and stops at the '\n' kept after the
 * buffered bytes, so it never reads past them. out->action is 0 for any
 * other line (or one not wholly buffered yet): the general path reads
 * it, with its checks and error messages. */
static void parse_fast_line(const vb_trace *trace, size_t at, fast_line *out)
{
    const char *begin = trace->buffer + at, *cursor = begin + 2;
    out->action = 0;
    out->size = out->stream = 0;
    char action = begin[0];
    if ((action != 'a' && action != 'f') || begin[1] != ' ' || !fast_decimal(&cursor, &out->id)) return;
    if (action == 'a' && (*cursor++ != ' ' || !fast_decimal(&cursor, &out->size))) return;
    if (*cursor == ' ') {
        cursor++;
        if (!fast_decimal(&cursor, &out->stream) || out->stream >= VB_TRACE_MAX_STREAMS) return;
    }
    if (*cursor != '\n' || cursor == trace->buffer + trace->end) return;
    out->length = (size_t)(cursor - begin) + 1;
    out->action = action;
}

/* The fast path for the lines that make up nearly every trace (see
 * parse_fast_line). Returns 0, having consumed nothing, for any other
 * line: the general path then reads it. Otherwise returns 1 with the line
 * consumed and *status the outcome. */
static int vbtrace_fast(vb_trace *trace, vb_trace_event *event, vb_status *status)
{
    fast_line line;
    parse_fast_line(trace, trace->start, &line);
    if (!line.action) return 0;
    trace->start += line.length;
    trace->consumed_bytes += line.length;
    trace->line++;
    *status = line.action == 'a' ? vbtrace_allocated(trace, line.id, line.size, (uint32_t)line.stream, event)
                                 : vbtrace_freed(trace, line.id, (uint32_t)line.stream, event);
    return 1;
}

/* The next event of a vbtrace file; blank lines and # comments are skipped. */
static vb_status vbtrace_next(vb_trace *trace, vb_trace_event *event)
{
    vb_status fast_status;
    if (vbtrace_fast(trace, event, &fast_status)) return fast_status;
    for (;;) {
        char *line;
        vb_status status = next_line(trace, &line);
        if (status != VB_OK) return status;
        if (!line) {
            event->kind = VB_TRACE_END;
            return VB_OK;
        }
        while (is_blank(*line)) line++;
        if (*line == '\0' || *line == '#') continue;
        if (line[0] == 'm' && (is_blank(line[1]) || line[1] == '\0')) return vbtrace_mark(trace, line + 1, event);
        char *fields[5];
        int count = split(line, ' ', fields, 4);
        if (strcmp(fields[0], "a") == 0) return vbtrace_alloc(trace, fields, count, event);
        if (strcmp(fields[0], "f") == 0) return vbtrace_free(trace, fields, count, event);
        if (strcmp(fields[0], "o") == 0) return vbtrace_failed(trace, fields, count, event);
        return fail(trace, VB_ERR_INVALID, "unknown action '%.40s' (expected a, f, o or m)", fields[0]);
    }
}

/* ------------------------------------------------------------------------ */
/* RMM's logging_resource_adaptor CSV                                        */
/* ------------------------------------------------------------------------ */

/* The small id of an RMM stream handle: 0 stays 0 (the default stream, which
 * the replay maps to its own stream), the others are numbered as they come. */
static vb_status rmm_stream(vb_trace *trace, const char *field, uint32_t *stream)
{
    uint64_t handle, id;
    if (!parse_hex(field, &handle))
        return fail(trace, VB_ERR_INVALID, "malformed stream '%.40s' (expected a hex handle)", field);
    if (handle == 0) {
        *stream = 0;
        return VB_OK;
    }
    if (!vb_addr_map_get(&trace->rmm_streams, handle, &id)) {
        /* The default stream (0) is one of VB_TRACE_MAX_STREAMS, used or not. */
        if (trace->rmm_stream_count == VB_TRACE_MAX_STREAMS)
            return fail(trace, VB_ERR_INVALID, "more than %d distinct streams besides the default stream",
                        VB_TRACE_MAX_STREAMS - 1);
        id = trace->rmm_stream_count++;
        if (vb_addr_map_put(&trace->rmm_streams, handle, id) != 0)
            return fail(trace, VB_ERR_HOST_OOM, "out of host memory");
    }
    *stream = (uint32_t)id;
    return VB_OK;
}

/* A record for a new RMM allocation, its index in *index and its tag 0:
 * one from the free list, or a new one. 0, or -1 when host memory runs out. */
static int rmm_record_take(vb_trace *trace, uint64_t *index)
{
    if (trace->free_record) {
        *index = trace->free_record - 1;
        trace->free_record = trace->records[*index].id;
    } else {
        if (trace->record_count == trace->record_capacity) {
            size_t capacity = trace->record_capacity ? trace->record_capacity * 2 : 256;
            rmm_record *grown = realloc(trace->records, capacity * sizeof *grown);
            if (!grown) return -1;
            trace->records = grown;
            trace->record_capacity = capacity;
        }
        *index = trace->record_count++;
    }
    trace->records[*index].tag = 0;
    return 0;
}

/* The next event of an RMM log: `Thread,Time,Action,Pointer,Size,Stream`.
 * Thread and time are not used (the log is in call order). Allocations that
 * returned a null pointer (RMM does that for 0 bytes) and frees of the null
 * pointer are skipped: there is nothing to replay. A pointer is an id from
 * its allocation to its free; when it comes back later it is a new id. */
static vb_status rmm_next(vb_trace *trace, vb_trace_event *event)
{
    for (;;) {
        char *line;
        vb_status status = next_line(trace, &line);
        if (status != VB_OK) return status;
        if (!line) {
            event->kind = VB_TRACE_END;
            return VB_OK;
        }
        if (*line == '\0') continue;
        char *fields[7];
        int count = split(line, ',', fields, 6);
        if (count != 6)
            return fail(trace, VB_ERR_INVALID,
                        "malformed line: %s%d fields, expected 6 (Thread,Time,Action,Pointer,Size,Stream)",
                        count > 6 ? "more than " : "", count > 6 ? 6 : count);
        const char *action = fields[2];
        int is_alloc = strcmp(action, "allocate") == 0;
        int is_failure = strcmp(action, "allocate failure") == 0;
        /* RMM writes "free"; its documentation's example says "deallocate". */
        int is_free = strcmp(action, "free") == 0 || strcmp(action, "deallocate") == 0;
        if (!is_alloc && !is_failure && !is_free)
            return fail(trace, VB_ERR_INVALID, "unknown action '%.40s' (expected allocate, allocate failure or free)",
                        action);
        uint64_t pointer = 0, size;
        if (!is_failure && !parse_hex(fields[3], &pointer))
            return fail(trace, VB_ERR_INVALID, "malformed pointer '%.40s' (expected hex)", fields[3]);
        if (!parse_decimal(fields[4], &size))
            return fail(trace, VB_ERR_INVALID, "malformed size '%.40s' (expected a number of bytes)", fields[4]);
        status = rmm_stream(trace, fields[5], &event->stream);
        if (status != VB_OK) return status;
        if (is_failure) {
            event->kind = VB_TRACE_FAILED_ALLOC;
            event->id = 0;
            event->size = size;
            return VB_OK;
        }
        if (pointer == 0) continue;
        if (is_alloc) {
            int added;
            uint64_t *record = vb_addr_map_slot(&trace->live, pointer, &added);
            if (!record) return fail(trace, VB_ERR_HOST_OOM, "out of host memory");
            if (!added)
                return fail(trace, VB_ERR_INVALID, "pointer 0x%llx allocated again while it is live",
                            (unsigned long long)pointer);
            if (rmm_record_take(trace, record) != 0) {
                vb_addr_map_remove(&trace->live, pointer, NULL);
                return fail(trace, VB_ERR_HOST_OOM, "out of host memory");
            }
            event->id = trace->next_rmm_id++;
            trace->records[*record].id = event->id;
            trace->tag_slot = &trace->records[*record].tag;
            event->kind = VB_TRACE_ALLOC;
            event->size = size;
            return VB_OK;
        }
        uint64_t record;
        if (!vb_addr_map_remove(&trace->live, pointer, &record))
            return fail(trace, VB_ERR_INVALID,
                        "free of pointer 0x%llx, which is not live (never allocated, or already freed)",
                        (unsigned long long)pointer);
        event->id = trace->records[record].id;
        event->tag = trace->records[record].tag;
        trace->records[record].id = trace->free_record;
        trace->free_record = record + 1;
        event->kind = VB_TRACE_FREE;
        event->size = 0;
        return VB_OK;
    }
}

/* ------------------------------------------------------------------------ */
/* Opening                                                                   */
/* ------------------------------------------------------------------------ */

/* The uncompressed size of the file behind `fd`: its size, or for gzip the
 * trailer's ISIZE (the size modulo 2^32). 0 when it cannot be known. */
static uint64_t uncompressed_size(int fd, const struct stat *info)
{
    unsigned char magic[2], trailer[4];
    if (!S_ISREG(info->st_mode)) return 0;
    uint64_t size = (uint64_t)info->st_size;
    if (size < 2 || pread(fd, magic, 2, 0) != 2 || magic[0] != 0x1f || magic[1] != 0x8b) return size;
    if (size < 18 || pread(fd, trailer, 4, (off_t)(size - 4)) != 4) return 0;
    return (uint64_t)trailer[0] | (uint64_t)trailer[1] << 8 | (uint64_t)trailer[2] << 16 |
           (uint64_t)trailer[3] << 24;
}

int vb_trace_looks_like_pickle(const unsigned char *head, size_t count)
{
    if (count < 2) return 0;
    return (head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) || (head[0] == '(' && head[1] == 'd') || head[0] == '}';
}

/* Reads the header line and sets the format. */
static vb_status read_header(vb_trace *trace)
{
    char *line;
    vb_status status = VB_OK;
    /* A gzip inside the gzip, or a pickle, would read as binary junk: say
     * what it is. */
    while (status == VB_OK && trace->end - trace->start < 2 && !trace->at_eof) status = refill(trace);
    if (status != VB_OK) return status;
    const unsigned char *head = (const unsigned char *)trace->buffer + trace->start;
    size_t buffered = trace->end - trace->start;
    if (trace->input.gzip && buffered >= 2 && head[0] == 0x1f && head[1] == 0x8b) {
        trace->line = 1;
        return fail(trace, VB_ERR_INVALID, "compressed twice: the gzip holds another gzip, not a text trace "
                                           "(gunzip it once)");
    }
    if (vb_trace_looks_like_pickle(head, buffered)) {
        trace->line = 1;
        return fail(trace, VB_ERR_INVALID,
                    "not a trace but a Python pickle (a PyTorch memory snapshot?): `vrambench tune` and `explain` "
                    "take a snapshot directly; for the other commands convert it first "
                    "(vrambench-torch2trace SNAPSHOT OUT.trace, or python3 -m vrambench.torch2trace)");
    }
    status = next_line(trace, &line);
    if (status != VB_OK) return status;
    if (!line) {
        trace->line = 1;
        return fail(trace, VB_ERR_INVALID, "empty file (expected a 'vbtrace 1' header or an RMM log header)");
    }
    if (strncmp(line, "\xEF\xBB\xBF", 3) == 0) line += 3; /* a byte-order mark from a spreadsheet */
    size_t length = strlen(line);
    while (length > 0 && is_blank(line[length - 1])) line[--length] = '\0';
    if (strcmp(line, RMM_HEADER) == 0) {
        trace->format = VB_TRACE_FORMAT_RMM_CSV;
        trace->rmm_stream_count = 1;
        return VB_OK;
    }
    char *fields[3];
    int count = split(line, ' ', fields, 2);
    if (count >= 1 && strcmp(fields[0], VBTRACE_HEADER) == 0) {
        uint64_t version;
        if (count != 2 || !parse_decimal(fields[1], &version))
            return fail(trace, VB_ERR_INVALID, "malformed header: expected 'vbtrace %d'", VBTRACE_VERSION);
        if (version != VBTRACE_VERSION)
            return fail(trace, VB_ERR_INVALID, "vbtrace version %llu is not supported (this vrambench reads version %d)",
                        (unsigned long long)version, VBTRACE_VERSION);
        trace->format = VB_TRACE_FORMAT_VBTRACE;
        return VB_OK;
    }
    return fail(trace, VB_ERR_INVALID,
                "not a trace: the first line must be 'vbtrace %d' (vrambench trace) or '%s' (RMM log)",
                VBTRACE_VERSION, RMM_HEADER);
}

/* ------------------------------------------------------------------------ */
/* Spooled inputs: app/input_file.h                                          */
/* ------------------------------------------------------------------------ */

vb_status vb_trace_spool(const char *path)
{
    return vb_input_spool(path);
}

void vb_trace_spool_release(void)
{
    vb_input_release();
}

/* Opens `path` (its spooled copy if it has one), recognises gzip by its
 * magic bytes, and reads the header line. */
vb_status vb_trace_open(const char *path, vb_trace **out)
{
    struct stat info;
    int fd = vb_input_open(path, &info);
    if (fd < 0) return vb_error(VB_ERR_IO, "%s: cannot read trace: %s", path, strerror(errno));
    vb_trace *trace = calloc(1, sizeof *trace);
    if (trace) {
        trace->input.fd = -1;
        trace->path = strdup(path);
        trace->buffer = calloc(1, TRACE_BUFFER_BYTES + TRACE_BUFFER_SLACK);
        trace->input.bytes = malloc(TRACE_ZLIB_BUFFER_BYTES);
        if (trace->buffer) trace->buffer[0] = '\n'; /* the sentinel at buffer[end], end = 0 */
    }
    if (!trace || !trace->path || !trace->buffer || !trace->input.bytes) {
        close(fd);
        vb_trace_close(trace);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    trace->live.sparse = 1; /* RMM: a lookup on every allocation and free */
    trace->total_bytes = uncompressed_size(fd, &info);
    trace->input.fd = fd;
    trace->input.seekable = S_ISREG(info.st_mode); /* pread from 0: a spooled copy's offset is shared */
    vb_status status = VB_OK;
    while (status == VB_OK && trace->input.end < 2 && !trace->input.eof) status = input_fill(trace);
    if (status == VB_OK && trace->input.end >= 2 && trace->input.bytes[0] == 0x1f && trace->input.bytes[1] == 0x8b) {
        trace->input.gzip = 1;
        /* 16 + 15: a gzip wrapper, the largest window. */
        if (inflateInit2(&trace->input.z, 16 + MAX_WBITS) != Z_OK) status = vb_error(VB_ERR_HOST_OOM, "out of host memory");
        else trace->input.inflating = 1;
    }
    if (status == VB_OK) status = read_header(trace);
    if (status != VB_OK) {
        vb_trace_close(trace);
        return status;
    }
    *out = trace;
    return VB_OK;
}

/* Closes the file and frees everything the trace holds. */
void vb_trace_close(vb_trace *trace)
{
    if (!trace) return;
    if (trace->input.inflating) inflateEnd(&trace->input.z);
    if (trace->input.fd >= 0) close(trace->input.fd);
    free(trace->input.bytes);
    vb_id_map_clear(&trace->ids);
    vb_addr_map_clear(&trace->live);
    vb_addr_map_clear(&trace->rmm_streams);
    free(trace->records);
    free(trace->failure_message);
    free(trace->buffer);
    free(trace->path);
    free(trace);
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */
/* ------------------------------------------------------------------------ */

/* The next event in the trace's format, or the sticky error of an earlier call. */
vb_status vb_trace_next(vb_trace *trace, vb_trace_event *event)
{
    if (trace->failure != VB_OK)
        return vb_error(trace->failure, "%s", trace->failure_message ? trace->failure_message : "trace failed");
    event->name = NULL;
    event->tag = 0;
    trace->tag_slot = NULL;
    if (trace->format == VB_TRACE_FORMAT_RMM_CSV) return rmm_next(trace, event);
    return vbtrace_next(trace, event);
}

void vb_trace_tag(vb_trace *trace, uint64_t tag)
{
    if (trace->tag_slot) *trace->tag_slot = tag;
}

/* vb_trace_each_live's walk over RMM's live map, whose values index the records. */
typedef struct live_walk {
    const vb_trace *trace;
    void (*visit)(void *context, uint64_t id, uint64_t tag);
    void *context;
} live_walk;

static void visit_rmm_live(void *context, uint64_t pointer, uint64_t record)
{
    (void)pointer;
    const live_walk *walk = context;
    walk->visit(walk->context, walk->trace->records[record].id, walk->trace->records[record].tag);
}

void vb_trace_each_live(const vb_trace *trace, void (*visit)(void *context, uint64_t id, uint64_t tag),
                        void *context)
{
    if (trace->format != VB_TRACE_FORMAT_RMM_CSV) {
        vb_id_map_each(&trace->ids, visit, context);
        return;
    }
    live_walk walk = {trace, visit, context};
    vb_addr_map_each_sorted(&trace->live, visit_rmm_live, &walk);
}

/* vb_trace_retag_live's walk over RMM's live map, whose values index the records. */
typedef struct retag_walk {
    vb_trace *trace;
    uint64_t (*retag)(void *context, uint64_t tag);
    void *context;
} retag_walk;

static void retag_rmm_live(void *context, uint64_t pointer, uint64_t record)
{
    (void)pointer;
    const retag_walk *walk = context;
    walk->trace->records[record].tag = walk->retag(walk->context, walk->trace->records[record].tag);
}

void vb_trace_retag_live(vb_trace *trace, uint64_t (*retag)(void *context, uint64_t tag), void *context)
{
    if (trace->format != VB_TRACE_FORMAT_RMM_CSV) {
        vb_id_map_change_values(&trace->ids, retag, context);
        return;
    }
    retag_walk walk = {trace, retag, context};
    vb_addr_map_each(&trace->live, retag_rmm_live, &walk);
}

/* Accessors: see trace.h. */
vb_trace_format vb_trace_get_format(const vb_trace *trace)
{
    return trace->format;
}

const char *vb_trace_path(const vb_trace *trace)
{
    return trace->path;
}

uint64_t vb_trace_line(const vb_trace *trace)
{
    return trace->line;
}

uint64_t vb_trace_live_count(const vb_trace *trace)
{
    return trace->format == VB_TRACE_FORMAT_RMM_CSV ? trace->live.count : vb_id_map_count(&trace->ids);
}

uint64_t vb_trace_consumed_bytes(const vb_trace *trace)
{
    return trace->consumed_bytes;
}

uint64_t vb_trace_total_bytes(const vb_trace *trace)
{
    return trace->total_bytes;
}
