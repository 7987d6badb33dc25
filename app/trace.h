/* vrambench — allocation traces: a streaming reader.
 *
 * A trace is a recorded sequence of allocations, frees and named step markers
 * (docs/trace-format.md). The reader understands two formats and tells them
 * apart by the first line:
 *   vbtrace 1                                 vrambench's own text format
 *   Thread,Time,Action,Pointer,Size,Stream    RMM's logging_resource_adaptor CSV
 * Either may be gzip-compressed (recognised by gzip's magic bytes, whatever
 * the file is called; inflated with zlib): one member or several in a row,
 * nothing else after them.
 *
 * The reader holds one fixed buffer and never loads the whole file. It checks
 * the trace as it goes, so a consumer only ever sees a consistent sequence:
 * every free is of a live allocation, no id is allocated twice while live.
 * Any problem (malformed line, unknown action, free of an id that is not live,
 * a last line cut short, an unreadable file) is one error naming the file and
 * line: "PATH:LINE: what is wrong" (VB_ERR_INVALID, or VB_ERR_IO for reading).
 */
#ifndef VB_TRACE_H
#define VB_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Stream ids are small: 0 is the replaying run's own stream, the others are
 * streams the replay creates on demand. */
#define VB_TRACE_MAX_STREAMS 1024

/* Longest step-marker name kept (a timeline step holds 63 bytes + NUL). */
#define VB_TRACE_MAX_NAME 63

typedef enum vb_trace_format {
    VB_TRACE_FORMAT_VBTRACE = 0, /* vrambench's own text format */
    VB_TRACE_FORMAT_RMM_CSV = 1, /* RMM logging_resource_adaptor CSV */
} vb_trace_format;

typedef enum vb_trace_kind {
    VB_TRACE_END = 0,          /* no more events */
    VB_TRACE_ALLOC,            /* id, size, stream */
    VB_TRACE_FREE,             /* id, stream */
    VB_TRACE_MARK,             /* name */
    VB_TRACE_FAILED_ALLOC,     /* size, stream: the recorded program's allocation failed
                                * (RMM "allocate failure", vbtrace `o`); nothing was allocated */
} vb_trace_kind;

typedef struct vb_trace_event {
    vb_trace_kind kind;
    uint64_t id;       /* ALLOC, FREE: the allocation's id, unique among live ones */
    uint64_t size;     /* ALLOC, FAILED_ALLOC: bytes asked for */
    uint32_t stream;   /* ALLOC, FREE, FAILED_ALLOC: 0 .. VB_TRACE_MAX_STREAMS-1 */
    const char *name;  /* MARK: NUL-terminated, valid until the next vb_trace_next */
    uint64_t tag;      /* FREE: what vb_trace_tag attached to the allocation (0: nothing) */
} vb_trace_event;

typedef struct vb_trace vb_trace;

/* Opens `path` and reads its first line to learn the format. VB_ERR_IO when
 * the file cannot be opened or read, VB_ERR_INVALID when the first line is
 * neither format's header. */
vb_status vb_trace_open(const char *path, vb_trace **out);

/* 1 when a file's first two bytes (`count` of them there) are a Python
 * pickle's: PROTO (0x80) and a protocol of 2 to 5, or a dict at protocol 0
 * ("(d") or 1 ("}"), as a PyTorch memory snapshot begins. No trace or RMM
 * log begins so. */
int vb_trace_looks_like_pickle(const unsigned char *head, size_t count);

/* Makes a non-seekable trace input (a pipe, a FIFO, /dev/stdin, a
 * character device) readable more than once: vb_input_spool
 * (app/input_file.h: read once into an unlinked scratch file in $TMPDIR,
 * at most $VB_SPOOL_LIMIT bytes), which every later vb_trace_open of the
 * same path reads instead (a replay opens its trace to check it, then once
 * per run). A regular file is left alone. */
vb_status vb_trace_spool(const char *path);

/* Closes every spooled copy (vb_input_release). */
void vb_trace_spool_release(void);

/* Closes the trace (NULL is fine). */
void vb_trace_close(vb_trace *trace);

/* The next event in *event (kind VB_TRACE_END once the file is done), or an
 * error with "PATH:LINE: ..." as its message. After an error the trace is
 * finished: further calls return the same status. */
vb_status vb_trace_next(vb_trace *trace, vb_trace_event *event);

/* Attaches `tag` to the allocation the last vb_trace_next returned (no-op
 * when that was not an ALLOC): its FREE event carries it back. The reader
 * keeps it with the live id it already tracks, so a replay needs no map of
 * its own from ids to addresses. */
void vb_trace_tag(vb_trace *trace, uint64_t tag);

/* Calls `visit` for every allocation still live, with its id and tag, in
 * an order that is the same every run (a replay frees them in it). The
 * trace must not be read meanwhile. */
void vb_trace_each_live(const vb_trace *trace, void (*visit)(void *context, uint64_t id, uint64_t tag),
                        void *context);

/* Replaces the tag of every allocation still live by what `retag` makes
 * of it: for a consumer that tagged allocations with numbers of its own
 * and learned later what each stands for. The trace must not be read
 * meanwhile. */
void vb_trace_retag_live(vb_trace *trace, uint64_t (*retag)(void *context, uint64_t tag), void *context);

vb_trace_format vb_trace_get_format(const vb_trace *trace);
const char *vb_trace_path(const vb_trace *trace);

/* The line the last event came from (1-based; 0 before the first). */
uint64_t vb_trace_line(const vb_trace *trace);

/* Allocations live in the trace so far (allocated and not yet freed). */
uint64_t vb_trace_live_count(const vb_trace *trace);

/* How far through the file the reader is: uncompressed bytes consumed so
 * far, and the uncompressed size (the file's size for plain text, the gzip
 * trailer's for compressed files, exact below 4 GiB; 0 when unknown, e.g. a
 * pipe). Consumers use them to act at regular fractions of the trace. */
uint64_t vb_trace_consumed_bytes(const vb_trace *trace);
uint64_t vb_trace_total_bytes(const vb_trace *trace);

/* Records "PATH:LINE: <message>" for the current line and returns `status`,
 * for consumers that find a problem with an event (e.g. a stream that cannot
 * be created). */
vb_status vb_trace_error(const vb_trace *trace, vb_status status, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
/* vb_trace_error for line `line`, read earlier (a consumer that reads
 * events ahead of acting on them). */
vb_status vb_trace_error_at(const vb_trace *trace, uint64_t line, vb_status status, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

#endif
