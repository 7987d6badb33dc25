"""The signals a test sends to the commands it starts, at their defaults.

A program starts with them at their defaults, and the signal tests check what
a command does then. But a test run under nohup ignores SIGHUP, one started as
a background job of a script ignores SIGINT and SIGQUIT, and a child inherits
an ignored signal across exec: the command would then never see the signal
its test sends (a failure, or a wait with no end). A test module that sends
signals calls restore() when it is imported, and sends a signal meant for a
moment of a command's work with interrupt_when()."""

import os
import signal
import time


def restore():
    """Undoes an inherited 'ignore' of the signals the tests send; this
    process's own handlers (Python's for SIGINT) stay as they are."""
    for name in ("SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM"):
        number = getattr(signal, name)
        if signal.getsignal(number) == signal.SIG_IGN:
            # SIGINT gets Python's own handler back: KeyboardInterrupt here,
            # the default in every child (a handler does not survive exec).
            signal.signal(number, signal.default_int_handler if number == signal.SIGINT else signal.SIG_DFL)


def _thread_states(pid):
    """The state letter of each thread of process `pid` (Linux's /proc),
    or None when they cannot be read (no /proc, or the process is gone)."""
    try:
        states = []
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/stat", encoding="ascii", errors="replace") as stat:
                states.append(stat.read().rpartition(")")[2].split()[0])
        return states
    except OSError:
        return None


def asleep(pid):
    """Whether every thread of process `pid` sleeps (blocked in a read, say);
    True where there is no /proc to ask."""
    states = _thread_states(pid)
    if states is None:
        return not os.path.isdir("/proc/self/task")
    return all(state == "S" for state in states)


def _stopped(pid):
    """Whether process `pid` is stopped (SIGSTOP); None where that cannot
    be asked."""
    states = _thread_states(pid)
    return None if states is None else all(state in ("T", "t") for state in states)


def interrupt_when(process, ready, signum, group=False, seconds=120):
    """Sends `signum` to `process` (to its process group, with `group`) at a
    moment when `ready()` holds, a state the command passes through (its
    temporary folder is there, say). A command can finish between a test's
    look at that state and its signal, on a loaded machine more often: so
    once ready() holds, the process is stopped (SIGSTOP), ready() is asked
    again while it cannot move on, and only then is the signal sent; then
    it goes on (SIGCONT) and takes the signal. True when the signal was
    sent; False when the process ended first, or had gone past the state
    by the time it stopped (it goes on and ends by itself: try again)."""
    def kill(number):
        try:
            if group:
                os.killpg(process.pid, number)
            else:
                process.send_signal(number)
        except ProcessLookupError:  # it has ended (the whole group, with `group`)
            pass
    deadline = time.time() + seconds
    while not ready() and process.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    if process.poll() is not None or not ready():
        return False
    kill(signal.SIGSTOP)
    while process.poll() is None and _stopped(process.pid) is False and time.time() < deadline:
        time.sleep(0.002)
    caught = process.poll() is None and ready()
    if caught:
        kill(signum)
    kill(signal.SIGCONT)
    return caught


def interrupt_a_run(start, ready, signum, missed, group=False, tries=3):
    """Starts a command (start(): its Popen, stderr piped) and interrupts it
    with interrupt_when, ready(process) saying when; a run that got past
    that state first ends by itself and goes to missed(process, stderr),
    which checks and removes what it left, and the command is started
    again, up to `tries` runs. The process that took the signal and its
    stderr, or None when no run did."""
    for _ in range(tries):
        process = start()
        caught = interrupt_when(process, lambda: ready(process), signum, group=group)
        _, errors = process.communicate(timeout=120)
        if caught:
            return process, errors
        missed(process, errors)
    return None
