#!/usr/bin/env python3
"""Convert a PyTorch CUDA memory snapshot into a vrambench trace.

    tools/torch2trace.py SNAPSHOT.pickle OUT.trace [--device N]
                         [--free-at free_completed|free_requested]

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
  oom, snapshot           -> `m oom`, `m snapshot` step markers
  record_function scopes  -> `m NAME` at their start, from the snapshot's
                             'external_annotations' (torch records them while
                             memory history is on)
  segment_alloc/free/map/unmap are the recording allocator's own business and
  are not replayed. Streams: 0 (the default stream) stays 0, the others are
  numbered 1, 2, ... as they first appear. Allocations still live at the end
  stay live in the trace and are reported on stderr (count and bytes). Frees of
  allocations made before recording started (or lost from a full history
  buffer) are skipped and reported.

An OUT name ending in .gz is written gzip-compressed. Exit status: 0 done,
2 bad input (unreadable or malformed snapshot, no trace entries), 1 other
failures.
"""

import argparse
import gzip
import io
import os
import pickle
import stat
import sys
import tempfile
import unicodedata

FREE_AT_CHOICES = ("free_completed", "free_requested")
SEGMENT_ACTIONS = ("segment_alloc", "segment_free", "segment_map", "segment_unmap")
MAX_STREAMS = 1024  # app/trace.h VB_TRACE_MAX_STREAMS
MAX_MARKER_BYTES = 63  # app/trace.h VB_TRACE_MAX_NAME
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


def load_snapshot(path):
    """Reads the pickled snapshot at `path` (plain data only)."""
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as error:
        raise InputError(f"cannot read {_shown(path)}: {error.strerror or error}") from None
    try:
        # From memory: a length field asking for 2^62 bytes then meets the
        # end of the data ("truncated"), not a 2^62-byte read.
        snapshot = _PlainDataUnpickler(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError,
            OverflowError, MemoryError, RecursionError, UnicodeError) as error:
        reason = " ".join(str(error).split())[:200] or type(error).__name__
        raise InputError(f"{_shown(path)} is not a memory snapshot pickle: {reason}") from None
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
        self.segment_entries = 0
        self.skipped_frees = 0  # of allocations made before recording started
        self.reallocated_live = 0  # an alloc at an address that was still live
        self.unknown_actions = {}
        self.live_count = 0
        self.live_bytes = 0
        self.streams = 0


def _shown(text):
    """`text` (a file name, perhaps not UTF-8) safe for one line: control
    characters and undecodable bytes become '?'."""
    text = os.fsdecode(text) if isinstance(text, bytes) else str(text)
    text = text.encode("utf-8", errors="replace").decode("utf-8", errors="replace")
    return "".join("?" if unicodedata.category(c) in ("Cc", "Cs") else c for c in text)


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
    return encoded.decode("utf-8", errors="ignore").strip() or "marker"


def _annotations(snapshot, device, path):
    """(time_us, name) of the record_function scopes that started on `device`, by time."""
    starts = []
    annotations = snapshot.get("external_annotations") or []
    if not isinstance(annotations, list):
        raise InputError(f"{_shown(path)}: 'external_annotations' is not a list")
    for index, entry in enumerate(annotations):
        if not isinstance(entry, dict) or entry.get("stage") != "START":
            continue
        where = entry.get("device", device)
        if not isinstance(where, int) or isinstance(where, bool) or where != device or not _is_uint64(entry.get("time_us")):
            continue
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
            f"device(s) {', '.join(map(str, recorded))} have some: use --device"
        )
    return traces[device]


def _check_entry(entry, index, path):
    """The action of a trace entry, after checking the fields it needs."""
    if not isinstance(entry, dict) or not isinstance(entry.get("action"), str):
        raise InputError(f"{_shown(path)}: trace entry {index} is not a trace entry (no 'action')")
    action = entry["action"]
    if action in ("alloc",) + FREE_AT_CHOICES:
        for key in ("addr", "size"):
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
    write(f"# converted by tools/torch2trace.py from {_shown(os.path.basename(path))}: device {device}, "
          f"frees at {free_at}\n")
    settings = snapshot.get("allocator_settings")
    # The settings' text, under the name the snapshot's PyTorch gives it.
    key = next((name for name in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")
                if isinstance(settings, dict) and settings.get(name)), None)
    if key:
        conf = settings[key]
        if not isinstance(conf, str) or _has_control(conf):
            raise InputError(f"{_shown(path)}: allocator_settings' {key} is not one line of text")
        write(f"# recorded with {key}={conf}\n")

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
            number = lambda key: entry[key] if _is_uint64(entry.get(key)) else "?"
            write(f"# oom: {number('size')} bytes asked, {number('device_free')} free on the device\n")
            mark("oom")
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


def _report(summary, out_path):
    """The conversion's summary and warnings, on stderr."""
    say = lambda text: print(f"torch2trace: {text}", file=sys.stderr)
    say(f"wrote {out_path}: {summary.allocations} allocations, {summary.frees} frees, "
        f"{summary.markers} markers, {summary.streams} stream(s); "
        f"{summary.segment_entries} segment entries not replayed")
    if summary.live_count:
        say(f"{summary.live_count} allocations ({summary.live_bytes} bytes) are still live at the end "
            "of the trace; they stay live in it (the replay reports them as live_at_end)")
    if summary.skipped_frees:
        say(f"skipped {summary.skipped_frees} frees of allocations made before recording started "
            "(or dropped from a full history: raise max_entries)")
    if summary.reallocated_live:
        say(f"{summary.reallocated_live} allocations reused a live address; "
            "the earlier allocation was freed just before")
    for action, count in sorted(summary.unknown_actions.items()):
        say(f"ignored {count} entries with unknown action '{action}'")


def _check_output(path):
    """Refuses, before any work, an output that is not a regular file or a
    new one (a symlink, device, directory, FIFO: it would be replaced), or
    whose directory is missing."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as error:
        raise InputError(f"cannot write {_shown(path)}: {error.strerror or error}") from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise InputError(f"cannot write {_shown(path)}: it is not a regular file (an output replaces only one)")
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        raise InputError(f"cannot write {_shown(path)}: no directory {_shown(directory)}")


def _write_output(path, compressed, write_trace):
    """Calls write_trace(text stream) on a new temporary file in `path`'s
    directory (never an existing file), fsyncs it and renames it over
    `path`; on any failure removes only that temporary file."""
    fd, temporary = tempfile.mkstemp(prefix=".torch2trace-", dir=os.path.dirname(path) or ".")
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)
        with os.fdopen(fd, "wb") as raw:
            packed = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) if compressed else None
            out = io.TextIOWrapper(packed or raw, encoding="utf-8", newline="\n")
            result = write_trace(out)
            out.flush()
            out.detach()  # closing the wrapper would close the file under it
            if packed:
                packed.close()  # the gzip trailer; `raw` stays open
            raw.flush()
            os.fsync(raw.fileno())
        info = os.lstat(path) if os.path.lexists(path) else None
        if info is not None and not stat.S_ISREG(info.st_mode):
            raise InputError(f"cannot write {_shown(path)}: it is no longer a regular file")
        os.replace(temporary, path)
        return result
    except BaseException:
        try:
            os.remove(temporary)
        except OSError:
            pass
        raise


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="torch2trace.py",
        description="Convert a torch.cuda.memory._dump_snapshot() pickle into a vrambench trace.",
    )
    parser.add_argument("snapshot", metavar="SNAPSHOT.pickle")
    parser.add_argument("out", metavar="OUT.trace", help="the trace to write (.gz: compressed)")
    parser.add_argument("--device", type=int, default=0, help="which device's trace (default 0)")
    parser.add_argument("--free-at", choices=FREE_AT_CHOICES, default="free_completed",
                        help="which trace entry frees a block (default free_completed)")
    args = parser.parse_args(argv)

    try:
        _check_output(args.out)
        snapshot = load_snapshot(args.snapshot)
        summary = _write_output(
            args.out, args.out.endswith(".gz"),
            lambda out: convert(snapshot, out, args.device, args.free_at, args.snapshot))
    except InputError as error:
        print(f"torch2trace: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"torch2trace: error: cannot write {_shown(args.out)}: {error.strerror or error}", file=sys.stderr)
        return 1
    except (RecursionError, MemoryError, OverflowError, TypeError, ValueError, AttributeError) as error:
        # Data shaped in a way no check above foresaw: still bad input, one line.
        reason = " ".join(str(error).split())[:200]
        print(f"torch2trace: error: {_shown(args.snapshot)}: cannot convert: {type(error).__name__}: {_shown(reason)}",
              file=sys.stderr)
        return 2
    _report(summary, _shown(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
