#!/usr/bin/env python3
"""Plots for vrambench results (matplotlib and the standard library only).

    plot.py RESULTS.json [MORE.json ...] [--out-dir plots]
            [--segments SCENARIO/ALLOCATOR] [--microbench MICRO.json]
    plot.py --latest results [--out-dir plots]

Reads results JSON as described in docs/results-json.md (Google Benchmark's
schema plus vrambench's counters, "timeline" and "segments_at_peak") and
writes PNGs into --out-dir:

  timeline-SCENARIO.png    requested and reserved bytes at each step
  peaks.png                peak reserved and overhead ratio per allocator
  latency.png              malloc/free p50 and p99 (per size with --microbench)
  empty_cache_loop.png     empty_cache every iteration / every N / never
  dataloader_batches.png   peak memory against batch size
  segments-SCEN-ALLOC.png  segment map at the moment of peak reserved
  compare.png              the first file against the second (compare-N.png
                           against the N-th when more are given)

All plots but compare.png come from the first file. Bad input (a missing
file, a JSON that is not a results file, a results file without timelines)
gets one error line and exit status 2 before any PNG is written; a plot
whose data the file lacks is skipped with a note. PNGs are rendered into a
temporary folder and moved into --out-dir only when all of them succeeded.
"""

import argparse
import datetime
import glob
import json
import math
import os
import re
import shutil
import statistics
import sys
import tempfile

PROG = "plot.py"
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2

# Set by load_matplotlib(): imported only once the input is known to be good,
# so bad input is reported even where matplotlib is missing.
plt = None
mticker = None
Line2D = None
Patch = None

# The order users see allocators in (docs/design.md's allocator table); also fixes colours.
KNOWN_ALLOCATORS = ["cuda", "caching", "async", "expandable", "bfc", "buddy",
                    "binning", "stitch"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "*"]
TIME_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
MAX_LABELLED_STEPS = 30     # more steps than this: index ticks, no names
MAX_MARKED_STEPS = 60       # more steps than this: lines without markers
MAX_SEGMENT_ROWS = 48       # more segments than this: the largest only
STEP_LABEL_CHARS = 28
# Figures are at most this wide (inches at 120 dpi) so that text stays
# readable when a README shows them about 900 pixels wide.
MAX_WIDTH_IN = 12.5


class InputError(Exception):
    """Bad input: the message is for the user; exit status 2."""


def note(message):
    """Prints a one-line note (a skipped plot, a chosen file) on stderr."""
    print(f"{PROG}: note: {message}", file=sys.stderr)


# --------------------------------------------------------------------------
# Units
# --------------------------------------------------------------------------

# Largest first; the last is the base unit, used below every other.
BYTE_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1))
NS_UNITS = (("s", 1e9), ("ms", 1e6), ("µs", 1e3), ("ns", 1.0))


def short_number(x):
    """Formats x with about three significant digits and no exponent."""
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        text = f"{x:.1f}"
    else:
        text = f"{x:.2f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def unit_for(largest, units):
    """The first (name, scale) of units (largest first) that largest
    reaches; the base unit, units' last, when it reaches none."""
    for name, scale in units:
        if largest >= scale:
            return name, scale
    return units[-1]


def in_unit(value, units):
    """Formats value in the unit of units its own magnitude suits."""
    name, scale = unit_for(abs(value), units)
    return f"{short_number(value / scale)} {name}"


def byte_unit(max_bytes):
    """The unit (name, scale) a byte axis whose largest value is max_bytes
    reads best in: GiB from 1 GiB, MiB from 1 MiB, KiB, else bytes."""
    return unit_for(max_bytes, BYTE_UNITS)


def format_bytes(value):
    """Formats a byte count in the unit its own magnitude suits."""
    return in_unit(value, BYTE_UNITS)


def ns_unit(max_ns):
    """The unit (name, scale) for a nanosecond axis whose largest value is max_ns."""
    return unit_for(max_ns, NS_UNITS)


def format_ns(value):
    """Formats a duration in nanoseconds as ns, µs, ms or s."""
    return in_unit(value, NS_UNITS)


def escape_text(text):
    """Keeps matplotlib from reading '$' in names as mathtext."""
    return str(text).replace("$", r"\$")


def abbreviate(text, limit):
    """Shortens text to at most limit characters, marking the cut with '…'."""
    text = str(text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def slug(text):
    """A file-name-safe form of a scenario or allocator name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-.") or "x"


def scenario_slug(scenario):
    """File-name part for a scenario; a replay is named by its trace file."""
    if scenario.startswith("replay:"):
        trace = os.path.basename(scenario[len("replay:"):].rstrip("/"))
        trace = re.sub(r"\.(json|jsonl|pickle|pkl|trace)$", "", trace)
        return "replay-" + slug(trace)
    return slug(scenario)


def scenario_label(scenario):
    """Axis label for a scenario; a replay shows its trace's base name."""
    if scenario.startswith("replay:"):
        trace = os.path.basename(scenario[len("replay:"):].rstrip("/"))
        return "replay:" + re.sub(r"\.(json|jsonl|pickle|pkl|trace)$", "", trace)
    return scenario


def is_number(value):
    """True for a finite JSON number (booleans are not numbers here)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


# --------------------------------------------------------------------------
# Reading results
# --------------------------------------------------------------------------

class Run:
    """One SCENARIO/ALLOCATOR of a results file, its repetitions folded:
    numbers are medians over the repetitions, the timeline and segment map
    come from the lowest repetition_index (0)."""

    def __init__(self, name, scenario, allocator):
        self.name = name
        self.scenario = scenario
        self.allocator = allocator
        self.samples = {}          # counter -> values, one per repetition
        self.values = {}           # counter -> median
        self.real_time_ns = None
        self.timeline = None
        self.segments = None
        self.detail_repetition = None


class Result:
    """A parsed results file: its context, runs and microbench entries."""

    def __init__(self, path, context):
        self.path = path
        self.context = context
        self.runs = []             # in file order
        self.microbench = []       # (allocator, bytes, values)

    @property
    def device_name(self):
        return str(self.context.get("device_name") or "unknown device")

    @property
    def simulated(self):
        return self.context.get("simulated") is True

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


def read_json(path):
    """The parsed JSON of path; InputError for a missing or broken file."""
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file")
    try:
        with open(path, encoding="utf-8") as stream:
            return json.load(stream)
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: not valid JSON ({error.msg} at line "
                         f"{error.lineno}, column {error.colno})") from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: cannot read it ({error})") from None


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


def check_timeline(timeline, where):
    """Validates an entry's "timeline" and returns it as a list of dicts with
    str step and numeric requested/allocated/reserved/driver_used."""
    if not isinstance(timeline, list):
        raise InputError(f"{where}: 'timeline' is not a list")
    samples = []
    for index, point in enumerate(timeline):
        if not isinstance(point, dict) or "step" not in point:
            raise InputError(f"{where}: timeline[{index}] is not an object with a 'step'")
        sample = {"step": str(point["step"])}
        for key in ("requested", "reserved"):
            if not is_number(point.get(key)):
                raise InputError(f"{where}: timeline[{index}] has no numeric '{key}'")
            sample[key] = float(point[key])
        for key in ("allocated", "driver_used"):
            sample[key] = float(point[key]) if is_number(point.get(key)) else None
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
        if (not isinstance(segment, dict) or not is_number(segment.get("address"))
                or not is_number(segment.get("size")) or segment["size"] < 0):
            raise InputError(f"{seg_where} needs a numeric 'address' and 'size'")
        blocks = segment.get("blocks", [])
        if not isinstance(blocks, list):
            raise InputError(f"{seg_where}: 'blocks' is not a list")
        checked_blocks = []
        for block_index, block in enumerate(blocks):
            if (not isinstance(block, dict) or not is_number(block.get("address"))
                    or not is_number(block.get("size"))
                    or not isinstance(block.get("allocated"), bool)):
                raise InputError(f"{seg_where}: blocks[{block_index}] needs a numeric "
                                 "'address' and 'size' and a boolean 'allocated'")
            checked_blocks.append({"address": int(block["address"]),
                                   "size": int(block["size"]),
                                   "allocated": block["allocated"]})
        stream = segment.get("stream")
        checked.append({"address": int(segment["address"]), "size": int(segment["size"]),
                        "stream": int(stream) if is_number(stream) else None,
                        "blocks": checked_blocks})
    return checked


def parse_result(path, raw):
    """A Result from a parsed JSON document; InputError when it is not a
    Google Benchmark / vrambench results file or an entry is malformed.
    Aggregate entries (run_type "aggregate") are skipped."""
    if (not isinstance(raw, dict) or not isinstance(raw.get("context"), dict)
            or not isinstance(raw.get("benchmarks"), list)):
        hint = ""
        if isinstance(raw, dict) and "claims" in raw:
            hint = " (it looks like a claims file; plot a run's results instead)"
        raise InputError(f"{path}: not a vrambench/Google Benchmark result: it needs "
                         f"a top-level object with 'context' and 'benchmarks'{hint}")
    result = Result(path, raw["context"])
    runs = {}
    for index, entry in enumerate(raw["benchmarks"]):
        where = f"{path}: benchmarks[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise InputError(f"{where} is not an object with a string 'name'")
        if entry.get("run_type", "iteration") != "iteration":
            continue
        name = entry["name"]
        where = f"{path}: benchmarks[{index}] ({name})"
        numbers = {key: float(value) for key, value in entry.items() if is_number(value)}
        if name.startswith("microbench/"):
            allocator, _, size_text = name[len("microbench/"):].rpartition("/")
            size = numbers.get("bytes")
            if size is None and size_text.isdigit():
                size = float(size_text)
            if not allocator or size is None:
                raise InputError(f"{where}: a microbench entry must be named "
                                 "microbench/ALLOCATOR/BYTES")
            result.microbench.append((allocator, size, numbers))
            continue
        scenario, allocator = split_name(name)
        if isinstance(entry.get("scenario"), str) and isinstance(entry.get("allocator"), str):
            scenario, allocator = entry["scenario"], entry["allocator"]
        repetition = entry.get("repetition_index", 0)
        if not isinstance(repetition, int) or isinstance(repetition, bool):
            raise InputError(f"{where}: 'repetition_index' is not an integer")
        run = runs.get(name)
        if run is None:
            run = runs[name] = Run(name, scenario, allocator)
            result.runs.append(run)
        if is_number(entry.get("real_time")):
            unit = entry.get("time_unit", "ns")
            if unit not in TIME_UNIT_NS:
                raise InputError(f"{where}: unknown time_unit {unit!r}")
            numbers["real_time_ns"] = entry["real_time"] * TIME_UNIT_NS[unit]
        for key, value in numbers.items():
            run.samples.setdefault(key, []).append(value)
        if run.detail_repetition is None or repetition < run.detail_repetition:
            run.detail_repetition = repetition
            run.timeline = (check_timeline(entry["timeline"], where)
                            if "timeline" in entry else None)
            run.segments = (check_segments(entry["segments_at_peak"], where)
                            if "segments_at_peak" in entry else None)
    for run in result.runs:
        run.values = {key: statistics.median(values) for key, values in run.samples.items()}
        run.real_time_ns = run.values.get("real_time_ns")
    return result


def load_run_result(path):
    """A results file of a `vrambench run`: it must carry timelines."""
    result = parse_result(path, read_json(path))
    if not result.has_timelines():
        if result.microbench and not result.runs:
            raise InputError(f"{path}: a microbench file has no timelines; "
                             "pass it with --microbench")
        raise InputError(f"{path}: no benchmark entry has a 'timeline': not a "
                         "vrambench run result (a plain Google Benchmark file?)")
    return result


def load_microbench(path):
    """A microbench results file: it must have microbench/ entries."""
    result = parse_result(path, read_json(path))
    if not result.microbench:
        raise InputError(f"{path}: no 'microbench/ALLOCATOR/BYTES' entries: "
                         "not a vrambench microbench result")
    return result


def file_time(result):
    """When a results file was made: its context date, else its mtime."""
    text = result.context.get("date")
    if isinstance(text, str):
        try:
            return datetime.datetime.fromisoformat(text).timestamp()
        except ValueError:
            pass
    return os.path.getmtime(result.path)


def find_latest(directory):
    """(newest run result, newest microbench result or None) among
    DIRECTORY/*.json, claims-*.json excluded, newest by context date.
    Files that are not results are skipped with a note."""
    runs, micros = [], []
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        if os.path.basename(path).startswith(("claims-", "torch-ab-")):  # torch-ab: plots/torch_ab.py
            continue
        try:
            result = parse_result(path, read_json(path))
        except InputError as error:
            note(f"skipping {error}")
            continue
        if result.has_timelines():
            runs.append(result)
        elif result.microbench:
            micros.append(result)
    if not runs:
        raise InputError(f"{directory}: no run results (*.json with timelines); "
                         "run `make bench` or give RESULTS=FILE")
    newest = max(runs, key=file_time)
    micro = max(micros, key=file_time) if micros else None
    note(f"plotting {newest.path}" + (f" with microbench {micro.path}" if micro else ""))
    return newest, micro


# --------------------------------------------------------------------------
# Output: all PNGs or none
# --------------------------------------------------------------------------

class Output:
    """Renders PNGs into a temporary folder inside out_dir; commit() moves
    them into out_dir, discard() removes them, so a failed run leaves no
    partial set behind."""

    def __init__(self, out_dir):
        self.out_dir = out_dir
        try:
            os.makedirs(out_dir, exist_ok=True)
            self.staging = tempfile.mkdtemp(prefix=".plot-", dir=out_dir)
        except OSError as error:
            raise InputError(f"{out_dir}: cannot write there ({error})") from None
        self.names = []

    def save(self, figure, name):
        """Writes figure as PNG `name` (made unique) and closes it."""
        base, number = name[:-len(".png")], 2
        while name in self.names:
            name = f"{base}-{number}.png"
            number += 1
        figure.savefig(os.path.join(self.staging, name), bbox_inches="tight")
        plt.close(figure)
        self.names.append(name)

    def commit(self):
        """Moves every PNG into out_dir; returns their final paths."""
        paths = []
        for name in self.names:
            path = os.path.join(self.out_dir, name)
            os.replace(os.path.join(self.staging, name), path)
            paths.append(path)
        shutil.rmtree(self.staging, ignore_errors=True)
        return paths

    def discard(self):
        shutil.rmtree(self.staging, ignore_errors=True)


# --------------------------------------------------------------------------
# Shared drawing helpers
# --------------------------------------------------------------------------

def load_matplotlib():
    """Imports matplotlib with the Agg backend into the module globals."""
    global plt, mticker, Line2D, Patch
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as pyplot
        import matplotlib.ticker as ticker
        from matplotlib.lines import Line2D as line_class
        from matplotlib.patches import Patch as patch_class
    except ImportError as error:
        raise RuntimeError(f"matplotlib is not available to {sys.executable} ({error}); "
                           "install python3-matplotlib or run with a python that has it")
    plt, mticker, Line2D, Patch = pyplot, ticker, line_class, patch_class
    plt.rcParams.update({
        "font.size": 11, "axes.titlesize": 12, "axes.labelsize": 11,
        "legend.fontsize": 10, "legend.title_fontsize": 10,
        "xtick.labelsize": 10, "ytick.labelsize": 10,
        "savefig.dpi": 120, "axes.grid": True, "grid.alpha": 0.3,
        "axes.axisbelow": True, "axes.spines.top": False, "axes.spines.right": False,
    })


def allocator_order(allocators):
    """Allocators in the order of docs/design.md's allocator table, unknown ones after,
    each base name's configured variants after the plain one."""
    def key(name):
        base = name.split("[", 1)[0]
        rank = KNOWN_ALLOCATORS.index(base) if base in KNOWN_ALLOCATORS else len(KNOWN_ALLOCATORS)
        return (rank, base, name)
    return sorted(set(allocators), key=key)


def sort_by_allocator(runs, colors):
    """Sorts runs in place into allocator_order of the allocators with a
    colour; runs of others go last."""
    order = allocator_order(colors)
    runs.sort(key=lambda run: order.index(run.allocator) if run.allocator in colors else 99)


def runs_with_counter(result, scenario, counter_key):
    """The runs of scenario that have a counter whose name matches the
    compiled pattern counter_key."""
    return [run for run in result.runs if run.scenario == scenario
            and any(counter_key.match(key) for key in run.values)]


def allocator_colors(allocators):
    """One colour per allocator, fixed for a whole run of the script."""
    ordered = allocator_order(allocators)
    cmap = plt.get_cmap("tab10" if len(ordered) <= 10 else "tab20")
    return {name: cmap(index % cmap.N) for index, name in enumerate(ordered)}


def scenario_order(runs):
    """Scenarios in file order, replays after the built-in ones."""
    seen = []
    for run in runs:
        if run.scenario not in seen:
            seen.append(run.scenario)
    return ([s for s in seen if not s.startswith("replay:")]
            + [s for s in seen if s.startswith("replay:")])


def title_text(what, result):
    """A two-line title: what the plot shows, then the device line."""
    return f"{escape_text(what)}\n{escape_text(result.device_label())}"


def legend_outside(ax, handles, **kwargs):
    """A legend to the right of the axes, where it covers no data."""
    return ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                     frameon=False, borderaxespad=0.0, **kwargs)


def allocator_handles(allocators, colors, markers=None):
    """Legend entries, one coloured line (and marker) per allocator."""
    return [Line2D([], [], color=colors[name], lw=2,
                   marker=markers.get(name) if markers else None,
                   label=escape_text(name)) for name in allocators]


def same_series_groups(runs, series_of):
    """Runs grouped by identical series (in order of first appearance):
    lines with equal values would hide each other, so each group is drawn
    once, in its first allocator's colour, and named after all of them."""
    groups = {}
    for run in runs:
        groups.setdefault(tuple(series_of(run)), []).append(run)
    return list(groups.values())


def group_label(runs, width=26):
    """'a = b = c' for a group of runs, wrapped onto lines of ~width chars."""
    lines, line = [], ""
    for index, run in enumerate(runs):
        piece = escape_text(run.allocator) + (" =" if index < len(runs) - 1 else "")
        if line and len(line) + 1 + len(piece) > width:
            lines.append(line)
            line = piece
        else:
            line = f"{line} {piece}" if line else piece
    lines.append(line)
    return "\n".join(lines)


def byte_axis(axis, values, log_spread=50.0, bars=False):
    """Sets a byte axis up for values: log base 2 with per-tick units when
    they span more than log_spread, else linear in one unit. Returns (the
    scale to divide values by before plotting, 1 on a log axis; the text
    for the axis label's parentheses: the unit or "log scale")."""
    positive = [v for v in values if v > 0]
    if not positive:
        return 1, "bytes"
    if max(positive) / min(positive) > log_spread:
        set_log(axis, 2)
        axis.set_major_locator(mticker.LogLocator(base=2, numticks=9))
        axis.set_major_formatter(mticker.FuncFormatter(lambda v, _: format_bytes(v)))
        axis.set_minor_locator(mticker.NullLocator())
        if bars:
            # Bars on a log axis start at its bottom: keep it well below
            # the smallest value so the shortest bar still shows.
            limits = (2.0 ** math.floor(math.log2(min(positive) / 2)), max(positive) * 1.6)
            if axis.axis_name == "x":
                axis.axes.set_xlim(*limits)
            else:
                axis.axes.set_ylim(*limits)
        return 1, "log scale"
    name, scale = byte_unit(max(positive))
    return scale, name


def set_log(axis, base):
    """Log scale on one axis (XAxis or YAxis) of its axes."""
    if axis.axis_name == "x":
        axis.axes.set_xscale("log", base=base)
    else:
        axis.axes.set_yscale("log", base=base)


def ns_log_axis(axis, values=None):
    """A log-10 nanosecond axis labelled ns / µs / ms per tick. With values
    (bar heights), it starts a decade below the smallest, so a short bar
    still shows, and ends above the largest."""
    set_log(axis, 10)
    axis.set_major_locator(mticker.LogLocator(base=10, numticks=10))
    axis.set_major_formatter(mticker.FuncFormatter(lambda v, _: format_ns(v)))
    # 2x and 5x ticks between decades, labelled only when few decades show.
    axis.set_minor_locator(mticker.LogLocator(base=10, subs=(2.0, 5.0), numticks=10))
    positive = [v for v in (values or []) if v > 0]
    if positive:
        low = 10 ** math.floor(math.log10(min(positive) / 2))
        high = max(positive) * 2.0
        limits = (low, high)
        if axis.axis_name == "x":
            axis.axes.set_xlim(*limits)
        else:
            axis.axes.set_ylim(*limits)
        if math.log10(high / low) <= 3:
            axis.set_minor_formatter(mticker.FuncFormatter(lambda v, _: format_ns(v)))
            return
    axis.set_minor_formatter(mticker.NullFormatter())


def group_positions(group_count, member_count, width=0.8):
    """(bar width, offset of member i) for grouped bars centred on 0..n-1."""
    bar = width / max(member_count, 1)
    return bar, [(i - (member_count - 1) / 2) * bar for i in range(member_count)]


def set_category_ticks(ax, labels, width_per_label_in):
    """Category labels on the x axis, rotated when they would collide."""
    ax.set_xticks(range(len(labels)))
    longest = max((len(label) for label in labels), default=0)
    if longest * 0.075 > width_per_label_in:   # ~0.075 in per 9 pt character
        ax.set_xticklabels([escape_text(label) for label in labels], rotation=30,
                           ha="right", rotation_mode="anchor")
    else:
        ax.set_xticklabels([escape_text(label) for label in labels])
    ax.grid(False, axis="x")


# --------------------------------------------------------------------------
# Memory timelines
# --------------------------------------------------------------------------

def plot_timelines(result, out, colors):
    """timeline-SCENARIO.png for every scenario and trace with timelines."""
    for scenario in scenario_order(result.runs):
        runs = [run for run in result.runs if run.scenario == scenario and run.timeline]
        if not runs:
            note(f"{scenario}: no timeline; skipping its timeline plot")
            continue
        sort_by_allocator(runs, colors)
        out.save(timeline_figure(result, scenario, runs, colors),
                 f"timeline-{scenario_slug(scenario)}.png")


def timeline_figure(result, scenario, runs, colors):
    """One scenario's reserved (solid) and requested (dashed) bytes per step."""
    step_lists = [[point["step"] for point in run.timeline] for run in runs]
    step_count = max(len(steps) for steps in step_lists)
    label_steps = (all(steps == step_lists[0] for steps in step_lists)
                   and step_count <= MAX_LABELLED_STEPS)
    requested_lists = [[point["requested"] for point in run.timeline] for run in runs]
    requested_shared = all(req == requested_lists[0] for req in requested_lists)
    largest = max(max(point["reserved"], point["requested"])
                  for run in runs for point in run.timeline)

    width = min(MAX_WIDTH_IN, max(9.0, 0.4 * step_count + 3.5)) if label_steps else 10.5
    fig, ax = plt.subplots(figsize=(width, 5.0))
    # One allocator's arena can be hundreds of times another's footprint: a
    # log axis then keeps the small lines readable (zeros are not drawn).
    scale, unit = byte_axis(ax.yaxis, [point[key] for run in runs for point in run.timeline
                                       for key in ("reserved", "requested")])
    log_axis = unit == "log scale"
    use_markers = step_count <= MAX_MARKED_STEPS
    # A sample is the state after its step and holds until the next step:
    # drawn as a staircase that changes at the step that changed it.
    groups = same_series_groups(runs, lambda run: [p["reserved"] for p in run.timeline])
    handles = []
    for index, group in enumerate(groups):
        run = group[0]
        marker = MARKERS[index % len(MARKERS)] if use_markers else None
        # Where two groups still meet on some steps, the earlier one is
        # drawn wider underneath so both colours show.
        ax.plot(range(len(run.timeline)), [p["reserved"] / scale for p in run.timeline],
                color=colors[run.allocator],
                lw=max(1.4, 3.8 - 0.6 * index) if step_count <= 100 else max(1.0, 2.2 - 0.3 * index),
                marker=marker, ms=max(4.0, 8.5 - 1.0 * index), drawstyle="steps-post",
                zorder=3)
        handles.append(Line2D([], [], color=colors[run.allocator], lw=2, marker=marker,
                              label=group_label(group)))
    for run in runs if not requested_shared else []:
        ax.plot(range(len(run.timeline)), [p["requested"] / scale for p in run.timeline],
                color=colors[run.allocator], lw=1.2, ls="--", drawstyle="steps-post", zorder=4)
    if requested_shared:
        ax.plot(range(len(requested_lists[0])), [v / scale for v in requested_lists[0]],
                color="black", lw=1.4, ls="--", drawstyle="steps-post", zorder=5)

    if label_steps:
        ax.set_xticks(range(step_count))
        ax.set_xticklabels([escape_text(abbreviate(step, STEP_LABEL_CHARS))
                            for step in step_lists[0]],
                           rotation=35, ha="right", rotation_mode="anchor")
        ax.set_xlabel("step")
    else:
        ax.xaxis.set_major_locator(mticker.MaxNLocator(integer=True))
        ax.set_xlabel(f"step number ({step_count} steps)")
    ax.set_xlim(-0.5, step_count - 0.5)
    if not log_axis:
        ax.set_ylim(bottom=0, top=largest / scale * 1.08 if largest > 0 else 1.0)
    ax.set_ylabel(f"memory ({unit})")
    ax.set_title(title_text(f"{scenario_label(scenario)}: memory at each step", result))

    handles.append(Line2D([], [], color="black", lw=2, label="reserved (solid)"))
    handles.append(Line2D([], [], color="black", lw=1.4, ls="--",
                          label="requested (dashed)" + (",\nsame for all" if requested_shared else "")))
    legend_outside(ax, handles, title="allocator (reserved)")
    return fig


# --------------------------------------------------------------------------
# Peaks and overhead ratio
# --------------------------------------------------------------------------

def plot_peaks(result, out, colors):
    """peaks.png: peak reserved (top) and overhead ratio (bottom), bars per
    allocator grouped by scenario or trace."""
    runs = [run for run in result.runs if "peak_reserved_bytes" in run.values]
    if not runs:
        note("no peak_reserved_bytes counters; skipping peaks.png")
        return
    scenarios = scenario_order(runs)
    allocators = allocator_order(run.allocator for run in runs)
    by_key = {(run.scenario, run.allocator): run for run in runs}
    bar, offsets = group_positions(len(scenarios), len(allocators))
    width = min(MAX_WIDTH_IN, max(9.0, len(scenarios) * (0.16 * len(allocators) + 0.4) + 3))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(width, 8.4), sharex=True)

    reserved_values = [run.values["peak_reserved_bytes"] for run in runs]
    requested_values = [run.values.get("peak_requested_bytes", 0) for run in runs]
    scale, unit = byte_axis(top.yaxis, reserved_values + requested_values, bars=True)
    for index, allocator in enumerate(allocators):
        xs, peaks, ratios = [], [], []
        for position, scenario in enumerate(scenarios):
            run = by_key.get((scenario, allocator))
            if run is None:
                continue
            xs.append(position + offsets[index])
            peaks.append(run.values["peak_reserved_bytes"] / scale)
            ratio = run.values.get("overhead_ratio")
            requested = run.values.get("peak_requested_bytes", 0)
            if ratio is None and requested > 0:
                ratio = run.values["peak_reserved_bytes"] / requested
            ratios.append(ratio if ratio else float("nan"))
        top.bar(xs, peaks, bar, color=colors[allocator], zorder=3)
        bottom.bar(xs, ratios, bar, color=colors[allocator], zorder=3)
    for position, scenario in enumerate(scenarios):
        requested = max((by_key[(scenario, a)].values.get("peak_requested_bytes", 0)
                         for a in allocators if (scenario, a) in by_key), default=0)
        if requested > 0:
            top.hlines(requested / scale, position - 0.45, position + 0.45,
                       colors="black", linestyles="--", lw=1.3, zorder=4)
    top.set_ylabel(f"peak reserved ({unit})")
    top.set_title(title_text("Peak reserved memory per allocator", result))

    ratio_values = [v for v in (run.values.get("overhead_ratio") for run in runs)
                    if v is not None and v > 0]
    if ratio_values and max(ratio_values) > 20:
        bottom.set_yscale("log")
        bottom.yaxis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{short_number(v)}×"))
    else:
        bottom.set_ylim(bottom=0)
        bottom.yaxis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{short_number(v)}×"))
    bottom.axhline(1.0, color="black", lw=1.0, ls=":", zorder=4)
    bottom.set_ylabel("overhead ratio\n(peak reserved / peak requested)")
    bottom.set_title("Overhead ratio (1× is ideal: nothing reserved beyond what was requested)")
    set_category_ticks(bottom, [scenario_label(s) for s in scenarios],
                       width * 0.8 / max(len(scenarios), 1))

    handles = [Patch(color=colors[a], label=escape_text(a)) for a in allocators]
    handles.append(Line2D([], [], color="black", ls="--", lw=1.3, label="peak requested"))
    legend_outside(top, handles, title="allocator")
    legend_outside(bottom, [Line2D([], [], color="black", ls=":", lw=1.0, label="1× (ideal)")])
    out.save(fig, "peaks.png")


# --------------------------------------------------------------------------
# Latency
# --------------------------------------------------------------------------

LATENCY_KEYS = (("malloc", "malloc_ns_p50", "malloc_ns_p99"),
                ("free", "free_ns_p50", "free_ns_p99"))


def plot_latency(result, micro, out, colors):
    """latency.png: from the microbench file per size when given (or when
    the results file itself has microbench entries), else per scenario."""
    source = micro if micro is not None else (result if result.microbench else None)
    if source is not None:
        out.save(latency_by_size(source, colors), "latency.png")
        return
    runs = [run for run in result.runs
            if any(run.values.get(key, 0) > 0 for _, p50, p99 in LATENCY_KEYS for key in (p50, p99))]
    if not runs:
        note("no malloc/free latency counters; skipping latency.png")
        return
    out.save(latency_by_scenario(result, runs, colors), "latency.png")


def latency_by_size(source, colors):
    """malloc and free panels: p50 (solid) and p99 (dashed) against size."""
    allocators = allocator_order(a for a, _, _ in source.microbench)
    local_colors = dict(colors)
    missing = [a for a in allocators if a not in local_colors]
    if missing:
        local_colors.update(allocator_colors(list(colors) + missing))
    fig, axes = plt.subplots(1, 2, figsize=(12.5, 4.8), sharey=True)
    all_values, all_sizes = [], []
    for (operation, p50_key, p99_key), ax in zip(LATENCY_KEYS, axes):
        for index, allocator in enumerate(allocators):
            points = sorted((size, values) for a, size, values in source.microbench
                            if a == allocator)
            marker = MARKERS[index % len(MARKERS)]
            for key, style, lw in ((p50_key, "-", 2.0), (p99_key, "--", 1.2)):
                pairs = [(size, values[key]) for size, values in points
                         if values.get(key, 0) > 0]
                if pairs:
                    ax.plot([s for s, _ in pairs], [v for _, v in pairs], ls=style, lw=lw,
                            marker=marker, ms=4 if style == "-" else 3,
                            color=local_colors[allocator])
                    all_values += [v for _, v in pairs]
                    all_sizes += [s for s, _ in pairs]
        ax.set_title(f"{operation} latency")
        ax.set_xlabel("request size (log scale)")
    for ax in axes:
        if all_sizes:
            set_log(ax.xaxis, 2)
            ax.xaxis.set_major_locator(mticker.LogLocator(base=2, numticks=8))
            ax.xaxis.set_major_formatter(mticker.FuncFormatter(lambda v, _: format_bytes(v)))
            ax.xaxis.set_minor_locator(mticker.NullLocator())
        if all_values:
            ns_log_axis(ax.yaxis)   # lines, not bars: autoscaled limits
    axes[0].set_ylabel("time per call (log scale)")
    fig.suptitle(title_text("Allocator latency by request size", source), y=1.02)
    markers = {a: MARKERS[i % len(MARKERS)] for i, a in enumerate(allocators)}
    handles = allocator_handles(allocators, local_colors, markers)
    handles.append(Line2D([], [], color="black", lw=2, label="p50 (solid)"))
    handles.append(Line2D([], [], color="black", lw=1.2, ls="--", label="p99 (dashed)"))
    legend_outside(axes[1], handles, title="allocator")
    return fig


def latency_by_scenario(result, runs, colors):
    """malloc and free panels: p50 (solid bar) and p99 (pale bar behind)
    per allocator, grouped by scenario."""
    scenarios = scenario_order(runs)
    allocators = allocator_order(run.allocator for run in runs)
    by_key = {(run.scenario, run.allocator): run for run in runs}
    bar, offsets = group_positions(len(scenarios), len(allocators))
    width = min(MAX_WIDTH_IN, max(9.0, len(scenarios) * (0.16 * len(allocators) + 0.4) + 3))
    fig, axes = plt.subplots(2, 1, figsize=(width, 8.4), sharex=True, sharey=True)
    drawn = []
    for (operation, p50_key, p99_key), ax in zip(LATENCY_KEYS, axes):
        for index, allocator in enumerate(allocators):
            for key, alpha in ((p99_key, 0.35), (p50_key, 1.0)):
                xs, ys = [], []
                for position, scenario in enumerate(scenarios):
                    run = by_key.get((scenario, allocator))
                    if run is not None and run.values.get(key, 0) > 0:
                        xs.append(position + offsets[index])
                        ys.append(run.values[key])
                if xs:
                    ax.bar(xs, ys, bar, color=colors[allocator], alpha=alpha, zorder=3)
                    drawn += ys
        ax.set_ylabel(f"{operation} time per call\n(log scale)")
        ax.set_title(f"{operation} latency" if operation == "free" else
                     title_text("malloc latency per scenario", result))
    for ax in axes:   # one scale for both: malloc and free compare at a glance
        ns_log_axis(ax.yaxis, drawn)
    set_category_ticks(axes[1], [scenario_label(s) for s in scenarios],
                       width * 0.8 / max(len(scenarios), 1))
    handles = [Patch(color=colors[a], label=escape_text(a)) for a in allocators]
    handles.append(Patch(color="0.25", label="p50 (solid bar)"))
    handles.append(Patch(color="0.25", alpha=0.35, label="p99 (pale bar)"))
    legend_outside(axes[0], handles, title="allocator")
    return fig


# --------------------------------------------------------------------------
# empty_cache loop
# --------------------------------------------------------------------------

VARIANT_KEY = re.compile(r"^(every(\d+)|never)_(iter_ns|driver_calls|peak_reserved_bytes)$")


def variant_label(variant):
    """'every1' -> 'every iteration', 'every10' -> 'every 10 iterations'."""
    if variant == "never":
        return "never"
    count = int(variant[len("every"):])
    return "every iteration" if count == 1 else f"every {count} iterations"


def plot_empty_cache_loop(result, out, colors):
    """empty_cache_loop.png: per allocator, time per iteration, driver
    calls and (when recorded) peak reserved for each empty_cache variant."""
    runs = runs_with_counter(result, "empty_cache_loop", VARIANT_KEY)
    if not runs:
        note("no empty_cache_loop entries with every*/never* counters; "
             "skipping empty_cache_loop.png")
        return
    sort_by_allocator(runs, colors)
    variants = set()
    metrics = set()
    for run in runs:
        for key in run.values:
            match = VARIANT_KEY.match(key)
            if match:
                variants.add(match.group(1))
                metrics.add(match.group(3))
    variants = sorted(variants, key=lambda v: (v == "never", int(v[5:]) if v != "never" else 0))
    panels = [m for m in ("iter_ns", "driver_calls", "peak_reserved_bytes") if m in metrics]
    cmap = plt.get_cmap("viridis")
    variant_colors = {v: cmap(0.15 + 0.7 * i / max(len(variants) - 1, 1))
                      for i, v in enumerate(variants)}
    allocators = [run.allocator for run in runs]
    # Panels stacked, one allocator axis shared: wide side-by-side panels
    # would shrink below readability in a README.
    width = min(MAX_WIDTH_IN, max(8.0, len(allocators) * (0.3 * len(variants) + 0.35) + 3))
    fig, axes = plt.subplots(len(panels), 1, figsize=(width, 1.2 + 2.7 * len(panels)),
                             sharex=True, squeeze=False)
    axes = [row[0] for row in axes]
    bar, offsets = group_positions(len(allocators), len(variants))
    for metric, ax in zip(panels, axes):
        values = [run.values.get(f"{v}_{metric}") for run in runs for v in variants]
        present = [v for v in values if v is not None]
        if metric == "iter_ns":
            positive = [v for v in present if v > 0]
            if positive and max(positive) / min(positive) > 30:
                ns_log_axis(ax.yaxis, positive)
                scale, ylabel = 1.0, "time per iteration\n(log scale)"
            else:
                unit, scale = ns_unit(max(present, default=0))
                ylabel = f"time per iteration ({unit})"
        elif metric == "peak_reserved_bytes":
            scale, unit = byte_axis(ax.yaxis, present, bars=True)
            ylabel = f"peak reserved\n({unit})"
        else:
            positive = [v for v in present if v > 0]
            if positive and max(positive) / min(positive) > 30:
                set_log(ax.yaxis, 10)
                ax.set_ylim(0.5, max(positive) * 4)
            scale, ylabel = 1.0, "driver calls\n(alloc + free)"
        for index, variant in enumerate(variants):
            xs, ys = [], []
            for position, run in enumerate(runs):
                value = run.values.get(f"{variant}_{metric}")
                if value is not None:
                    xs.append(position + offsets[index])
                    ys.append(value / scale)
            bars = ax.bar(xs, ys, bar, color=variant_colors[variant], zorder=3)
            if metric == "driver_calls" and len(xs) * len(variants) <= 36:
                ax.bar_label(bars, labels=[f"{y:.0f}" for y in ys], fontsize=7, padding=2, rotation=90)
        if metric == "driver_calls":
            ax.margins(y=0.15)
        ax.set_ylabel(ylabel)
    set_category_ticks(axes[-1], allocators, width * 0.8 / max(len(allocators), 1))
    axes[0].set_title(title_text("empty_cache() every iteration, every N iterations, never",
                                 result))
    handles = [Patch(color=variant_colors[v], label=variant_label(v)) for v in variants]
    legend_outside(axes[0], handles, title="empty_cache()")
    out.save(fig, "empty_cache_loop.png")


# --------------------------------------------------------------------------
# Dataloader batch sweep
# --------------------------------------------------------------------------

BATCH_KEY = re.compile(r"^batch(\d+)_peak_(reserved|requested)_bytes$")


def plot_dataloader(result, out, colors):
    """dataloader_batches.png: peak reserved (solid) and requested (dashed)
    against batch size, one colour per allocator."""
    runs = runs_with_counter(result, "dataloader_batches", BATCH_KEY)
    if not runs:
        note("no dataloader_batches entries with batchN_peak_* counters; "
             "skipping dataloader_batches.png")
        return
    sort_by_allocator(runs, colors)
    batches = sorted({int(BATCH_KEY.match(key).group(1)) for run in runs
                      for key in run.values if BATCH_KEY.match(key)})

    def series(run, kind):
        pairs = [(b, run.values.get(f"batch{b}_peak_{kind}_bytes")) for b in batches]
        return [(b, v) for b, v in pairs if v is not None]

    requested = [series(run, "requested") for run in runs]
    requested_shared = all(r == requested[0] for r in requested)
    values = [v for run in runs for kind in ("reserved", "requested")
              for _, v in series(run, kind)]
    fig, ax = plt.subplots(figsize=(10.0, 5.2))
    scale, unit = byte_axis(ax.yaxis, values, log_spread=30.0)
    handles = []
    for index, group in enumerate(same_series_groups(runs, lambda r: series(r, "reserved"))):
        marker = MARKERS[index % len(MARKERS)]
        reserved = series(group[0], "reserved")
        ax.plot([b for b, _ in reserved], [v / scale for _, v in reserved],
                color=colors[group[0].allocator], lw=max(1.4, 3.8 - 0.6 * index),
                marker=marker, ms=max(4.0, 8.5 - 1.0 * index), zorder=3)
        handles.append(Line2D([], [], color=colors[group[0].allocator], lw=2, marker=marker,
                              label=group_label(group)))
    for index, run in enumerate(runs):
        if not requested_shared and requested[index]:
            ax.plot([b for b, _ in requested[index]], [v / scale for _, v in requested[index]],
                    color=colors[run.allocator], lw=1.2, ls="--", zorder=4)
    if requested_shared and requested[0]:
        ax.plot([b for b, _ in requested[0]], [v / scale for _, v in requested[0]],
                color="black", lw=1.3, ls="--", zorder=5)
    if len(batches) > 1 and batches[-1] / max(batches[0], 1) > 8:
        ax.set_xscale("log", base=2)
    ax.set_xticks(batches)
    ax.xaxis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{v:.0f}"))
    ax.xaxis.set_minor_locator(mticker.NullLocator())
    ax.set_xlabel("batch size")
    ax.set_ylabel(f"peak memory ({unit})")
    if unit != "log scale":
        ax.set_ylim(bottom=0)
    ax.set_title(title_text("dataloader_batches: peak memory against batch size", result))
    handles.append(Line2D([], [], color="black", lw=2, label="peak reserved (solid)"))
    handles.append(Line2D([], [], color="black", lw=1.3, ls="--",
                          label="peak requested (dashed)" + (",\nsame for all" if requested_shared else "")))
    legend_outside(ax, handles, title="allocator (peak reserved)")
    out.save(fig, "dataloader_batches.png")


# --------------------------------------------------------------------------
# Segment map at peak reserved
# --------------------------------------------------------------------------

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
        names = ", ".join(run.name for run in candidates) or "none"
        raise InputError(f"{result.path}: no entry {wanted!r} "
                         f"(entries with segment maps: {names})")
    if not candidates:
        return None
    return max(candidates, key=lambda run: (run.values.get("external_frag_at_peak", 0),
                                            run.values.get("peak_reserved_bytes", 0)))


def plot_segments(result, run, out):
    """segments-SCENARIO-ALLOCATOR.png: each device segment a bar, its blocks
    allocated (blue) or free (grey), like PyTorch memory_viz's allocator
    state view (pytorch.org/memory_viz)."""
    if run is None:
        note("no entry has 'segments_at_peak'; skipping the segment map")
        return
    segments = sorted(run.segments, key=lambda s: s["address"])
    shown = segments
    if len(segments) > MAX_SEGMENT_ROWS:
        keep = sorted(segments, key=lambda s: -s["size"])[:MAX_SEGMENT_ROWS]
        shown = sorted(keep, key=lambda s: s["address"])
    sizes = [s["size"] for s in shown if s["size"] > 0] or [1]
    # Segments of very different sizes (2 MiB next to 1 GiB) would leave the
    # small ones as slivers: each bar then spans its own segment.
    normalised = max(sizes) / min(sizes) > 16
    unit, scale = byte_unit(max(sizes))
    streams = {s["stream"] for s in shown}

    rows = len(shown)
    fig, ax = plt.subplots(figsize=(11.0, max(3.2, 1.9 + 0.3 * rows)))
    allocated_color, free_color = "#1f77b4", "#d9d9d9"
    for row, segment in enumerate(shown):
        y = rows - 1 - row
        length = 1.0 if normalised else segment["size"] / scale
        per_byte = length / segment["size"] if segment["size"] else 0
        ax.broken_barh([(0, length)], (y - 0.38, 0.76), facecolor="white",
                       edgecolor="black", lw=0.8, zorder=2)
        for allocated in (False, True):
            spans = [((b["address"] - segment["address"]) * per_byte, b["size"] * per_byte)
                     for b in segment["blocks"] if b["allocated"] == allocated]
            if spans:
                ax.broken_barh(spans, (y - 0.38, 0.76),
                               facecolor=allocated_color if allocated else free_color,
                               edgecolor="white", lw=0.6, zorder=3)
        ax.broken_barh([(0, length)], (y - 0.38, 0.76), facecolor="none",
                       edgecolor="black", lw=0.8, zorder=4)
    labels = []
    for segment in shown:
        label = f"0x{segment['address']:x}  {format_bytes(segment['size'])}"
        if len(streams) > 1 and segment["stream"] is not None:
            label += f"  s{segment['stream']}"
        labels.append(label)
    ax.set_yticks(range(rows))
    ax.set_yticklabels(list(reversed(labels)), fontsize=8 if rows > 20 else 9,
                       family="monospace")
    ax.set_ylim(-0.6, rows - 0.4)
    ax.grid(False, axis="y")
    if normalised:
        ax.set_xlim(0, 1.0)
        ax.xaxis.set_major_formatter(mticker.PercentFormatter(1.0))
        ax.set_xlabel("offset within the segment (each bar spans its own segment)")
    else:
        ax.set_xlim(0, max(sizes) / scale * 1.01)
        ax.set_xlabel(f"offset within the segment ({unit})")
    ax.set_ylabel("segment (address, size" + (", stream)" if len(streams) > 1 else ")"))

    reserved = sum(s["size"] for s in segments)
    allocated = sum(b["size"] for s in segments for b in s["blocks"] if b["allocated"])
    free_blocks = [b["size"] for s in segments for b in s["blocks"] if not b["allocated"]]
    free = sum(free_blocks)
    summary = (f"{len(segments)} segment{'s' if len(segments) != 1 else ''}, reserved {format_bytes(reserved)}, "
               f"allocated {format_bytes(allocated)}, free {format_bytes(free)}")
    if free_blocks:
        summary += f" (largest {format_bytes(max(free_blocks))})"
    if "external_frag_at_peak" in run.values:
        summary += f", external fragmentation {run.values['external_frag_at_peak']:.0%}"
    if len(shown) < len(segments):
        summary += f"\nshowing the {len(shown)} largest segments"
    ax.set_title(title_text(f"Segments at peak reserved: "
                            f"{scenario_label(run.scenario)} / {run.allocator}", result)
                 + "\n" + summary)
    handles = [Patch(facecolor=allocated_color, label="allocated block"),
               Patch(facecolor=free_color, label="free (cached) block"),
               Patch(facecolor="white", edgecolor="black", label="in no block (gap)")]
    legend_outside(ax, handles)
    out.save(fig, f"segments-{scenario_slug(run.scenario)}-{slug(run.allocator)}.png")


# --------------------------------------------------------------------------
# Two files compared
# --------------------------------------------------------------------------

COMPARE_METRICS = (("peak reserved", lambda run: run.values.get("peak_reserved_bytes"),
                    format_bytes),
                   ("time per iteration", lambda run: run.real_time_ns, format_ns))


def plot_compare(first, other, out, name):
    """compare.png: for each scenario x allocator in both files, B / A of
    peak reserved and of time per iteration as a colour-coded grid."""
    runs_a = {(run.scenario, run.allocator): run for run in first.runs}
    runs_b = {(run.scenario, run.allocator): run for run in other.runs}
    common = [key for key in runs_a if key in runs_b]
    if not common:
        note(f"{first.path} and {other.path} share no SCENARIO/ALLOCATOR; skipping {name}")
        return
    scenarios = scenario_order([runs_a[key] for key in common])
    allocators = allocator_order(a for _, a in common)
    limit = 3.0   # colours saturate at 8x either way
    cmap = plt.get_cmap("RdBu_r").copy()
    cmap.set_bad("0.9")
    cell_w = max(0.85, max(len(a) for a in allocators) * 0.085)
    label_w = max(len(scenario_label(s)) for s in scenarios) * 0.085
    panel_h = 0.8 + 0.45 * len(scenarios)
    width = min(MAX_WIDTH_IN, cell_w * len(allocators) + label_w + 2.0)
    fig, axes = plt.subplots(2, 1, figsize=(width, 2 * panel_h + 2.2), squeeze=False)
    axes = [row[0] for row in axes]
    image = None
    for (metric, value_of, _), ax in zip(COMPARE_METRICS, axes):
        grid = []
        for scenario in scenarios:
            row = []
            for allocator in allocators:
                key = (scenario, allocator)
                a = value_of(runs_a[key]) if key in runs_a and key in runs_b else None
                b = value_of(runs_b[key]) if key in runs_a and key in runs_b else None
                if a is None or b is None:
                    row.append(None)
                elif a == 0 and b == 0:
                    row.append(1.0)
                elif a <= 0 or b <= 0:
                    row.append(None)
                else:
                    row.append(b / a)
            grid.append(row)
        logs = [[math.log2(r) if r else float("nan") for r in row] for row in grid]
        image = ax.imshow(logs, cmap=cmap, vmin=-limit, vmax=limit, aspect="auto")
        for y, row in enumerate(grid):
            for x, ratio in enumerate(row):
                if ratio is None:
                    text, color = "–", "0.4"
                else:
                    text = f"{ratio:.2f}×" if ratio < 10 else f"{ratio:.0f}×"
                    color = "white" if abs(math.log2(ratio)) > 0.6 * limit else "black"
                ax.text(x, y, text, ha="center", va="center", fontsize=9, color=color)
        set_category_ticks(ax, allocators, width * 0.7 / len(allocators))
        ax.set_yticks(range(len(scenarios)))
        ax.set_yticklabels([escape_text(scenario_label(s)) for s in scenarios])
        ax.grid(False)
        ax.set_title(f"{metric}: B / A")
        for spine in ax.spines.values():
            spine.set_visible(False)
    bar = fig.colorbar(image, ax=axes, shrink=0.8, pad=0.03, aspect=30)
    ticks = [t for t in range(-int(limit), int(limit) + 1)]
    bar.set_ticks(ticks)
    bar.set_ticklabels([f"{2.0 ** t:g}×" if t >= 0 else f"1/{2 ** -t}×" for t in ticks])
    bar.set_label("B / A (red: B larger, blue: B smaller)")
    axes[0].set_title(f"Comparison of two runs\nA: {escape_text(first.file_label())}\n"
                      f"B: {escape_text(other.file_label())}\n\n{COMPARE_METRICS[0][0]}: B / A")
    out.save(fig, name)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------

def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog=PROG, description="PNG plots from vrambench results JSON.")
    parser.add_argument("results", nargs="*", metavar="RESULTS.json",
                        help="a `vrambench run` results file; further files are compared "
                             "with the first")
    parser.add_argument("--latest", metavar="DIR",
                        help="plot the newest run result in DIR (by context date; "
                             "claims-*.json excluded) and its newest microbench file")
    parser.add_argument("--out-dir", default="plots", help="where the PNGs go (default: plots)")
    parser.add_argument("--segments", metavar="SCENARIO/ALLOCATOR",
                        help="entry whose segment map to draw (default: the one with the "
                             "largest external_frag_at_peak)")
    parser.add_argument("--microbench", metavar="MICRO.json",
                        help="a `vrambench microbench` file for latency by size")
    args = parser.parse_args(argv)
    if bool(args.results) == bool(args.latest):
        parser.error("give RESULTS.json files or --latest DIR (one of the two)")
    return args


def main(argv=None):
    """Runs the script; returns the exit status (0, 1 failure, 2 bad input)."""
    args = parse_args(argv)
    try:
        if args.latest:
            first, micro = find_latest(args.latest)
            others = []
        else:
            first = load_run_result(args.results[0])
            others = [load_run_result(path) for path in args.results[1:]]
            micro = None
        if args.microbench:
            micro = load_microbench(args.microbench)
        segments_run = choose_segments_run(first, args.segments)
    except InputError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        load_matplotlib()
    except RuntimeError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return EXIT_FAILURE
    try:
        out = Output(args.out_dir)
    except InputError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return EXIT_FAILURE

    try:
        names = [run.allocator for run in first.runs]
        for other in others:
            names += [run.allocator for run in other.runs]
        colors = allocator_colors(names)
        plot_timelines(first, out, colors)
        plot_peaks(first, out, colors)
        plot_latency(first, micro, out, colors)
        plot_empty_cache_loop(first, out, colors)
        plot_dataloader(first, out, colors)
        plot_segments(first, segments_run, out)
        for number, other in enumerate(others, start=2):
            plot_compare(first, other, out,
                         "compare.png" if len(others) == 1 else f"compare-{number}.png")
        paths = out.commit()
    except Exception as error:   # any rendering failure: leave no partial set
        out.discard()
        print(f"{PROG}: error: plotting failed: {type(error).__name__}: {error}",
              file=sys.stderr)
        return EXIT_FAILURE
    except BaseException:
        out.discard()
        raise
    print(f"{PROG}: wrote {len(paths)} PNGs to {args.out_dir}: "
          + ", ".join(os.path.basename(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
