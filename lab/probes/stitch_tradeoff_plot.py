#!/usr/bin/env python3
"""vrambench plots - stitch's trade-off between memory and driver work.

figure(data) draws what lab/probes/stitch_tradeoff.py measured on the simulated
device: for each workload, stitch's overhead ratio (peak reserved / peak
requested) against its VM driver calls (left) and against its estimated GPU
time over caching's (right: host time + calls x the per-call costs measured
by lab/probes/probe_driver.c), one point per setting (chunk_mb/handle_max_mb and
stitch_max_maps: "8/8 s0" fixed 8 MiB chunks and no stitched ranges, "8/- s16"
one handle per growth of at least 8 MiB and stitched ranges of up to 16
mappings), joined in order of calls.
Standalone: imports only matplotlib.

    python3 lab/probes/stitch_tradeoff_plot.py DATA.json OUT.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402


def _label(row):
    """A short name of a stitch row's setting: chunk_mb/handle_max_mb ("-": no maximum), then
    "s" and stitch_max_maps where the row names it (s0: no stitched ranges); chunk_mb alone where
    the row names no handle_max_mb."""
    values = dict(item.split("=", 1) for item in row["config"].split(",") if "=" in item)
    chunk = values.get("chunk_mb", "default")
    if "handle_max_mb" not in values:
        return chunk
    label = f"{chunk}/{'-' if values['handle_max_mb'] == '0' else values['handle_max_mb']}"
    return label + (f" s{values['stitch_max_maps']}" if "stitch_max_maps" in values else "")


def figure(data):
    """The trade-off figure for `data` ({"rows": [...], "cost_us": {...}})."""
    rows = [row for row in data["rows"] if row["allocator"] == "stitch"]
    workloads = sorted({row["workload"] for row in rows})
    fig = Figure(figsize=(12, 5))
    calls_axes, time_axes = fig.subplots(1, 2)
    colors = matplotlib.colormaps["tab20"].colors  # more workloads than the default cycle's 10 colours
    for index, workload in enumerate(workloads):
        points = [r for r in rows if r["workload"] == workload]
        label = workload.rsplit("/", 1)[-1].replace(".trace.gz", "")
        for axes, key in ((calls_axes, "calls"), (time_axes, "vs_caching")):
            points.sort(key=lambda p: p[key])  # a curve from the most calls to the fewest
            line, = axes.plot([p[key] for p in points], [p["overhead"] for p in points], marker="o", label=label,
                              color=colors[index % len(colors)])
            for p in points:
                axes.annotate(_label(p), (p[key], p["overhead"]), fontsize=6,
                              textcoords="offset points", xytext=(3, 3), color=line.get_color())
    costs = ", ".join(f"{k} {v:g}" for k, v in data.get("cost_us", {}).items())
    calls_axes.set_xlabel("VM driver calls (create+map+unmap+set_access+release)")
    time_axes.set_xlabel("estimated GPU time / caching's (host + calls x per-call us)")
    time_axes.set_title(costs, fontsize=7)
    for target in (1.5, 2.0):
        time_axes.axvline(target, color="grey", linestyle="--", linewidth=1)
    for axes in (calls_axes, time_axes):
        axes.set_xscale("log")
        axes.set_ylabel("overhead ratio (peak reserved / peak requested)")
        axes.axhline(1.02, color="grey", linestyle=":", linewidth=1)
        axes.grid(True, alpha=0.3)
    calls_axes.legend(fontsize=7)
    fig.suptitle("stitch: handle sizes and stitched ranges (simulated device; points labelled "
                 "chunk_mb/handle_max_mb s stitch_max_maps)")
    fig.tight_layout()
    return fig


def main(argv):
    if len(argv) != 3:
        print("usage: stitch_tradeoff.py DATA.json OUT.png", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        data = json.load(f)
    figure(data).savefig(argv[2], dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
