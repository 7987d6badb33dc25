"""The one safe writer of the Python tools (plots, plots/tune.py,
plots/torch_ab.py, torch2trace.py), with the rules of the C one
(app/output_file.c):

- a file is written to a new temporary file in its target's directory
  (never an existing file), flushed and fsync'ed, then renamed over the
  target: a full disk or any failure leaves the old file as it was, and the
  temporary file is removed on every way out, SIGTERM and SIGHUP included
  (while writing they raise Interrupted; the signal is then raised again
  with its default action, so the exit status still names it);
- only a regular file or a missing path is replaced: a symbolic link,
  directory, device, FIFO or socket is refused (never written through);
- no output may be one of the command's inputs or another of its outputs,
  by identity (device and inode, or for a file that does not exist yet its
  path with the directory resolved), not by name.

Standard library only. Errors are OutputError, whose message is for the
user (names pass through shown(): control characters and undecodable bytes
become '?').
"""

import contextlib
import os
import signal
import stat
import sys
import tempfile
import unicodedata


class OutputError(Exception):
    """An output that cannot or must not be written; the message is for the user."""


class Interrupted(BaseException):
    """SIGTERM or SIGHUP arrived while a temporary file existed."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def shown(text):
    """`text` (a file name, perhaps bytes that are not UTF-8) safe for one
    line of a terminal: control characters and undecodable bytes become '?'."""
    text = os.fsdecode(text) if isinstance(text, bytes) else str(text)
    text = text.encode("utf-8", errors="replace").decode("utf-8", errors="replace")
    return "".join("?" if unicodedata.category(c) in ("Cc", "Cs") or c == "\ufffd" else c for c in text)


def _kind(mode):
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_target(path):
    """OutputError unless `path` is a regular file or missing, in an
    existing directory."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as error:
        raise OutputError(f"cannot write {shown(path)}: {error.strerror or error}") from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise OutputError(f"cannot write {shown(path)}: it is {_kind(info.st_mode)} "
                          "(an output replaces only a regular file)")
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        raise OutputError(f"cannot write {shown(path)}: no directory {shown(directory)}")


def _identity(path):
    try:
        info = os.stat(path)
        return ("inode", info.st_dev, info.st_ino)
    except OSError:
        directory, name = os.path.split(path)
        return ("path", os.path.join(os.path.realpath(directory or "."), name))


def check_distinct(files):
    """files: [(what, path, is_output)]. OutputError when an output is the
    same file as an input or another output."""
    for index, (what, path, is_output) in enumerate(files):
        if path is None or not is_output:
            continue
        mine = _identity(path)
        for other_index, (other_what, other_path, other_output) in enumerate(files):
            if other_index == index or other_path is None or (other_output and other_index > index):
                continue
            if _identity(other_path) == mine:
                replaced = "the other output" if other_output else "the input"
                raise OutputError(f"{what} {shown(path)} is the same file as {other_what} {shown(other_path)}: "
                                  f"writing it would replace {replaced}; name another file")


# The signal the process is ending by, once signals_raise raised it: a
# second one (a second Ctrl-C, or the SIGTERM a child gets when its parent
# dies of the first) must not cut the cleanup of the first short, leaving
# the temporaries it was removing; it is let go.
_ending = []


@contextlib.contextmanager
def signals_raise():
    """While inside, SIGTERM and SIGHUP raise Interrupted, and SIGINT
    KeyboardInterrupt, so cleanup code runs; an Interrupted that leaves the
    block ends the process by its signal. Only the first signal raises:
    those that come while its cleanup runs are let go. Nested, the
    outermost block (the one whose handler raised it) ends the process: an
    inner one passes it on, so that the cleanup of every block around it
    runs first (a report's plot folder, around the plots' own files)."""
    previous = {}
    def interrupt(signum, frame):
        if _ending:
            return
        _ending.append(signum)
        raise KeyboardInterrupt if signum == signal.SIGINT else Interrupted(signum)
    for signum, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL),
                            (signal.SIGHUP, signal.SIG_DFL)):
        try:
            if signal.getsignal(signum) == default:
                previous[signum] = signal.signal(signum, interrupt)
        except ValueError:  # not the main thread: no handlers there
            pass
    try:
        yield
    except Interrupted as interrupted:
        if interrupted.signum not in previous:
            raise
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        previous = {}
        signal.signal(interrupted.signum, signal.SIG_DFL)
        os.kill(os.getpid(), interrupted.signum)
        raise SystemExit(128 + interrupted.signum)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if previous:
            _ending.clear()


@contextlib.contextmanager
def signals_held():
    """Holds SIGINT, SIGTERM and SIGHUP back while inside (where the platform
    can), for the making of a temporary file or folder and the recording of
    its name: a signal cannot land between the two, when nothing would know
    to remove it. One that came meanwhile is raised on leaving, so leave
    inside the code that removes the temporary on an exception."""
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, held) if hasattr(signal, "pthread_sigmask") else None
    try:
        yield
    finally:
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


class _StdoutFailed(Exception):
    """Writing to stdout failed (its OSError is the cause)."""


class _Stdout:
    """sys.stdout whose write and flush failures are _StdoutFailed, so that
    run_main tells them from any other OSError."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except OSError as error:
            raise _StdoutFailed() from error

    def flush(self):
        try:
            self._stream.flush()
        except OSError as error:
            raise _StdoutFailed() from error

    def __getattr__(self, name):
        return getattr(self._stream, name)


def run_main(main, prog):
    """sys.exit(main()) for a tool's `__main__`, with its ends made quiet:
    SIGTERM and SIGHUP raise Interrupted while it runs (signals_raise), so
    its `finally` and `with` blocks remove its temporaries, and then end the
    process by the signal; SIGINT does the same, without Python's
    KeyboardInterrupt traceback; a stdout that cannot be written (a full
    disk, /dev/full) is one line `PROG: error: ...` and exit status 1."""
    stream = sys.stdout
    if stream is not None:
        sys.stdout = _Stdout(stream)
    try:
        with signals_raise():
            status = main()
            sys.stdout.flush()
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        status = 128 + signal.SIGINT  # where SIGINT does not end the process
    except _StdoutFailed as failed:
        # what is still buffered cannot be written either: nothing more goes to stdout
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
        error = failed.__cause__
        print(f"{prog}: error: cannot write to stdout: {shown(error.strerror or error)}", file=sys.stderr)
        status = 1
    finally:
        sys.stdout = stream
    sys.exit(status)


def write_file(path, produce):
    """Calls produce(binary file) on a new temporary file in `path`'s
    directory, fsyncs it and renames it over `path`; returns what produce
    returned. On any failure (OSError for a full disk) or signal only the
    temporary file is removed and the exception goes on."""
    check_target(path)
    with signals_raise():
        temporary = None
        try:
            with signals_held():
                fd, temporary = tempfile.mkstemp(prefix=".vrambench-", dir=os.path.dirname(path) or ".")
            mask = os.umask(0)
            os.umask(mask)
            os.fchmod(fd, 0o666 & ~mask)
            with os.fdopen(fd, "wb") as file:
                result = produce(file)
                file.flush()
                os.fsync(file.fileno())
            check_target(path)
            os.replace(temporary, path)
            return result
        except BaseException:
            if temporary is not None:
                with contextlib.suppress(OSError):
                    os.remove(temporary)
            raise


def commit_files(pairs):
    """Moves each (temporary, target) into place after fsyncing it; every
    target is checked (regular or missing) before any is replaced."""
    for _, target in pairs:
        check_target(target)
    for temporary, target in pairs:
        with open(temporary, "rb") as file:
            os.fsync(file.fileno())
        os.replace(temporary, target)
