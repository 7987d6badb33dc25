"""The signals a test sends to the commands it starts, at their defaults.

A program starts with them at their defaults, and the signal tests check what
a command does then. But a test run under nohup ignores SIGHUP, one started as
a background job of a script ignores SIGINT and SIGQUIT, and a child inherits
an ignored signal across exec: the command would then never see the signal
its test sends (a failure, or a wait with no end). A test module that sends
signals calls restore() when it is imported."""

import signal


def restore():
    """Undoes an inherited 'ignore' of the signals the tests send; this
    process's own handlers (Python's for SIGINT) stay as they are."""
    for name in ("SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM"):
        number = getattr(signal, name)
        if signal.getsignal(number) == signal.SIG_IGN:
            # SIGINT gets Python's own handler back: KeyboardInterrupt here,
            # the default in every child (a handler does not survive exec).
            signal.signal(number, signal.default_int_handler if number == signal.SIGINT else signal.SIG_DFL)
