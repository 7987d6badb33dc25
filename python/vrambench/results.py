"""The results model: vrambench's JSON files read, checked and folded.

One loader for every tool that reads results (python/vrambench/plots/figures.py through
python/vrambench/plots/cli.py, python/vrambench/results_tables.py): a `vrambench run` or `replay`
result, a `microbench` result and a `claims` file, as docs/results-json.md
describes them. Standard library only, so that bad input is reported even
where matplotlib is missing.

Every check is here: types, ranges, finiteness. A file that fails one is
an InputError whose message names the file and the place; nothing else is
raised for bad input (deep nesting, NaN, a number of a million digits, a
2 GB file: all InputError).
"""

import datetime
import glob
import json
import math
import os
import re
import select
import stat
import statistics
import sys
import zlib

from vrambench.arguments import did_you_mean
from vrambench.output import shown as _shown

PROG = "vrambench.plots"

TIME_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}

# Bounds on what a results file may hold. Byte counts and addresses fit in
# 64 bits; any other figure is below 2^64 in magnitude too (nothing vrambench
# measures comes near it); a file is at most MAX_FILE_BYTES (a full bench run
# is about 2 MB); a name at most MAX_NAME_CHARS.
MAX_UINT64 = (1 << 64) - 1
MAX_MAGNITUDE = float(1 << 64)
MAX_FILE_BYTES = 256 << 20
MAX_NAME_CHARS = 1024
MAX_REPETITION = 1 << 20


class InputError(Exception):
    """Bad input: the message is for the user; exit status 2."""


def note(message):
    """Prints a one-line note (a skipped plot, a chosen file) on stderr."""
    print(f"{PROG}: note: {_shown(message)}", file=sys.stderr)  # one line, whatever a file is called


def is_number(value):
    """True for a finite JSON number (booleans are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:          # an int too large for a float
        return False


def mib_up(size, places):
    """A minimum capacity of `size` bytes in MiB, rounded up to `places`
    decimals: shown to the nearest, a minimum could read below the bytes
    it stands for, a capacity under which the trace runs out."""
    scale = 10 ** places
    return math.ceil(size * scale / (1 << 20)) / scale


def in_range(value, low, high):
    """True for a finite number with low <= value <= high."""
    return is_number(value) and low <= value <= high


def check_text(value, where, what):
    """value when it is a string a figure can show: at most MAX_NAME_CHARS,
    no control characters; InputError otherwise."""
    if not isinstance(value, str):
        raise InputError(f"{where}: '{what}' is not a string")
    if len(value) > MAX_NAME_CHARS:
        raise InputError(f"{where}: '{what}' is longer than {MAX_NAME_CHARS} characters")
    if any(ord(char) < 0x20 or 0x7f <= ord(char) <= 0x9f for char in value):
        raise InputError(f"{where}: '{what}' holds a control character")
    return value


# --------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------

class Run:
    """One SCENARIO/ALLOCATOR of a results file, its repetitions folded:
    numbers are medians over the repetitions, the timeline and segment map
    come from the lowest repetition_index (0)."""

    def __init__(self, name, scenario, allocator, path):
        self.name = name
        self.path = path           # the file it was read from, for messages
        self.scenario = scenario
        self.allocator = allocator
        self.samples = {}          # counter -> values, one per repetition
        self.values = {}           # counter -> median
        self.real_time_ns = None
        self.timeline = None       # [{step, requested, allocated, reserved, driver_used}]
        self.segments = None       # [{address, size, stream, blocks: [...]}]
        self.detail_repetition = None


class CounterFamilies:
    """A scenario's counter families (docs/results-json.md, "names"): one
    counter per member and family, e.g. member every10 (parameter 10) of
    family iter_ns is the counter every10_iter_ns."""

    def __init__(self, member_parameter, members, families):
        self.member_parameter = member_parameter
        self.members = members     # [(name, parameter)] in the scenario's order
        self.families = families   # {family: {member name: counter}}

    def counter(self, family, member):
        """The counter name of `family` for member name `member`, or None."""
        return self.families.get(family, {}).get(member)


class ScenarioNames:
    """The names a scenario defines: its steps by key, its counters, its
    counter families (None when it has none)."""

    def __init__(self, steps, counters, families):
        self.steps = steps         # {key: text}
        self.counters = counters   # [name]
        self.families = families


class Result:
    """A parsed results file: its context, runs, microbench entries and the
    names of its scenarios."""

    def __init__(self, path, context):
        self.path = path
        self.context = context
        self.runs = []             # in file order
        self.microbench = []       # (allocator, bytes, values)
        self.names = {}            # scenario (as entries name it) -> ScenarioNames

    @property
    def device_name(self):
        return self.context.get("device_name") or "unknown device"

    @property
    def simulated(self):
        return self.context.get("simulated") is True

    @property
    def device(self):
        """What tells two devices apart: (device name, simulated)."""
        return (self.device_name, self.simulated)

    @property
    def date(self):
        """The run's date as 'YYYY-MM-DD HH:MM', or '' when absent."""
        text = self.context.get("date")
        if not isinstance(text, str):
            return ""
        try:
            return datetime.datetime.fromisoformat(text).strftime("%Y-%m-%d %H:%M")
        except ValueError:
            return text

    def device_label(self):
        """What every title says: the device, '(simulated)' on sim, the date."""
        label = self.device_name + (" (simulated)" if self.simulated else "")
        return f"{label} · {self.date}" if self.date else label

    def file_label(self):
        """A comparison's name for this file: device, date, commit."""
        label = self.device_label()
        commit = self.context.get("git_commit")
        if isinstance(commit, str) and commit and commit != "unknown":
            label += f" · {commit[:10]}"
        return label

    def has_timelines(self):
        return any(run.timeline for run in self.runs)

    def families(self, scenario):
        """The counter families of `scenario`: from the file's "names", else
        (a file written before it had them) from docs/names.json; None
        when neither defines any."""
        names = self.names.get(scenario) or catalogue_names().get(scenario)
        return names.families if names else None


class Claims:
    """A `vrambench claims` file: its context, catalogue and decisions."""

    def __init__(self, path, context, catalogue, claims):
        self.path = path
        self.context = context
        self.catalogue = catalogue  # [{id, documents, claim, scenario, ...}]
        self.claims = claims        # [{id, allocator, verdict, reason, ...}]


# `vrambench list names --json`, committed (tests/test_names.py keeps it equal).
NAMES_CATALOGUE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                               "docs", "names.json")
_catalogue = None


def catalogue_names():
    """{scenario: ScenarioNames} of docs/names.json; {} when it is missing
    or malformed (then only files with their own "names" have families)."""
    global _catalogue
    if _catalogue is None:
        try:
            raw = read_json(NAMES_CATALOGUE)
            _catalogue = check_names(raw.get("scenarios") if isinstance(raw, dict) else None,
                                     NAMES_CATALOGUE)
        except InputError:
            _catalogue = {}
    return _catalogue


def same_device(a, b):
    """True when two results come from the same device."""
    return a.device == b.device


# --------------------------------------------------------------------------
# Reading JSON
# --------------------------------------------------------------------------

def reject_constant(name):
    """json's hook for NaN, Infinity and -Infinity: none is JSON."""
    raise ValueError(f"{name} is not a JSON number")


def refuse_duplicate_keys(pairs):
    """json's hook for an object: it as a dict, or ValueError for a key it
    names twice, which json alone would take the last value of without a word
    (the C readers refuse it too: "duplicate object key")."""
    document = dict(pairs)
    if len(document) != len(pairs):  # rare: only then is each key looked at
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate object key '{abbreviate_key(key)}'")
            seen.add(key)
    return document


def parse_json(text):
    """The document of JSON `text`, as every Python tool parses the JSON it
    is given: NaN, Infinity and a duplicated key are ValueErrors."""
    return json.loads(text, parse_constant=reject_constant, object_pairs_hook=refuse_duplicate_keys)


FIFO_NOTE_AFTER_SECONDS = 2.0


def byte_text(count):
    """A byte count as the limits are given: "256 MiB", "1 GiB", or "4097 bytes"."""
    return next((f"{count >> shift} {unit}" for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB"))
                 if count >= 1 << shift and count % (1 << shift) == 0), f"{count} bytes")


def read_input(path, limit, what="file", name=None):
    """The bytes of `path`, read once: the one way every Python tool reads
    a file it is given (results JSON, a tune result, a snapshot pickle), as
    app/input_file.c does for the C commands. A regular file is read where
    it is; anything else (a pipe, /dev/stdin, a FIFO, a device) is read once
    to its end. A FIFO is opened without blocking and waited on until its
    writer sends something or hangs up, with a note after two seconds
    (never a silent hang). '-' is stdin. More than `limit` bytes, a missing
    file, a directory or a read error is an InputError naming the path (or
    `name`, the name the user knows it by)."""
    name = _shown(path if name is None else name)
    try:
        info = os.fstat(0) if path == "-" else os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except OSError as error:
        raise InputError(f"{name}: cannot read it ({error.strerror or error})") from None
    if stat.S_ISDIR(info.st_mode):
        raise InputError(f"{name}: is a directory")
    size = byte_text(limit)
    if stat.S_ISREG(info.st_mode) and info.st_size > limit:
        raise InputError(f"{name}: larger than {size}: not a {what}")
    try:
        if path == "-":
            fd = os.dup(0)
        elif stat.S_ISFIFO(info.st_mode):
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        else:
            fd = os.open(path, os.O_RDONLY)
        if stat.S_ISFIFO(info.st_mode):
            blocking = os.get_blocking(fd)
            os.set_blocking(fd, False)
            waiting = select.poll()
            waiting.register(fd, select.POLLIN)
            if not waiting.poll(FIFO_NOTE_AFTER_SECONDS * 1000):
                print(f"{os.path.basename(sys.argv[0]) or 'vrambench'}: note: waiting for something to write "
                      f"to the FIFO {_shown(name)}", file=sys.stderr)
                waiting.poll()
            os.set_blocking(fd, True if path != "-" else blocking)
        with open(fd, "rb") as stream:
            chunks, total = [], 0
            while total <= limit:
                chunk = stream.read(min(1 << 20, limit + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
    except OSError as error:
        raise InputError(f"{name}: cannot read it ({error.strerror or error})") from None
    if total > limit:
        raise InputError(f"{name}: larger than {size}: not a {what}")
    return b"".join(chunks)


def gunzip(data, limit, name, what, limit_source=""):
    """The bytes the gzip file `data` inflates to (every member, as gunzip
    writes them), at most `limit` of them: the one gunzip of every Python
    tool. A file that inflates past the limit is refused before it is in
    memory (a few KiB can inflate to gigabytes), and a damaged or cut-short
    one is refused too; InputError naming `name`. `limit_source` says where
    the limit comes from, for the message."""
    out, total = [], 0
    while data:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = inflater.decompress(data, limit - total + 1)
        except zlib.error as error:
            raise InputError(f"{_shown(name)}: not a valid gzip file (damaged: {error})") from None
        total += len(chunk)
        if total > limit:
            raise InputError(f"{_shown(name)}: inflates to more than {byte_text(limit)}{limit_source}: "
                             f"not a {what}")
        if not inflater.eof:
            raise InputError(f"{_shown(name)}: not a valid gzip file (cut short)")
        out.append(chunk)
        data = inflater.unused_data
    return b"".join(out)


def read_json(path, what="results file", name=None):
    """The parsed JSON of path (parse_json); InputError for a missing,
    unreadable, oversized, non-UTF-8, non-JSON or too deeply nested file, or
    one with a duplicated key. Messages name the file `name` when given (a
    copy read in the user's file's place), else `path`."""
    label = path if name is None else name
    data = read_input(path, MAX_FILE_BYTES, what, label)
    if data[:2] == b"\x1f\x8b":  # gzip: the large committed results are stored compressed
        data = gunzip(data, MAX_FILE_BYTES, label, what)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{label}: not UTF-8 (byte {error.start})") from None
    try:
        document = parse_json(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{label}: not valid JSON ({error.msg} at line "
                         f"{error.lineno}, column {error.colno})") from None
    except RecursionError:
        raise InputError(f"{label}: not valid JSON (nested too deeply)") from None
    except (ValueError, MemoryError) as error:   # NaN, a number of 5000 digits, a duplicated key
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InputError(f"{label}: not valid JSON ({message})") from None
    if LONE_SURROGATE_ESCAPE.search(text):
        check_no_surrogates(document, label)
    return document


# A \uD800-\uDFFF escape: half of a UTF-16 pair, which JSON may write alone.
LONE_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def check_no_surrogates(document, path):
    """InputError when a string (or key) of the parsed document holds a lone
    UTF-16 surrogate ("\\ud800" unpaired): no UTF-8 text, page or plot can
    hold it."""
    pending = [document]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            pending.extend(value.keys())
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as error:
                raise InputError(f"{path}: not valid JSON text (a lone UTF-16 surrogate "
                                 f"\\u{ord(value[error.start]):04x}, which no UTF-8 text holds)") from None


def split_name(name):
    """(scenario, allocator) from 'SCENARIO/ALLOCATOR'; the allocator is the
    part after the last '/' outside brackets (a trace path has slashes, a
    config in brackets may too)."""
    depth = 0
    for index in range(len(name) - 1, -1, -1):
        char = name[index]
        if char == "]":
            depth += 1
        elif char == "[":
            depth -= 1
        elif char == "/" and depth == 0:
            return name[:index], name[index + 1:]
    return name, ""


def check_context(raw, where):
    """The context object, its fields that figures show type-checked."""
    context = raw
    for key in ("device_name", "date", "git_commit"):
        if key in context and context[key] is not None:
            check_text(context[key], where, f"context.{key}")
    if "simulated" in context and not isinstance(context["simulated"], bool):
        raise InputError(f"{where}: 'context.simulated' is not a boolean")
    return context


def check_timeline(timeline, where):
    """Validates an entry's "timeline" and returns it as a list of dicts with
    str step and numeric requested/allocated/reserved/driver_used."""
    if not isinstance(timeline, list):
        raise InputError(f"{where}: 'timeline' is not a list")
    samples = []
    for index, point in enumerate(timeline):
        if not isinstance(point, dict) or "step" not in point:
            raise InputError(f"{where}: timeline[{index}] is not an object with a 'step'")
        sample = {"step": check_text(point["step"], f"{where}: timeline[{index}]", "step")}
        for key in ("requested", "reserved"):
            if not in_range(point.get(key), 0, MAX_UINT64):
                raise InputError(f"{where}: timeline[{index}] has no '{key}' byte count "
                                 f"(a number from 0 to 2^64-1)")
            sample[key] = float(point[key])
        for key in ("allocated", "driver_used"):
            value = point.get(key)
            if value is not None and not in_range(value, 0, MAX_UINT64):
                raise InputError(f"{where}: timeline[{index}] '{key}' is not a byte count")
            sample[key] = float(value) if value is not None else None
        samples.append(sample)
    return samples


def check_segments(segments, where):
    """Validates an entry's "segments_at_peak" and returns it as a list of
    {address, size, stream, blocks: [{address, size, allocated}]}."""
    if not isinstance(segments, list):
        raise InputError(f"{where}: 'segments_at_peak' is not a list")
    checked = []
    for index, segment in enumerate(segments):
        seg_where = f"{where}: segments_at_peak[{index}]"
        if (not isinstance(segment, dict) or not in_range(segment.get("address"), 0, MAX_UINT64)
                or not in_range(segment.get("size"), 0, MAX_UINT64)):
            raise InputError(f"{seg_where} needs an 'address' and a 'size' from 0 to 2^64-1")
        blocks = segment.get("blocks", [])
        if not isinstance(blocks, list):
            raise InputError(f"{seg_where}: 'blocks' is not a list")
        checked_blocks = []
        for block_index, block in enumerate(blocks):
            if (not isinstance(block, dict) or not in_range(block.get("address"), 0, MAX_UINT64)
                    or not in_range(block.get("size"), 0, MAX_UINT64)
                    or not isinstance(block.get("allocated"), bool)):
                raise InputError(f"{seg_where}: blocks[{block_index}] needs an 'address' and "
                                 "'size' from 0 to 2^64-1 and a boolean 'allocated'")
            checked_blocks.append({"address": int(block["address"]),
                                   "size": int(block["size"]),
                                   "allocated": block["allocated"]})
        stream = segment.get("stream")
        if stream is not None and not in_range(stream, -(1 << 31), (1 << 31) - 1):
            raise InputError(f"{seg_where}: 'stream' is not a stream number")
        checked.append({"address": int(segment["address"]), "size": int(segment["size"]),
                        "stream": int(stream) if stream is not None else None,
                        "blocks": checked_blocks})
    return checked


def check_families(raw, where):
    """A scenario's "counter_families" object as CounterFamilies."""
    if not isinstance(raw, dict):
        raise InputError(f"{where}: 'counter_families' is not an object")
    parameter = raw.get("member_parameter", "")
    check_text(parameter, where, "member_parameter")
    members = raw.get("members")
    if not isinstance(members, list):
        raise InputError(f"{where}: 'counter_families.members' is not a list")
    checked_members = []
    for index, member in enumerate(members):
        if (not isinstance(member, dict)
                or not in_range(member.get("parameter"), -MAX_MAGNITUDE, MAX_MAGNITUDE)):
            raise InputError(f"{where}: counter_families.members[{index}] needs a 'name' "
                             "and a numeric 'parameter'")
        checked_members.append((check_text(member.get("name"), where, "member name"),
                                member["parameter"]))
    families = raw.get("families")
    if not isinstance(families, dict):
        raise InputError(f"{where}: 'counter_families.families' is not an object")
    checked_families = {}
    for family, counters in families.items():
        check_text(family, where, "family")
        if not isinstance(counters, dict):
            raise InputError(f"{where}: counter family '{family}' is not an object")
        checked_families[family] = {check_text(member, where, "member"):
                                    check_text(counter, where, "counter")
                                    for member, counter in counters.items()}
    return CounterFamilies(parameter, checked_members, checked_families)


def check_names(raw, where):
    """The top-level "names" object: {scenario: ScenarioNames}."""
    if not isinstance(raw, dict):
        raise InputError(f"{where}: 'names' is not an object")
    names = {}
    for scenario, table in raw.items():
        there = f"{where}: names[{scenario!r}]"
        if not isinstance(table, dict):
            raise InputError(f"{there} is not an object")
        steps = table.get("steps", {})
        counters = table.get("counters", [])
        if not isinstance(steps, dict) or not isinstance(counters, list):
            raise InputError(f"{there} needs 'steps' as an object and 'counters' as a list")
        families = (check_families(table["counter_families"], there)
                    if "counter_families" in table else None)
        names[scenario] = ScenarioNames(
            {check_text(key, there, "step key"): check_text(text, there, "step")
             for key, text in steps.items()},
            [check_text(counter, there, "counter") for counter in counters], families)
    return names


def check_document(path, raw):
    """raw when it is a results document (an object with 'context' and
    'benchmarks'); InputError otherwise."""
    if (not isinstance(raw, dict) or not isinstance(raw.get("context"), dict)
            or not isinstance(raw.get("benchmarks"), list)):
        hint = ""
        if isinstance(raw, dict) and "claims" in raw:
            hint = " (it looks like a claims file; plot a run's results instead)"
        raise InputError(f"{path}: not a vrambench/Google Benchmark result: it needs "
                         f"a top-level object with 'context' and 'benchmarks'{hint}")
    return raw


# An entry's fields that hold text; any other field holds a number (a counter, a time, a
# count), which a figure could draw, or a flag, a list or an object (field_kind).
TEXT_FIELDS = frozenset(("name", "run_name", "run_type", "time_unit", "scenario", "allocator", "label",
                         "aggregate_name", "aggregate_unit", "error_message", "pytorch_alloc_conf",
                         "reserved_bytes_source"))


# What a field of an iteration entry may hold, by its name (docs/results-json.md,
# "Readers"; app/results_file.c, field_kind_of, reads the same rule for compare and merge):
# a byte count or count is a whole number from 0 to 2^64-1, a time or ratio a number from
# 0 to 2^64, any other field anything but a string (a number there from 0 to 2^64 too);
# null is an absent figure.
WHOLE_WORDS = frozenset(("bytes", "ooms", "calls", "retries", "events"))
WHOLE_FIELDS = frozenset(("iterations", "repetitions", "repetition_index", "threads", "family_index",
                          "per_family_instance_index", "first_oom_line", "live_at_end", "recorded_failures"))
NUMBER_WORDS = frozenset(("time", "ns", "ms", "ratio", "frag", "per", "utilization"))


def field_kind(key):
    """'text', 'byte count', 'count', 'number' (a time or ratio) or 'other'."""
    words = set(key.split("_"))
    if key in TEXT_FIELDS:
        return "text"
    if key in WHOLE_FIELDS or words & WHOLE_WORDS:
        return "byte count" if "bytes" in words else "count"
    return "number" if words & NUMBER_WORDS else "other"


def type_name(value):
    """What a JSON value that is not a number is, for an error line."""
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "true or false"
    return "a list" if isinstance(value, list) else "an object"


def counter_values(entry, where):
    """The entry's numeric fields, each checked against its kind (field_kind):
    a number from 0 to below 2^64, a whole one for a byte count or count. A
    string outside the text fields is refused ("NaN", "12", "big"), never
    drawn as text or skipped."""
    numbers = {}
    for key, value in entry.items():
        kind = field_kind(key)
        if kind == "text" or value is None or key == "timeline":  # a timeline: check_timeline
            continue
        is_figure = not isinstance(value, bool) and isinstance(value, (int, float))
        if isinstance(value, str) or (kind != "other" and not is_figure):
            raise InputError(f"{where}: '{abbreviate_key(key)}' is {type_name(value)}, not a number"
                             + (f" (a {kind})" if kind in ("byte count", "count") else ""))
        if not is_figure:
            continue
        if not in_range(value, 0, MAX_MAGNITUDE):
            raise InputError(f"{where}: '{abbreviate_key(key)}' is not a number from 0 to below 2^64"
                             + (" (it is negative)" if is_number(value) and value < 0 else ""))
        if kind in ("byte count", "count") and value != int(value):
            raise InputError(f"{where}: '{abbreviate_key(key)}' is {value:g}, not a whole number (a {kind})")
        if kind in ("byte count", "count") and value > MAX_UINT64:  # 2^64 itself, whole but too big
            raise InputError(f"{where}: '{abbreviate_key(key)}' is {int(value)}, out of range "
                             f"(at or above 2^64; a {kind} is below 2^64)")
        numbers[key] = float(value)
    return numbers


def abbreviate_key(key):
    """A key short enough for an error line."""
    return key if len(key) <= 60 else key[:59] + "…"


def check_case_once(entry, name, run_type, index, seen, path):
    """InputError when this entry's case (name, run_type and aggregate_name,
    repetition_index) came before in the file: one file holding a case twice
    has no one value to show. The C readers (app/results_file.c,
    vb_results_check_unique) refuse it with the same line."""
    aggregate = entry.get("aggregate_name")
    repetition = entry.get("repetition_index", 0)
    if not isinstance(repetition, int) or isinstance(repetition, bool):
        repetition = 0  # as the C readers take it; an iteration's is checked below
    identity = (name, run_type, aggregate if isinstance(aggregate, str) else "", repetition)
    first = seen.setdefault(identity, index)
    if first != index:
        which = (f"aggregate '{aggregate[:100]}'" if isinstance(aggregate, str) and aggregate.isprintable()
                 else f"repetition {repetition}")
        raise InputError(f"{path}: benchmarks[{first}] and benchmarks[{index}] are the same case, '{name[:200]}' "
                         f"({which}): a results file holds each case once")


def parse_result(path, raw):
    """A Result from a parsed JSON document; InputError when it is not a
    Google Benchmark / vrambench results file or an entry is malformed.
    Aggregate entries (run_type "aggregate") are skipped."""
    raw = check_document(path, raw)
    result = Result(path, check_context(raw["context"], path))
    if "names" in raw:
        result.names = check_names(raw["names"], path)
    runs = {}
    seen = {}  # each case's identity: where it was first
    for index, entry in enumerate(raw["benchmarks"]):
        where = f"{path}: benchmarks[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise InputError(f"{where} is not an object with a string 'name'")
        name = check_text(entry["name"], where, "name")
        run_type = entry.get("run_type", "iteration")
        if not isinstance(run_type, str):
            raise InputError(f"{where}: 'run_type' is not a string")
        check_case_once(entry, name, run_type, index, seen, path)
        if run_type != "iteration":
            continue
        where = f"{path}: benchmarks[{index}] ({name})"
        numbers = counter_values(entry, where)
        timeline = check_timeline(entry["timeline"], where) if "timeline" in entry else None  # every entry's
        if name.startswith("microbench/"):
            rest = name[len("microbench/"):]
            if "/threads:" in rest:  # microbench --threads N names its entries .../threads:N
                rest = rest[:rest.rindex("/threads:")]
            allocator, _, size_text = rest.rpartition("/")
            size = numbers.get("bytes")
            if size is None and size_text.isdigit() and len(size_text) < 20:
                size = float(size_text)
            if not allocator or size is None or not 0 < size <= MAX_UINT64:
                raise InputError(f"{where}: a microbench entry must be named "
                                 "microbench/ALLOCATOR/BYTES (BYTES from 1 to 2^64-1)")
            result.microbench.append((allocator, size, numbers))
            continue
        scenario, allocator = split_name(name)
        if "scenario" in entry or "allocator" in entry:
            scenario = check_text(entry.get("scenario"), where, "scenario")
            allocator = check_text(entry.get("allocator"), where, "allocator")
        repetition = entry.get("repetition_index", 0)
        if (not isinstance(repetition, int) or isinstance(repetition, bool)
                or not 0 <= repetition <= MAX_REPETITION):
            raise InputError(f"{where}: 'repetition_index' is not an integer from 0 to "
                             f"{MAX_REPETITION}")
        run = runs.get(name)
        if run is None:
            run = runs[name] = Run(name, scenario, allocator, path)
            result.runs.append(run)
        if "real_time" in numbers:
            unit = entry.get("time_unit", "ns")
            if not isinstance(unit, str) or unit not in TIME_UNIT_NS:
                raise InputError(f"{where}: unknown time_unit {unit!r:.40}")
            numbers["real_time_ns"] = numbers["real_time"] * TIME_UNIT_NS[unit]
        for key, value in numbers.items():
            run.samples.setdefault(key, []).append(value)
        if run.detail_repetition is None or repetition < run.detail_repetition:
            run.detail_repetition = repetition
            run.timeline = timeline
            run.segments = (check_segments(entry["segments_at_peak"], where)
                            if "segments_at_peak" in entry else None)
    for run in result.runs:
        run.values = {key: statistics.median(values) for key, values in run.samples.items()}
        run.real_time_ns = run.values.get("real_time_ns")
    return result


def load_result(path):
    """Any results file (run, replay or microbench)."""
    return parse_result(path, read_json(path))


def load_run_result(path):
    """A results file of a `vrambench run` or `replay`: it must carry timelines."""
    result = load_result(path)
    if not result.has_timelines():
        if result.microbench and not result.runs:
            raise InputError(f"{path}: a microbench file has no timelines; "
                             "pass it with --microbench")
        raise InputError(f"{path}: no benchmark entry has a 'timeline': not a "
                         "vrambench run result (a plain Google Benchmark file?)")
    return result


def load_microbench(path):
    """A microbench results file: it must have microbench/ entries."""
    result = load_result(path)
    if not result.microbench:
        raise InputError(f"{path}: no 'microbench/ALLOCATOR/BYTES' entries: "
                         "not a vrambench microbench result")
    return result


def load_claims(path):
    """A `vrambench claims` file: context, catalogue and claims checked."""
    return parse_claims(path, read_json(path))


def parse_claims(path, raw):
    """Claims from a parsed JSON document (load_claims), named `path` in messages."""
    if (not isinstance(raw, dict) or not isinstance(raw.get("context"), dict)
            or not isinstance(raw.get("catalogue"), list) or not isinstance(raw.get("claims"), list)):
        raise InputError(f"{path}: not a vrambench claims file: it needs a top-level object "
                         "with 'context', 'catalogue' and 'claims'")
    context = check_context(raw["context"], path)
    for name, rows, keys in (("catalogue", raw["catalogue"], ("id", "documents", "claim")),
                             ("claims", raw["claims"], ("id", "allocator", "verdict"))):
        for index, row in enumerate(rows):
            if not isinstance(row, dict):
                raise InputError(f"{path}: {name}[{index}] is not an object")
            for key in keys:
                check_text(row.get(key), f"{path}: {name}[{index}]", key)
    return Claims(path, context, raw["catalogue"], raw["claims"])


class TuneCheck:
    """A tune-check file (lab/harnesses/tune_check.py): `vrambench tune`'s
    predictions next to what PyTorch itself reserved, one row per workload
    and setting."""

    def __init__(self, path, rows):
        self.path = path
        self.rows = rows           # [{workload, pytorch_alloc_conf, predicted_..., real_..., ...}]

    @property
    def device_name(self):
        return self.rows[0].get("device") if self.rows else None


def load_tune_check(path):
    """A tune-check file: {"rows": [...]}, each row's names and byte counts checked."""
    raw = read_json(path)
    if not isinstance(raw, dict) or not isinstance(raw.get("rows"), list):
        raise InputError(f"{path}: not a tune-check file: it needs a top-level object with 'rows'")
    for index, row in enumerate(raw["rows"]):
        where = f"{path}: rows[{index}]"
        if not isinstance(row, dict):
            raise InputError(f"{where} is not an object")
        for key in ("workload", "pytorch_alloc_conf"):
            check_text(row.get(key), where, key)
        for key in ("predicted_peak_reserved_bytes", "real_peak_reserved_bytes"):
            if not in_range(row.get(key), 0, MAX_UINT64):
                raise InputError(f"{where}: '{key}' is not a byte count")
        if not in_range(row.get("error_percent"), -MAX_MAGNITUDE, MAX_MAGNITUDE):
            raise InputError(f"{where}: 'error_percent' is not a number")
        smallest = row.get("predicted_min_capacity_bytes")
        if smallest is not None and not in_range(smallest, 0, MAX_UINT64):
            raise InputError(f"{where}: 'predicted_min_capacity_bytes' is not a byte count")
    return TuneCheck(path, raw["rows"])


class PytorchClaims:
    """A file of lab/harnesses/pytorch_claims.py: the documents' code measured
    under PyTorch's own allocator (the `pytorch` column of the claims)."""

    def __init__(self, path, context, measurements):
        self.path = path
        self.context = context
        self.measurements = measurements  # [{scenario, allocator, timeline, counters}]


def load_pytorch_claims(path):
    """A pytorch-claims file: context and measurements, timelines and counters checked."""
    raw = read_json(path)
    if (not isinstance(raw, dict) or not isinstance(raw.get("context"), dict)
            or not isinstance(raw.get("measurements"), list)):
        raise InputError(f"{path}: not a PyTorch claims measurement: it needs a top-level object "
                         "with 'context' and 'measurements'")
    context = check_context(raw["context"], path)
    measurements = []
    for index, entry in enumerate(raw["measurements"]):
        where = f"{path}: measurements[{index}]"
        if not isinstance(entry, dict):
            raise InputError(f"{where} is not an object")
        counters = entry.get("counters", {})
        if not isinstance(counters, dict):
            raise InputError(f"{where}: 'counters' is not an object")
        measurements.append({"scenario": check_text(entry.get("scenario"), where, "scenario"),
                             "allocator": check_text(entry.get("allocator"), where, "allocator"),
                             "timeline": check_timeline(entry.get("timeline", []), where),
                             "counters": counter_values(counters, where)})
    return PytorchClaims(path, context, measurements)


# --------------------------------------------------------------------------
# Picking files
# --------------------------------------------------------------------------

def file_time(result):
    """When a results file was made: its context date, else its mtime."""
    text = result.context.get("date")
    if isinstance(text, str):
        try:
            stamp = datetime.datetime.fromisoformat(text)
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=datetime.timezone.utc)
            return stamp.timestamp()
        except (ValueError, OverflowError, OSError):
            pass
    return os.path.getmtime(result.path)


def find_latest(directory):
    """(newest run result, newest microbench result of the same device or
    None) among DIRECTORY/*.json, claims-*.json, replays and microbench
    --threads files excluded, newest by context date. Files that are not results are skipped with a note; so are
    microbench files of another device (figures never mix devices)."""
    if not os.path.isdir(directory):
        raise InputError(f"{directory}: no such directory")
    runs, micros = [], []
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        if os.path.basename(path).startswith(("claims-", "torch-ab-")):  # torch-ab: python/vrambench/plots/torch_ab.py
            continue
        if not os.path.isfile(path):  # a FIFO or device is never opened by a directory scan
            note(f"skipping {_shown(path)}: not a regular file")
            continue
        try:
            result = load_result(path)
        except InputError as error:
            note(f"skipping {error}")
            continue
        if result.has_timelines():
            # A replay file's plots go to plots/replay-NAME/ (README): `make
            # bench`'s scenario results are what plots/ shows.
            if not all(run.name.startswith("replay:") for run in result.runs):
                runs.append(result)
        elif result.microbench and not os.path.basename(path).startswith("microbench-threads"):
            micros.append(result)  # the one-thread figures; microbench --threads files are contention figures
    if not runs:
        raise InputError(f"{directory}: no run results (*.json with timelines); "
                         "run `make bench` or give RESULTS=FILE")
    newest = max(runs, key=file_time)
    matching = [micro for micro in micros if same_device(micro, newest)]
    micro = max(matching, key=file_time) if matching else None
    if micros and not matching:
        note(f"no microbench file of {newest.device_label()} in {directory}; "
             "latency.png from the run's own counters")
    note(f"plotting {newest.path}" + (f" with microbench {micro.path}" if micro else ""))
    return newest, micro


def check_same_device(result, micro):
    """InputError when a microbench file comes from another device than the
    run result it would be drawn with."""
    if micro is not None and not same_device(result, micro):
        raise InputError(f"{micro.path} is from {micro.device_label()} but {result.path} from "
                         f"{result.device_label()}: figures never mix devices; give a "
                         "microbench file of the same device")


def choose_segments_run(result, wanted):
    """The run whose segment map to draw: `wanted` (SCENARIO/ALLOCATOR, or
    the entry name) when given, else the one with the largest
    external_frag_at_peak (then largest peak reserved). None when no run
    has a segment map and none was asked for; InputError for a bad ask."""
    candidates = [run for run in result.runs if run.segments]
    if wanted:
        for run in result.runs:
            if wanted in (run.name, f"{run.scenario}/{run.allocator}"):
                if not run.segments:
                    raise InputError(f"{result.path}: {wanted} has no 'segments_at_peak'")
                return run
        names = [run.name for run in candidates]
        raise InputError(f"{result.path}: no entry {wanted!r}{did_you_mean(wanted, names)} "
                         f"(entries with segment maps: {', '.join(names) or 'none'})")
    if not candidates:
        return None
    return max(candidates, key=lambda run: (run.values.get("external_frag_at_peak", 0),
                                            run.values.get("peak_reserved_bytes", 0)))
