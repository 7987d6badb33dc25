"""Drawing helpers shared by the figures: units, labels, colours, axes.

Importing it imports matplotlib with the Agg backend (no display needed)
and sets the figures' style; python/vrambench/plots/cli.py imports it only once the input is
known to be good, so bad input is reported even where matplotlib is missing.
"""

import math
import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
import matplotlib.ticker as mticker  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

plt.rcParams.update({
    "font.size": 11, "axes.titlesize": 12, "axes.labelsize": 11,
    "legend.fontsize": 10, "legend.title_fontsize": 10,
    "xtick.labelsize": 10, "ytick.labelsize": 10,
    "savefig.dpi": 120, "axes.grid": True, "grid.alpha": 0.3,
    "axes.axisbelow": True, "axes.spines.top": False, "axes.spines.right": False,
})

# The order users see allocators in (README's allocator table); also fixes colours.
KNOWN_ALLOCATORS = ["cuda", "caching", "async", "expandable", "bfc", "buddy",
                    "binning", "stitch"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "*"]
MAX_LABELLED_STEPS = 30     # more steps than this: index ticks, no names
MAX_MARKED_STEPS = 60       # more steps than this: lines without markers
MAX_SEGMENT_ROWS = 48       # more segments than this: the largest only
STEP_LABEL_CHARS = 28
MAX_SLUG_CHARS = 80         # a PNG's name stays well below a file name's limit
# Figures are at most this wide (inches at 120 dpi) so that text stays
# readable when a README shows them about 900 pixels wide.
MAX_WIDTH_IN = 12.5


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
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text))[:MAX_SLUG_CHARS].strip("-.") or "x"


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


# --------------------------------------------------------------------------
# Shared drawing helpers
# --------------------------------------------------------------------------

def allocator_order(allocators):
    """Allocators in the order of README's allocator table, unknown ones after,
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
