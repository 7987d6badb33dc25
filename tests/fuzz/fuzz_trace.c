/* vrambench fuzz target (libFuzzer): the trace reader (app/trace.c) on any
 * bytes: vbtrace, RMM CSV, gzip (raw input starting with gzip's magic bytes
 * reaches the inflater as it is; an input starting with 'Z' is the rest,
 * gzip-compressed, so the mutations also reach the parsers behind a valid
 * gzip stream). Every event is read, every allocation tagged, the live set
 * walked: the reader must end (VB_TRACE_END or an error naming FILE:LINE)
 * without a crash, a leak or undefined behaviour. Inputs of odd length
 * have their live tags changed at the end (vb_trace_retag_live, as a
 * drive does): every tag the walk then gives must be a changed one.
 *
 *   make fuzz            builds and runs each target for FUZZ_SECONDS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "app/trace.h"

/* The bit vb_trace_retag_live sets in every tag (tags handed out are small). */
#define RETAGGED (1ULL << 63)

static uint64_t retag(void *context, uint64_t tag)
{
    (void)context;
    return tag | RETAGGED;
}

/* What the walk expects: every tag changed or none. */
typedef struct walk {
    int retagged;
    uint64_t sum; /* the tags handed back, summed, so the walk is not optimised away */
} walk;

static void visit(void *context, uint64_t id, uint64_t tag)
{
    walk *w = context;
    if (!(tag & RETAGGED) != !w->retagged) abort();
    w->sum += id ^ tag;
}

/* `size` bytes of `data` gzip-compressed into a new buffer (*length); NULL on failure. */
static unsigned char *gzip_bytes(const uint8_t *data, size_t size, size_t *length)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) return NULL;
    size_t capacity = deflateBound(&z, (uLong)size) + 32;
    unsigned char *out = malloc(capacity);
    if (out) {
        z.next_in = (Bytef *)data;
        z.avail_in = (uInt)size;
        z.next_out = out;
        z.avail_out = (uInt)capacity;
        if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
            free(out);
            out = NULL;
        }
        *length = capacity - z.avail_out;
    }
    deflateEnd(&z);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *packed = NULL;
    if (size > 0 && data[0] == 'Z') {
        size_t length = 0;
        packed = gzip_bytes(data + 1, size - 1, &length);
        if (!packed) return 0;
        data = packed;
        size = length;
    }
    /* The reader opens a path: the bytes live in a memory file. */
    int fd = memfd_create("trace", MFD_CLOEXEC);
    if (fd < 0) abort();
    if (size > 0 && write(fd, data, size) != (ssize_t)size) abort();
    free(packed);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int change_tags = size % 2;
    vb_trace *trace = NULL;
    if (vb_trace_open(path, &trace) == VB_OK) {
        vb_trace_event event;
        uint64_t tag = 1;
        while (vb_trace_next(trace, &event) == VB_OK && event.kind != VB_TRACE_END) {
            /* The reader's promises (app/trace.h), checked on every event. */
            if (event.kind == VB_TRACE_ALLOC) vb_trace_tag(trace, tag++);
            if (event.kind == VB_TRACE_MARK && strlen(event.name) > VB_TRACE_MAX_NAME) abort();
            if (event.kind != VB_TRACE_MARK && event.stream >= VB_TRACE_MAX_STREAMS) abort();
            if (event.kind == VB_TRACE_FREE && (event.tag == 0 || event.tag >= tag)) abort();
        }
        if (change_tags) vb_trace_retag_live(trace, retag, NULL);
        walk w = {change_tags, 0};
        vb_trace_each_live(trace, visit, &w);
        (void)vb_trace_consumed_bytes(trace);
        vb_trace_close(trace);
    }
    close(fd);
    return 0;
}
