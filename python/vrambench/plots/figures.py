"""The figures: one function per figure, each taking results (python/vrambench/results.py)
and returning a matplotlib Figure, and FIGURES, the table of them.

A figure function raises NoData (a note for the user, not an error) when
the results lack what it draws. Every title carries the device line of the
file it draws ("(simulated)" on the simulated device); a figure never draws
files of two devices without saying so: latency refuses a microbench file
of another device, a comparison names both devices in its title.
"""

import collections
import functools
import math

from vrambench.plots.draw import (MARKERS, MAX_LABELLED_STEPS, MAX_MARKED_STEPS, MAX_SEGMENT_ROWS,
                        MAX_WIDTH_IN, STEP_LABEL_CHARS, Line2D, Patch, abbreviate,
                        allocator_colors, allocator_handles, allocator_order, byte_axis,
                        byte_unit, escape_text, format_bytes, format_ns, group_label,
                        group_positions, legend_outside, mticker, ns_log_axis, ns_unit, plt,
                        same_series_groups, scenario_label, scenario_order, scenario_slug,
                        set_category_ticks, set_log, short_number, slug, sort_by_allocator,
                        title_text)
from vrambench.results import check_same_device, same_device


class NoData(Exception):
    """The results lack what a figure draws: the message is a note."""


def time_label(result, what):
    """What a time axis of `result` shows: `what` on a GPU; on the simulated
    device the host-side time of the allocator and the device's model, never
    presented as a GPU time."""
    return f"host-side {what}\n(simulated device's model)" if result.simulated else what


# --------------------------------------------------------------------------
# Memory timelines
# --------------------------------------------------------------------------

def timeline_figure(result, scenario, colors):
    """One scenario's (or trace's) reserved (solid) and requested (dashed)
    bytes per step, a line per allocator."""
    runs = [run for run in result.runs if run.scenario == scenario and run.timeline]
    if not runs:
        raise NoData(f"{scenario}: no timeline; skipping its timeline plot")
    sort_by_allocator(runs, colors)
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

def peaks_figure(result, colors):
    """peaks.png: peak reserved (top) and overhead ratio (bottom), bars per
    allocator grouped by scenario or trace."""
    runs = [run for run in result.runs if "peak_reserved_bytes" in run.values]
    if not runs:
        raise NoData("no peak_reserved_bytes counters; skipping peaks.png")
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
    return fig


# --------------------------------------------------------------------------
# Latency
# --------------------------------------------------------------------------

LATENCY_KEYS = (("malloc", "malloc_ns_p50", "malloc_ns_p99"),
                ("free", "free_ns_p50", "free_ns_p99"))


def latency_figure(result, micro, colors):
    """latency.png: from the microbench file per size when given (or when
    the results file itself has microbench entries), else per scenario.
    A microbench file of another device is refused (figures never mix
    devices)."""
    check_same_device(result, micro)
    source = micro if micro is not None else (result if result.microbench else None)
    if source is not None:
        return latency_by_size(source, colors)
    runs = [run for run in result.runs
            if any(run.values.get(key, 0) > 0 for _, p50, p99 in LATENCY_KEYS for key in (p50, p99))]
    if not runs:
        raise NoData("no malloc/free latency counters; skipping latency.png")
    return latency_by_scenario(result, runs, colors)


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
    axes[0].set_ylabel(time_label(source, "time per call") + " (log scale)")
    fig.suptitle(title_text("Allocator latency by request size"
                            + (" (host-side times of the simulated device's model)" if source.simulated else ""),
                            source), y=1.02)
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
        ax.set_ylabel(time_label(result, f"{operation} time per call") + "\n(log scale)")
        ax.set_title(f"{operation} latency" if operation == "free" else
                     title_text("malloc latency per scenario"
                                + (" (host-side times of the simulated device's model)" if result.simulated else ""),
                                result))
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

EMPTY_CACHE_PANELS = ("iter_ns", "driver_calls", "peak_reserved_bytes")


def variant_label(every):
    """A variant's legend text from its parameter: empty_cache every
    `every` iterations (0: never)."""
    if every == 0:
        return "never"
    return "every iteration" if every == 1 else f"every {every:g} iterations"


def runs_with_families(result, scenario, family_keys):
    """(runs of scenario that have a counter of one of the families
    family_keys, its CounterFamilies); NoData when there are none."""
    families = result.families(scenario)
    if families is None:
        raise NoData(f"no counter families for {scenario} in the file's 'names' or "
                     f"docs/names.json; skipping {scenario}.png")
    counters = {families.counter(key, member) for key in family_keys
                for member, _ in families.members} - {None}
    runs = [run for run in result.runs if run.scenario == scenario
            and any(counter in run.values for counter in counters)]
    if not runs:
        raise NoData(f"no {scenario} entries with its family counters; skipping {scenario}.png")
    return runs, families


def empty_cache_loop_figure(result, colors):
    """empty_cache_loop.png: per allocator, time per iteration, driver
    calls and (when recorded) peak reserved for each empty_cache variant
    (the members of the scenario's counter families)."""
    runs, families = runs_with_families(result, "empty_cache_loop", EMPTY_CACHE_PANELS)
    sort_by_allocator(runs, colors)

    def value(run, metric, variant):
        return run.values.get(families.counter(metric, variant))

    variants = [member for member, _ in families.members
                if any(value(run, metric, member) is not None
                       for run in runs for metric in EMPTY_CACHE_PANELS)]
    parameters = dict(families.members)
    panels = [m for m in EMPTY_CACHE_PANELS
              if any(value(run, m, v) is not None for run in runs for v in variants)]
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
        values = [value(run, metric, v) for run in runs for v in variants]
        present = [v for v in values if v is not None]
        if metric == "iter_ns":
            positive = [v for v in present if v > 0]
            if positive and max(positive) / min(positive) > 30:
                ns_log_axis(ax.yaxis, positive)
                scale, ylabel = 1.0, time_label(result, "time per iteration") + "\n(log scale)"
            else:
                unit, scale = ns_unit(max(present, default=0))
                ylabel = time_label(result, "time per iteration") + f" ({unit})"
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
                number = value(run, metric, variant)
                if number is not None:
                    xs.append(position + offsets[index])
                    ys.append(number / scale)
            bars = ax.bar(xs, ys, bar, color=variant_colors[variant], zorder=3)
            if metric == "driver_calls" and len(xs) * len(variants) <= 36:
                ax.bar_label(bars, labels=[f"{y:.0f}" for y in ys], fontsize=7, padding=2, rotation=90)
        if metric == "driver_calls":
            ax.margins(y=0.15)
        ax.set_ylabel(ylabel)
    set_category_ticks(axes[-1], allocators, width * 0.8 / max(len(allocators), 1))
    axes[0].set_title(title_text("empty_cache() every iteration, every N iterations, never",
                                 result))
    handles = [Patch(color=variant_colors[v], label=variant_label(parameters[v])) for v in variants]
    legend_outside(axes[0], handles, title="empty_cache()")
    return fig


# --------------------------------------------------------------------------
# Dataloader batch sweep
# --------------------------------------------------------------------------

# The dataloader_batches counter families drawn, by what they hold.
BATCH_FAMILIES = {"reserved": "peak_reserved_bytes", "requested": "peak_requested_bytes"}


def dataloader_figure(result, colors):
    """dataloader_batches.png: peak reserved (solid) and requested (dashed)
    against batch size (the members of the scenario's counter families),
    one colour per allocator."""
    runs, families = runs_with_families(result, "dataloader_batches", BATCH_FAMILIES.values())
    sort_by_allocator(runs, colors)
    members = sorted(families.members, key=lambda member: member[1])
    batches = [size for _, size in members]

    def series(run, kind):
        pairs = [(size, run.values.get(families.counter(BATCH_FAMILIES[kind], member)))
                 for member, size in members]
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
    return fig


# --------------------------------------------------------------------------
# Segment map at peak reserved
# --------------------------------------------------------------------------

def segments_figure(result, run):
    """segments-SCENARIO-ALLOCATOR.png: each device segment a bar, its blocks
    allocated (blue) or free (grey), like PyTorch memory_viz's allocator
    state view (pytorch.org/memory_viz)."""
    if run is None:
        raise NoData("no entry has 'segments_at_peak'; skipping the segment map")
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
    return fig


# --------------------------------------------------------------------------
# Two files compared
# --------------------------------------------------------------------------

COMPARE_METRICS = (("peak reserved", lambda run: run.values.get("peak_reserved_bytes"),
                    format_bytes),
                   ("time per iteration", lambda run: run.real_time_ns, format_ns))


def compare_figure(first, other):
    """compare.png: for each scenario x allocator in both files, B / A of
    peak reserved and of time per iteration as a colour-coded grid. The
    title names both files' devices (a comparison may span two devices).
    A simulated device's time is a host-side model's, never a GPU time: two
    sim files compare it so labelled; a sim file and a GPU file compare
    memory only."""
    metrics = list(COMPARE_METRICS)
    time_note = ""
    if first.simulated != other.simulated:
        metrics = [m for m in metrics if m[0] != "time per iteration"]
        time_note = "\ntime not compared: a simulated device's times are host-side model times, not GPU times"
    elif first.simulated:
        metrics = [(f"host-side {name} (simulated device's model)" if name == "time per iteration" else name,
                    value_of, fmt) for name, value_of, fmt in metrics]
    runs_a = {(run.scenario, run.allocator): run for run in first.runs}
    runs_b = {(run.scenario, run.allocator): run for run in other.runs}
    common = [key for key in runs_a if key in runs_b]
    if not common:
        raise NoData(f"{first.path} and {other.path} share no SCENARIO/ALLOCATOR; "
                     "skipping their comparison")
    scenarios = scenario_order([runs_a[key] for key in common])
    allocators = allocator_order(a for _, a in common)
    limit = 3.0   # colours saturate at 8x either way
    cmap = plt.get_cmap("RdBu_r").copy()
    cmap.set_bad("0.9")
    cell_w = max(0.85, max(len(a) for a in allocators) * 0.085)
    label_w = max(len(scenario_label(s)) for s in scenarios) * 0.085
    panel_h = 0.8 + 0.45 * len(scenarios)
    width = min(MAX_WIDTH_IN, cell_w * len(allocators) + label_w + 2.0)
    fig, axes = plt.subplots(len(metrics), 1, figsize=(width, len(metrics) * panel_h + 2.2), squeeze=False)
    axes = [row[0] for row in axes]
    image = None
    for (metric, value_of, _), ax in zip(metrics, axes):
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
    devices = "" if same_device(first, other) else " on two different devices"
    axes[0].set_title(f"Comparison of two runs{devices}\nA: {escape_text(first.file_label())}\n"
                      f"B: {escape_text(other.file_label())}{time_note}\n\n{metrics[0][0]}: B / A")
    return fig


# --------------------------------------------------------------------------
# The table of figures
# --------------------------------------------------------------------------

class Inputs:
    """What the figures are drawn from: the run result, an optional
    microbench result, results to compare with, the entry whose segment map
    to draw, and one colour per allocator across all of them."""

    def __init__(self, result, micro=None, others=(), segments_run=None):
        self.result = result
        self.micro = micro
        self.others = list(others)
        self.segments_run = segments_run
        names = [run.allocator for other in [result, *self.others] for run in other.runs]
        self.colors = allocator_colors(names)


def timeline_pngs(inputs):
    """A timeline PNG per scenario (and trace) of the result."""
    return [(f"timeline-{scenario_slug(scenario)}.png",
             functools.partial(timeline_figure, inputs.result, scenario, inputs.colors))
            for scenario in scenario_order(inputs.result.runs)]


def segments_pngs(inputs):
    """The segment map of the chosen entry, named after it."""
    run = inputs.segments_run
    name = (f"segments-{scenario_slug(run.scenario)}-{slug(run.allocator)}.png"
            if run is not None else "segments.png")
    return [(name, functools.partial(segments_figure, inputs.result, run))]


def compare_pngs(inputs):
    """A comparison PNG per other result (compare.png when there is one)."""
    return [("compare.png" if len(inputs.others) == 1 else f"compare-{number}.png",
             functools.partial(compare_figure, inputs.result, other))
            for number, other in enumerate(inputs.others, start=2)]


def one_png(name, function, *fields):
    """A table entry's plan for a figure drawn once, from Inputs' fields."""
    return lambda inputs: [(name, functools.partial(
        function, *(getattr(inputs, field) for field in fields)))]


# name -> (the inputs it needs, its plan: Inputs -> [(PNG name, draw())]),
# in the order the PNGs are made.
Figure = collections.namedtuple("Figure", "name needs plan")
FIGURES = (
    Figure("timeline", ("result",), timeline_pngs),
    Figure("peaks", ("result",), one_png("peaks.png", peaks_figure, "result", "colors")),
    Figure("latency", ("result", "micro"),
           one_png("latency.png", latency_figure, "result", "micro", "colors")),
    Figure("empty_cache_loop", ("result",),
           one_png("empty_cache_loop.png", empty_cache_loop_figure, "result", "colors")),
    Figure("dataloader_batches", ("result",),
           one_png("dataloader_batches.png", dataloader_figure, "result", "colors")),
    Figure("segments", ("result", "segments_run"), segments_pngs),
    Figure("compare", ("result", "others"), compare_pngs),
)
