#!/usr/bin/env python3
"""Convert a PyTorch CUDA memory snapshot into a vrambench trace.

    python/vrambench/torch2trace.py SNAPSHOT.pickle OUT.trace [--device N]
                         [--free-at free_completed|free_requested] [--name NAME]

SNAPSHOT.pickle is what torch.cuda.memory._dump_snapshot() writes after
torch.cuda.memory._record_memory_history() was turned on: a pickled dict whose
'device_traces' holds, per device, the list of the caching allocator's trace
entries ({'action', 'addr', 'size', 'stream', 'time_us', 'frames', ...};
torch/cuda/memory.py, _snapshot's TraceEntry). Only the Python standard
library is needed: the snapshot is plain dicts and lists, and it is read with
an unpickler that refuses anything else, so no torch is needed and no code in
the file can run.

What is converted (docs/trace-format.md describes the output):
  alloc                   -> `a ID SIZE STREAM` (SIZE is the size the program
                             asked for; PyTorch records it before rounding)
  free_completed          -> `f ID STREAM` (default: when the block is
                             reusable, after the work of every stream that used
                             it is done)
  free_requested          -> `f ID STREAM` instead, with --free-at free_requested
                             (when the program dropped the tensor)
  oom                     -> `m oom` (a step marker), then `o SIZE STREAM`: the request
                             that ran out of memory (SIZE as PyTorch records it,
                             rounded by its allocator), which `vrambench explain`
                             replays to explain the OOM; `device_free` in a comment
  snapshot                -> `m snapshot`
  record_function scopes  -> `m NAME` at their start, from the snapshot's
                             'external_annotations' (torch records them while
                             memory history is on)
  segment_alloc/free/map/unmap are the recording allocator's own business and
  are not replayed. Streams: 0 (the default stream) stays 0, the others are
  numbered 1, 2, ... as they first appear. Allocations still live at the end
  stay live in the trace and are reported on stderr (count and bytes). Frees of
  allocations made before recording started (or lost from a full history
  buffer) are skipped and reported.

Every line written is one the trace reader reads (docs/trace-format.md):
at most 65535 bytes (a longer comment, such as a saved allocator setting
of 100 KiB, is cut to fit and says so), marker names of at most 63 bytes
that are not one of the replay's own step names ("start of trace", "peak
reserved", "end of trace", "event N": such a name gets " (marker)").

The snapshot is read once (vrambench.results.read_input: a pipe or FIFO
works, at most $VB_SPOOL_LIMIT bytes, default 4 GiB, compressed or not: a
gzip-compressed snapshot is read too); '-' reads stdin, and
--name says what to call it in messages. OUT is written through
vrambench.output (a temporary file beside it, then a rename; a symlink,
FIFO or directory is refused, and so is OUT when it is the snapshot
itself); '-' writes the trace to stdout. An OUT name ending in .gz is
written gzip-compressed. Exit status: 0 done, 2 bad input (unreadable or
malformed snapshot, no trace entries, an unusable OUT), 1 other failures.
"""

import gzip
import io
import os
import pickle
import re
import stat
import sys
import unicodedata

if __package__ in (None, ""):  # run as a script: the package vrambench is one folder up
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from vrambench import arguments  # noqa: E402
from vrambench import output as _output  # noqa: E402
from vrambench import results as _results  # noqa: E402

FREE_AT_CHOICES = ("free_completed", "free_requested")
SEGMENT_ACTIONS = ("segment_alloc", "segment_free", "segment_map", "segment_unmap")
MAX_STREAMS = 1024  # app/trace.h VB_TRACE_MAX_STREAMS
MAX_MARKER_BYTES = 63  # app/trace.h VB_TRACE_MAX_NAME
MAX_LINE_BYTES = 65535  # app/trace.c: a line (without its newline) fits the reader's 64 KiB buffer
# The replay's own step names (app/replay.c): a marker may not take one.
REPLAY_STEP_NAMES = ("start of trace", "peak reserved", "end of trace")
SPOOL_LIMIT_ENV = "VB_SPOOL_LIMIT"  # app/input_file.h: the bound on what is read of a pipe
DEFAULT_INPUT_LIMIT = 4 << 30
UINT64_LIMIT = 1 << 64  # sizes, addresses and streams are unsigned 64-bit in the trace
RECORD_HINT = (
    "record with torch.cuda.memory._record_memory_history(max_entries=N) before the "
    "workload and save with torch.cuda.memory._dump_snapshot(PATH) before turning it off"
)


class InputError(Exception):
    """Bad input: reported as one line, exit status 2."""


class _PlainDataUnpickler(pickle.Unpickler):
    """Unpickles only plain data: a memory snapshot is dicts, lists, tuples,
    strings and numbers, so any reference to a class or function means the
    file is something else (and must not get to run code)."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(
            f"it refers to {module}.{name}, and a memory snapshot holds only plain data"
        )


# A size as the C commands read one (app/cli_common.c, vb_cli_parse_bytes):
# digits, a fraction, a unit K, M, G or T in any case, then B or iB (or B alone).
_SIZE = re.compile(r"([0-9]+)(?:\.([0-9]+))?(?:([kmgt])(?:i?b)?|b)?", re.IGNORECASE | re.ASCII)


def _input_limit():
    """The most bytes of a snapshot read: $VB_SPOOL_LIMIT (a size as the C
    commands read it: 4GiB, 512m, 1.5G), else 4 GiB."""
    text = os.environ.get(SPOOL_LIMIT_ENV, "")
    if not text:
        return DEFAULT_INPUT_LIMIT
    match = _SIZE.fullmatch(text)
    limit = None
    if match:
        whole, fraction, unit = match.group(1), match.group(2) or "", (match.group(3) or "").upper()
        scale = 1 << (10 * " KMGT".index(unit)) if unit else 1
        numerator = (int(whole) * 10 ** len(fraction) + int(fraction or "0")) * scale
        if numerator % 10 ** len(fraction) == 0:
            limit = numerator // 10 ** len(fraction)
    if not limit or limit >= UINT64_LIMIT:
        raise InputError(f"{SPOOL_LIMIT_ENV}={_shown(text)!r} is not a byte count (e.g. 4GiB, 512M)")
    return limit


def load_snapshot(path, name=None):
    """Reads the pickled snapshot at `path` ('-': stdin; named `name` in
    messages) once, gunzipped when it is compressed, then unpickles plain
    data only."""
    path_shown = name if name is not None else path
    limit = _input_limit()
    # $VB_SPOOL_LIMIT bounds what is read once from a pipe or a device, as
    # the C commands bound it (docs/cli.md): a regular file is read whole.
    try:
        info = os.fstat(0) if path == "-" else os.stat(path)
        read_limit = max(limit, info.st_size) if stat.S_ISREG(info.st_mode) else limit
    except OSError:
        read_limit = limit  # read_input names what is wrong with it
    try:
        data = _results.read_input(path, read_limit, "memory snapshot", name=path_shown)
    except _results.InputError as error:
        raise InputError(f"cannot read {error}") from None
    path = path_shown
    if data[:2] == b"\x1f\x8b":
        try:
            data = _results.gunzip(data, limit, path, "memory snapshot", f" (${SPOOL_LIMIT_ENV})")
        except _results.InputError as error:
            raise InputError(str(error)) from None
    try:
        # From memory: a length field asking for 2^62 bytes then meets the
        # end of the data ("truncated"), not a 2^62-byte read.
        stream = io.BytesIO(data)
        snapshot = _PlainDataUnpickler(stream).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError,
            OverflowError, MemoryError, RecursionError, UnicodeError) as error:
        reason = " ".join(str(error).split())[:200] or type(error).__name__
        raise InputError(f"{_shown(path)} is not a memory snapshot pickle: {reason}") from None
    # The unpickler stops at the first pickle's end: what follows (a second
    # snapshot appended, a damaged copy) would be dropped without a word.
    if stream.tell() != len(data):
        raise InputError(f"{_shown(path)}: {len(data) - stream.tell()} bytes after the end of the snapshot's pickle "
                         "(two snapshots in one file, or a damaged copy?)")
    if not isinstance(snapshot, dict) or not isinstance(snapshot.get("device_traces"), list):
        raise InputError(
            f"{_shown(path)} is not a memory snapshot: no 'device_traces' list "
            "(expected the file torch.cuda.memory._dump_snapshot() writes)"
        )
    return snapshot


class Summary:
    """What a conversion did, for the report on stderr."""

    def __init__(self):
        self.allocations = 0
        self.frees = 0
        self.markers = 0
        self.ooms = 0  # out-of-memory entries carried as `o` lines
        self.segment_entries = 0
        self.skipped_frees = 0  # of allocations made before recording started
        self.reallocated_live = 0  # an alloc at an address that was still live
        self.unknown_actions = {}
        self.live_count = 0
        self.live_bytes = 0
        self.streams = 0
        self.cut_comments = 0  # comment lines cut to the reader's line length


_shown = _output.shown


def _has_control(text):
    """True when `text` holds a control character (NUL, newline, ...) or a
    lone surrogate: it cannot go into a trace line as it is."""
    return any(unicodedata.category(c) in ("Cc", "Cs") for c in text)


def _is_uint64(value):
    """An int (not a bool) in 0 .. 2^64-1."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < UINT64_LIMIT


def _marker_name(text, path, what):
    """A step-marker name: one line, no surrounding blanks, at most 63 bytes
    of UTF-8. A name that is not a string or holds a control character is
    refused: it could end the marker's line and start another."""
    if not isinstance(text, str):
        raise InputError(f"{_shown(path)}: {what} has a name that is not a string")
    if _has_control(text):
        raise InputError(f"{_shown(path)}: {what} has a name with a control character (NUL, newline, ...)")
    name = " ".join(text.split())
    encoded = name.encode("utf-8")[:MAX_MARKER_BYTES]
    return _unreserved(encoded.decode("utf-8", errors="ignore").strip() or "marker")


def _is_replay_step(name):
    """True for one of the replay's own step names (app/replay.c)."""
    return name in REPLAY_STEP_NAMES or (name.startswith("event ") and name[6:].isdigit())


def _unreserved(name):
    """`name`, with " (marker)" added (the name cut to fit) when it is one of
    the replay's own step names, which the replay refuses as a marker."""
    if not _is_replay_step(name):
        return name
    suffix = " (marker)"
    room = MAX_MARKER_BYTES - len(suffix)
    return name.encode("utf-8")[:room].decode("utf-8", errors="ignore").rstrip() + suffix


def _comment(text):
    """A comment line ("# text") that the reader reads: cut to
    MAX_LINE_BYTES bytes of UTF-8 (saying so) when longer."""
    line = "# " + text
    encoded = line.encode("utf-8")
    if len(encoded) <= MAX_LINE_BYTES:
        return line + "\n"
    note = f" ... [cut: {len(encoded)} bytes, longer than a trace line may be]"
    kept = encoded[:MAX_LINE_BYTES - len(note.encode("utf-8"))].decode("utf-8", errors="ignore")
    return kept + note + "\n"


def _annotations(snapshot, device, path):
    """(time_us, name) of the record_function scopes that started on `device`, by time."""
    starts = []
    annotations = snapshot.get("external_annotations") or []
    if not isinstance(annotations, list):
        raise InputError(f"{_shown(path)}: 'external_annotations' is not a list")
    for index, entry in enumerate(annotations):
        # An annotation of the wrong shape is refused, as a bad trace entry
        # is: skipped, its marker went missing from the trace without a word.
        what = f"{_shown(path)}: external_annotations[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("stage"), str):
            raise InputError(f"{what} is not an annotation (an object with a 'stage')")
        where = entry.get("device", device)
        if not isinstance(where, int) or isinstance(where, bool):
            raise InputError(f"{what} has a 'device' that is not a whole number")
        if entry["stage"] != "START" or where != device:
            continue
        if not _is_uint64(entry.get("time_us")):
            raise InputError(f"{what} has no valid 'time_us' (a whole number 0 .. 2^64-1)")
        starts.append((entry["time_us"], _marker_name(entry.get("name", "scope"), path, f"annotation {index}")))
    starts.sort(key=lambda start: start[0])
    return starts


def _device_entries(snapshot, device, path):
    """The trace entries of `device`, or an InputError saying how to get some."""
    traces = snapshot["device_traces"]
    for index, trace in enumerate(traces):
        if not isinstance(trace, list):
            raise InputError(f"{_shown(path)}: device_traces[{index}] is not a list of trace entries")
    recorded = [index for index, trace in enumerate(traces) if trace]
    if not recorded:
        raise InputError(f"{_shown(path)} has no trace entries: {RECORD_HINT}")
    if device < 0 or device >= len(traces) or not traces[device]:
        raise InputError(
            f"{_shown(path)} has no trace entries for device {device}; "
            f"device(s) {', '.join(map(str, recorded))} have some: convert one with torch2trace's --device "
            f"(python3 python/vrambench/torch2trace.py --device {recorded[0]} SNAPSHOT OUT.trace)"
        )
    return traces[device]


# The fields an action that reaches the trace needs as whole numbers 0 .. 2^64-1 (its stream
# is checked too): an oom has no address (PyTorch records none), but its size and stream
# become the `o` line, so a bad one is refused as an alloc's is, never dropped or made 0.
NUMBER_FIELDS = {"alloc": ("addr", "size"), "free_requested": ("addr", "size"),
                 "free_completed": ("addr", "size"), "oom": ("size",)}


def _check_entry(entry, index, path):
    """The action of a trace entry, after checking the fields it needs."""
    if not isinstance(entry, dict) or not isinstance(entry.get("action"), str):
        raise InputError(f"{_shown(path)}: trace entry {index} is not a trace entry (no 'action')")
    action = entry["action"]
    time_us = entry.get("time_us")
    if time_us is not None and not _is_uint64(time_us):  # it places the annotations' markers
        raise InputError(f"{_shown(path)}: trace entry {index} ({_shown(action)}) has an invalid 'time_us' "
                         "(a whole number 0 .. 2^64-1)")
    if action in NUMBER_FIELDS:
        for key in NUMBER_FIELDS[action]:
            if not _is_uint64(entry.get(key)):
                raise InputError(
                    f"{_shown(path)}: trace entry {index} ({_shown(action)}) has no valid '{key}' "
                    "(a whole number 0 .. 2^64-1)")
        stream = entry.get("stream", 0)
        if stream is not None and not _is_uint64(stream):
            raise InputError(f"{_shown(path)}: trace entry {index} ({_shown(action)}) has an invalid 'stream'")
    return action


def convert(snapshot, out, device=0, free_at="free_completed", path="snapshot"):
    """Writes the trace of `device` from `snapshot` to the text stream `out`;
    returns a Summary. Raises InputError for a snapshot it cannot convert."""
    if free_at not in FREE_AT_CHOICES:
        raise InputError(f"--free-at must be one of {', '.join(FREE_AT_CHOICES)}")
    entries = _device_entries(snapshot, device, path)
    ignored_free = FREE_AT_CHOICES[1 - FREE_AT_CHOICES.index(free_at)]
    actions = [_check_entry(entry, index, path) for index, entry in enumerate(entries)]
    # Nothing a replay could do (segment entries, unknown actions, allocations
    # of 0 bytes only): the trace written was refused by every command later.
    if not any((action == "alloc" and entry["size"] > 0) or action == "oom" for entry, action in zip(entries, actions)):
        raise InputError(f"{_shown(path)}: device {device}'s {len(entries)} trace entries hold no allocation of a "
                         "byte or more and no out-of-memory: nothing to replay")
    if snapshot.get("allocator_settings") is not None and not isinstance(snapshot["allocator_settings"], dict):
        raise InputError(f"{_shown(path)}: 'allocator_settings' is not an object")
    if "alloc" in actions and free_at not in actions and ignored_free in actions:
        raise InputError(
            f"{_shown(path)} has no {free_at} entries (were they skipped while recording?): "
            f"use --free-at {ignored_free}"
        )

    summary = Summary()
    live = {}  # address -> (id, size)
    streams = {0: 0}
    annotations = _annotations(snapshot, device, path)
    next_annotation = 0
    write = out.write

    def stream_id(stream):
        if stream not in streams:
            if len(streams) == MAX_STREAMS:
                raise InputError(f"{_shown(path)}: more than {MAX_STREAMS} streams")
            streams[stream] = len(streams)
        return streams[stream]

    def mark(name):
        write(f"m {name}\n")
        summary.markers += 1

    write("vbtrace 1\n")
    write(_comment(f"converted by python/vrambench/torch2trace.py from {_shown(os.path.basename(path))}: "
                   f"device {device}, frees at {free_at}"))
    settings = snapshot.get("allocator_settings")
    # The settings' text, under the name the snapshot's PyTorch gives it.
    key = next((name for name in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")
                if isinstance(settings, dict) and settings.get(name)), None)
    if key:
        conf = settings[key]
        if not isinstance(conf, str) or _has_control(conf):
            raise InputError(f"{_shown(path)}: allocator_settings' {key} is not one line of text")
        summary.cut_comments += len(f"# recorded with {key}={conf}".encode("utf-8")) > MAX_LINE_BYTES
        write(_comment(f"recorded with {key}={conf}"))

    for entry, action in zip(entries, actions):
        time_us = entry.get("time_us")
        if _is_uint64(time_us):
            while next_annotation < len(annotations) and annotations[next_annotation][0] <= time_us:
                mark(annotations[next_annotation][1])
                next_annotation += 1
        if action == "alloc":
            address = entry["addr"]
            if address in live:
                # The free of the earlier block at this address is missing: end it here.
                old_id, old_size = live.pop(address)
                write(f"f {old_id}\n")
                summary.frees += 1
                summary.reallocated_live += 1
            allocation_id = summary.allocations
            live[address] = (allocation_id, entry["size"])
            write(f"a {allocation_id} {entry['size']} {stream_id(entry.get('stream', 0) or 0)}\n")
            summary.allocations += 1
        elif action == free_at:
            allocation = live.pop(entry["addr"], None)
            if allocation is None:
                summary.skipped_frees += 1
                continue
            write(f"f {allocation[0]} {stream_id(entry.get('stream', 0) or 0)}\n")
            summary.frees += 1
        elif action == ignored_free or action in SEGMENT_ACTIONS:
            summary.segment_entries += action in SEGMENT_ACTIONS
        elif action == "oom":
            free = entry.get("device_free")  # only told in a comment: shown when it is a number
            write(_comment(f"oom: {entry['size']} bytes asked, {free if _is_uint64(free) else '?'} "
                           "free on the device"))
            mark("oom")
            write(f"o {entry['size']} {stream_id(entry.get('stream', 0) or 0)}\n")
            summary.ooms += 1
        elif action == "snapshot":
            mark("snapshot")
        else:
            summary.unknown_actions[_shown(action)[:60]] = summary.unknown_actions.get(_shown(action)[:60], 0) + 1
    while next_annotation < len(annotations):
        mark(annotations[next_annotation][1])
        next_annotation += 1

    summary.live_count = len(live)
    summary.live_bytes = sum(size for _, size in live.values())
    summary.streams = len(streams)
    return summary


def _report(summary, done):
    """The conversion's summary and warnings, on stderr; `done` says what
    was made ("wrote OUT", or "converted SNAPSHOT" when the trace went to
    stdout, as tune and explain read it)."""
    say = lambda text: print(f"torch2trace: {text}", file=sys.stderr)
    say(f"{done}: {summary.allocations} allocations, {summary.frees} frees, "
        f"{summary.markers} markers, {summary.streams} stream(s); "
        f"{summary.segment_entries} segment entries not replayed")
    if summary.ooms:
        say(f"the recording ran out of memory {summary.ooms} time(s): carried as 'o SIZE STREAM' lines "
            "(vrambench explain replays the first)")
    if summary.live_count:
        say(f"{summary.live_count} allocations ({summary.live_bytes} bytes) are still live at the end "
            "of the trace; they stay live in it (the replay reports them as live_at_end)")
    if summary.skipped_frees:
        say(f"skipped {summary.skipped_frees} frees of allocations made before recording started "
            "(or dropped from a full history: raise max_entries)")
    if summary.reallocated_live:
        say(f"{summary.reallocated_live} allocations reused a live address; "
            "the earlier allocation was freed just before")
    if summary.cut_comments:
        say(f"the saved allocator setting is longer than a trace line may be ({MAX_LINE_BYTES} bytes): "
            "its comment line is cut")
    for action, count in sorted(summary.unknown_actions.items()):
        say(f"ignored {count} entries with unknown action '{action}'")


def _write_trace(out, compressed, write_trace):
    """Calls write_trace(text stream) on the binary file `out`, gzip-compressed
    when asked; returns what it returned."""
    packed = gzip.GzipFile(fileobj=out, mode="wb", compresslevel=6, mtime=0) if compressed else None
    text = io.TextIOWrapper(packed or out, encoding="utf-8", newline="\n")
    try:
        result = write_trace(text)
        text.flush()
    finally:
        # Detached on every path: a wrapper left to the garbage collector
        # (write_trace raised on bad input) closes the file under it, and
        # with it stdout, whose flush at exit then raised a traceback.
        text.detach()
    if packed:
        packed.close()  # the gzip trailer; `out` stays open
    return result


def main(argv=None):
    parser = arguments.Parser(
        prog="torch2trace.py",
        description="Convert a torch.cuda.memory._dump_snapshot() pickle into a vrambench trace.",
    )
    parser.add_argument("snapshot", metavar="SNAPSHOT.pickle")
    parser.add_argument("out", metavar="OUT.trace", help="the trace to write (.gz: compressed)")
    parser.add_argument("--device", type=int, default=0, help="which device's trace (default 0)")
    parser.add_argument("--free-at", choices=FREE_AT_CHOICES, default="free_completed",
                        help="which trace entry frees a block (default free_completed)")
    parser.add_argument("--name", help="what to call the snapshot in messages (default: its path)")
    parser.add_argument("--quiet", action="store_true", help="errors only: no summary or warnings on stderr")
    args = parser.parse_args(argv)
    name = args.name if args.name is not None else args.snapshot

    try:
        if args.out != "-":
            _output.check_distinct([("the snapshot", None if args.snapshot == "-" else args.snapshot, False),
                                    ("OUT", args.out, True)])
            _output.check_target(args.out)
        snapshot = load_snapshot(args.snapshot, name)
        produce = lambda out: _write_trace(out, args.out.endswith(".gz"),
                                           lambda text: convert(snapshot, text, args.device, args.free_at, name))
        if args.out == "-":
            summary = produce(sys.stdout.buffer)
            sys.stdout.buffer.flush()
        else:
            summary = _output.write_file(args.out, produce)
    except (InputError, _output.OutputError) as error:
        print(f"torch2trace: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"torch2trace: error: cannot write {_shown(args.out)}: {error.strerror or error}", file=sys.stderr)
        return 1
    except (RecursionError, MemoryError, OverflowError, TypeError, ValueError, AttributeError) as error:
        # Data shaped in a way no check above foresaw: still bad input, one line.
        reason = " ".join(str(error).split())[:200]
        print(f"torch2trace: error: {_shown(name)}: cannot convert: {type(error).__name__}: {_shown(reason)}",
              file=sys.stderr)
        return 2
    if not args.quiet:
        _report(summary, f"converted {_shown(name)}" if args.out == "-" else f"wrote {_shown(args.out)}")
    return 0


def run():
    """The command (`python3 torch2trace.py`, vrambench-torch2trace): main()
    with SIGINT, SIGTERM and SIGHUP ending it without a traceback, its
    temporary file removed (vrambench.output.run_main)."""
    _output.run_main(main, "torch2trace")


if __name__ == "__main__":
    run()
