/* vrambench — status codes and the last-error message.
 *
 * Every function that can fail returns a vb_status (0 = ok, negative = the
 * kind of failure) and leaves a human-readable message behind, which the CLI
 * prints as "vrambench: error: <message>". */
#ifndef VB_STATUS_H
#define VB_STATUS_H

typedef enum vb_status {
    VB_OK = 0,
    VB_ERR_OOM = -1,         /* not enough device memory */
    VB_ERR_INVALID = -2,     /* bad argument: unknown pointer, double free, bad config, bad input */
    VB_ERR_UNSUPPORTED = -3, /* the device or allocator cannot do this */
    VB_ERR_DEVICE = -4,      /* the driver or runtime failed */
    VB_ERR_IO = -5,          /* a file could not be read or written */
    VB_ERR_HOST_OOM = -6,    /* host memory (malloc/calloc/realloc) ran out: a failure of the
                              * run, never a measurement (unlike VB_ERR_OOM, which is the device's) */
} vb_status;

/* Returns from the calling function with the status of `expr` unless it is VB_OK. */
#define VB_TRY(expr)                              \
    do {                                          \
        vb_status vb_try_status_ = (expr);        \
        if (vb_try_status_ != VB_OK) return vb_try_status_; \
    } while (0)

/* Short lower-case name of a status ("ok", "out of memory", ...). */
const char *vb_status_name(vb_status status);

/* Records a printf-style message for `status` and returns `status`, so that
 * failing paths read `return vb_error(VB_ERR_INVALID, "unknown key '%s'", k);`.
 * The message is per thread and overwritten by the next error. */
vb_status vb_error(vb_status status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* The message of the last vb_error() on this thread ("" if none). */
const char *vb_last_error(void);

/* Forgets the last message (tests use it to check that a call set one). */
void vb_clear_error(void);

#endif
