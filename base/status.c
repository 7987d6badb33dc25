/* vrambench — status names and the per-thread last-error message. */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_message[512];

/* Short lower-case name of a status. */
const char *vb_status_name(vb_status status)
{
    switch (status) {
    case VB_OK: return "ok";
    case VB_ERR_OOM: return "out of memory";
    case VB_ERR_INVALID: return "invalid argument";
    case VB_ERR_UNSUPPORTED: return "unsupported";
    case VB_ERR_DEVICE: return "device error";
    case VB_ERR_IO: return "i/o error";
    case VB_ERR_HOST_OOM: return "out of host memory";
    }
    return "unknown status";
}

/* Records the message and hands the status back to the caller. */
vb_status vb_error(vb_status status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(last_message, sizeof last_message, format, args);
    va_end(args);
    return status;
}

/* The message of the last vb_error() on this thread. */
const char *vb_last_error(void)
{
    return last_message;
}

/* Forgets the last message. */
void vb_clear_error(void)
{
    last_message[0] = '\0';
}
