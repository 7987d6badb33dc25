#!/usr/bin/env python3
"""The plot of a `vrambench tune` result (matplotlib and the standard library).

    tune.py TUNE.json [--out tune.png]

Two panels share the x axis, peak reserved memory: driver calls (allocs +
frees, log scale) and replay time. Every candidate is a point; those on the
Pareto front (entries' "on_pareto_front") are filled and joined, PyTorch's
settings are circles and the other strategies squares, the defaults and the
recommendation are named. figure(result) builds it from the parsed JSON; the
command line writes a PNG through vrambench.output (a temporary file beside
it, then a rename: a full disk keeps the old picture, a symlink is refused,
never written through). Bad input: one error line and exit status 2; an
output that cannot be written: one line and exit status 1.
"""

import os
import sys

if __package__ in (None, ""):  # run as a script: the package vrambench is two folders up
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from vrambench import arguments  # noqa: E402
from vrambench.plots.cli import matplotlib_missing  # noqa: E402
from vrambench.output import OutputError, check_distinct, check_target, run_main, shown, write_file  # noqa: E402
from vrambench.results import InputError, read_json  # noqa: E402

MiB = float(1 << 20)


def _label(entry):
    """A short name: the PYTORCH_ALLOC_CONF, or the strategy."""
    if "pytorch_alloc_conf" in entry:
        return entry["pytorch_alloc_conf"] or "defaults"
    return entry["name"].split("/", 1)[1]


def _check(result):
    """Raises ValueError unless `result` is a tune result."""
    if not isinstance(result, dict) or "recommendation" not in result or not result.get("benchmarks"):
        raise ValueError("not a vrambench tune result (no 'recommendation' or no 'benchmarks')")
    for entry in result["benchmarks"]:
        for key in ("name", "peak_reserved_bytes", "driver_alloc_calls", "driver_free_calls", "real_time"):
            if key not in entry:
                raise ValueError(f"entry {entry.get('name', '?')} has no '{key}'")


def figure(result):
    """The matplotlib Figure of a parsed tune result."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    _check(result)
    entries = result["benchmarks"]
    recommended = result["recommendation"].get("name")
    simulated = result.get("context", {}).get("simulated", True)
    fig = Figure(figsize=(11, 8), constrained_layout=True)
    axes = fig.subplots(2, 1, sharex=True)
    panels = (("driver calls (allocs + frees)", lambda e: max(1, e["driver_alloc_calls"] + e["driver_free_calls"])),
              ("replay time (ms%s)" % (", host, simulated device" if simulated else ""),
               lambda e: e["real_time"] / 1e6))
    for ax, (ylabel, value) in zip(axes, panels):
        front = sorted((e for e in entries if e.get("on_pareto_front")), key=lambda e: e["peak_reserved_bytes"])
        if front:
            ax.plot([e["peak_reserved_bytes"] / MiB for e in front], [value(e) for e in front], color="0.7",
                    linewidth=1, zorder=1)
        for e in entries:
            pytorch = "pytorch_alloc_conf" in e
            on_front = e.get("on_pareto_front", False)
            ax.scatter(e["peak_reserved_bytes"] / MiB, value(e), marker="o" if pytorch else "s", s=46,
                       facecolors=("C0" if pytorch else "C1") if on_front else "none",
                       edgecolors="C0" if pytorch else "C1", zorder=2)
            name = _label(e)
            if e["name"] == recommended or name == "defaults" or on_front:
                ax.annotate(name + (" (recommended)" if e["name"] == recommended else ""),
                            (e["peak_reserved_bytes"] / MiB, value(e)), fontsize=7, xytext=(4, 3),
                            textcoords="offset points", fontweight="bold" if e["name"] == recommended else None)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[0].set_yscale("log")
    axes[1].set_xlabel("peak reserved (MiB%s)" % (", simulated" if simulated else ""))
    trace = entries[0]["name"].split("/", 1)[0]
    axes[0].set_title(f"{trace}: PyTorch settings (circles) and other strategies (squares); filled: Pareto front"
                      + (" (simulated)" if simulated else ""), fontsize=10)
    return fig


def main(argv=None):
    parser = arguments.Parser(prog="tune.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("result", metavar="TUNE.json")
    parser.add_argument("--out", default="tune.png", metavar="FILE.png",
                        help="the picture, a PNG (default tune.png in the current folder)")
    args = parser.parse_args(argv)
    # A PNG is written whatever the name says: "x.svg" or "x.png.gz" would
    # name a file of another kind (docs/cli.md: an output never gzip'd is
    # refused under a .gz name).
    if not args.out.lower().endswith(".png"):
        print(f"tune.py: error: --out {shown(args.out)}: the picture is a PNG; name it FILE.png", file=sys.stderr)
        return 2
    try:
        check_distinct([("the result", args.result, False), ("--out", args.out, True)])
        check_target(args.out)
        result = read_json(args.result, "tune result")
    except (InputError, OutputError) as error:
        print(f"tune.py: error: {shown(error)}", file=sys.stderr)
        return 2
    try:
        import matplotlib  # noqa: F401  (figure() needs it: said here in one line)
    except ImportError as error:
        print(f"tune.py: error: {matplotlib_missing(error)}", file=sys.stderr)
        return 1
    try:
        fig = figure(result)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as error:
        print(f"tune.py: error: {shown(args.result)}: {shown(error)}", file=sys.stderr)
        return 2
    try:
        write_file(args.out, lambda file: fig.savefig(file, format="png", dpi=110))
    except OutputError as error:
        print(f"tune.py: error: {shown(error)}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"tune.py: error: cannot write {shown(args.out)}: {shown(error.strerror or error)}", file=sys.stderr)
        return 1
    print(f"tune.py: wrote {shown(args.out)}")
    return 0


if __name__ == "__main__":
    run_main(main, "tune.py")
