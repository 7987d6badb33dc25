/* vrambench — temporary files and their removal on every way out (see
 * scratch.h). */
#include "scratch.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Named temporary files alive at once: an output or two per command. */
#define TEMP_SLOTS 32

typedef struct temp_slot {
    volatile sig_atomic_t used; /* set last, after owner and path */
    pid_t owner;                /* the process that created the file */
    char path[4096];
} temp_slot;

static temp_slot slots[TEMP_SLOTS];
static int handlers_installed;

/* The signals that end a process with a file half written. */
static const int fatal_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGXFSZ};
#define FATAL_SIGNAL_COUNT (sizeof fatal_signals / sizeof fatal_signals[0])

const char *vb_scratch_directory(void)
{
    const char *directory = getenv("TMPDIR");
    return directory && *directory ? directory : "/tmp";
}

/* Blocks the fatal signals (so a file is never created without being
 * registered, or left without being unlinked); the old mask in *old. */
static void block_fatal_signals(sigset_t *old)
{
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < FATAL_SIGNAL_COUNT; i++) sigaddset(&set, fatal_signals[i]);
    sigprocmask(SIG_BLOCK, &set, old);
}

void vb_signals_hold_to_exit(void)
{
    sigset_t old;
    block_fatal_signals(&old);
}

int vb_scratch_file(void)
{
    const char *directory = vb_scratch_directory();
#ifdef O_TMPFILE
    int fd = open(directory, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return fd;
#endif
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/vrambench-scratch-XXXXXX", directory) >= sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    sigset_t old;
    block_fatal_signals(&old);
    int made = mkostemp(path, O_CLOEXEC);
    int error = errno;
    if (made >= 0) unlink(path); /* it lives as long as its descriptors */
    sigprocmask(SIG_SETMASK, &old, NULL);
    errno = error;
    return made;
}

FILE *vb_scratch_stream(int fd, const char *mode)
{
    if (fd < 0) {
        errno = EBADF;
        return NULL;
    }
    int copy = lseek(fd, 0, SEEK_SET) == 0 ? dup(fd) : -1;
    FILE *stream = copy >= 0 ? fdopen(copy, mode) : NULL;
    if (!stream && copy >= 0) {
        int error = errno;
        close(copy);
        errno = error;
    }
    return stream;
}

/* Removes this process's registered files, last registered first.
 * Async-signal-safe: getpid and unlink only. */
static void remove_registered(void)
{
    pid_t self = getpid();
    for (int i = TEMP_SLOTS - 1; i >= 0; i--) {
        if (!slots[i].used || slots[i].owner != self) continue;
        unlink(slots[i].path);
        slots[i].used = 0;
    }
}

/* The handler: the files go, then the signal is raised again with its
 * default action (the process ends as it would have without us). */
static void on_fatal_signal(int signal_number)
{
    int saved = errno;
    remove_registered();
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    sigaction(signal_number, &action, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signal_number);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(signal_number);
    errno = saved; /* reached only when the default action does not end the process */
}

/* Catches every fatal signal not ignored; removes the files at exit() too. */
static void install_handlers(void)
{
    if (handlers_installed) return;
    handlers_installed = 1;
    for (size_t i = 0; i < FATAL_SIGNAL_COUNT; i++) {
        struct sigaction old, action;
        if (sigaction(fatal_signals[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN) continue;
        if (old.sa_handler != SIG_DFL) continue; /* somebody else's handler: theirs */
        memset(&action, 0, sizeof action);
        action.sa_handler = on_fatal_signal;
        sigemptyset(&action.sa_mask);
        for (size_t j = 0; j < FATAL_SIGNAL_COUNT; j++) sigaddset(&action.sa_mask, fatal_signals[j]);
        sigaction(fatal_signals[i], &action, NULL);
    }
    atexit(remove_registered);
}

int vb_temp_register(const char *path)
{
    size_t length = strlen(path);
    if (length >= sizeof slots[0].path) return -1;
    install_handlers();
    for (int i = 0; i < TEMP_SLOTS; i++) {
        if (slots[i].used) continue;
        slots[i].owner = getpid();
        memcpy(slots[i].path, path, length + 1);
        atomic_signal_fence(memory_order_seq_cst); /* the handler sees the path before `used` */
        slots[i].used = 1;
        return i;
    }
    return -1;
}

int vb_temp_create(char *path_template, int *handle)
{
    sigset_t old;
    install_handlers(); /* before the mask is saved: sigaction under a blocked mask is fine */
    block_fatal_signals(&old);
    int fd = mkstemp(path_template);
    int error = errno;
    *handle = fd >= 0 ? vb_temp_register(path_template) : -1;
    sigprocmask(SIG_SETMASK, &old, NULL);
    errno = error;
    return fd;
}

void vb_temp_forget(int handle)
{
    if (handle < 0 || handle >= TEMP_SLOTS) return;
    slots[handle].used = 0;
}
