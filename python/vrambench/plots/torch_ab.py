#!/usr/bin/env python3
"""The torch A/B results (lab/harnesses/torch_ab.py): a figure and a README table.

    python3 python/vrambench/plots/torch_ab.py RESULT.json [--out out/plots/torch-ab.png] [--table]

figure(result) -> matplotlib Figure: per workload, each allocator's peak
reserved bytes and median step time relative to PyTorch native (1.0 = same).
table(result) -> str: a Markdown table, one row per workload/allocator.
Needs only matplotlib and the package's reader and writer (vrambench.results
read_json and its checks, vrambench.output write_file: the PNG goes through a temporary
file and a rename), nothing of python/vrambench/plots.
"""
import os
import sys

if __package__ in (None, ""):  # run as a script: the package vrambench is two folders up
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from vrambench import arguments  # noqa: E402
from vrambench.output import OutputError, check_distinct, run_main, shown, write_file  # noqa: E402
from vrambench.results import (MAX_MAGNITUDE, MAX_UINT64, InputError, check_context, check_document,  # noqa: E402
                               check_text, in_range, is_number, read_json)

MiB = 1 << 20
# What table() and figure() read of an entry that ran: its time, byte counts and loss figures.
BYTE_FIELDS = ("peak_requested_bytes", "peak_reserved_bytes", "driver_used_peak_bytes")
NUMBER_FIELDS = ("final_loss", "loss_rel_diff")


def load(path):
    """A torch A/B result, checked where table() and figure() read it: a file
    of another shape (a vrambench run's results, a list, a name that is not a
    string, a time that is text) is one InputError line, never a traceback."""
    raw = check_document(path, read_json(path))
    if not isinstance(check_context(raw["context"], path).get("torch_version"), str):
        raise InputError(f"{path}: not a torch A/B result (lab/harnesses/torch_ab.py): no context.torch_version")
    for index, entry in enumerate(raw["benchmarks"]):
        where = f"{path}: benchmarks[{index}]"
        if not isinstance(entry, dict) or "/" not in check_text(entry.get("name"), where, "name"):
            raise InputError(f"{where} is not an entry named WORKLOAD/ALLOCATOR")
        if entry.get("error_occurred"):
            check_text(entry.get("error_message", "?"), where, "error_message")
            continue
        if not in_range(entry.get("real_time"), 0, MAX_MAGNITUDE):
            raise InputError(f"{where}: 'real_time' is not a time (a number from 0)")
        for key in BYTE_FIELDS:
            if entry.get(key) is not None and not in_range(entry[key], 0, MAX_UINT64):
                raise InputError(f"{where}: '{key}' is not a byte count")
        for key in NUMBER_FIELDS:
            if entry.get(key) is not None and not is_number(entry[key]):
                raise InputError(f"{where}: '{key}' is not a number")
    return raw


def _cases(result):
    """{workload: {allocator: entry}} in file order, errors included."""
    cases = {}
    for entry in result.get("benchmarks", []):
        workload, _, allocator = entry["name"].partition("/")
        cases.setdefault(workload, {})[allocator] = entry
    return cases


def _allocators(cases):
    names = []
    for by_allocator in cases.values():
        for name in by_allocator:
            if name not in names:
                names.append(name)
    return names


def _ratio(entry, native, key):
    if not entry or not native or entry.get("error_occurred") or native.get("error_occurred"):
        return None
    a, b = entry.get(key), native.get(key)
    return a / b if a is not None and b else None


def figure(result):
    """Peak reserved and step time relative to pytorch, grouped by workload."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    cases = _cases(result)
    workloads = list(cases)
    allocators = _allocators(cases)
    fig = Figure(figsize=(max(8, 1.6 * len(workloads) + 4), 7.5), layout="constrained")
    axes = fig.subplots(2, 1, sharex=True)
    width = 0.8 / max(1, len(allocators))
    colors = matplotlib.colormaps["tab20"]
    for row, (key, label) in enumerate((("peak_reserved_bytes", "peak reserved / pytorch"),
                                        ("real_time", "median step time / pytorch"))):
        ax = axes[row]
        for i, allocator in enumerate(allocators):
            xs, ys = [], []
            for w, workload in enumerate(workloads):
                value = _ratio(cases[workload].get(allocator), cases[workload].get("pytorch"), key)
                if value is not None:
                    xs.append(w - 0.4 + (i + 0.5) * width)
                    ys.append(value)
            ax.bar(xs, ys, width, label=allocator, color=colors(i % 20))
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_ylabel(label)
        ax.set_yscale("log")
    axes[1].set_xticks(range(len(workloads)), workloads, rotation=20, ha="right")
    context = result.get("context", {})
    fig.suptitle(f"PyTorch workloads per allocator — {context.get('device_name', '?')}, "
                 f"torch {context.get('torch_version', '?')}, {context.get('date', '?')[:10]}")
    axes[0].legend(fontsize="small", ncol=4, loc="upper left")
    return fig


def table(result):
    """Markdown: workload/allocator, step time, peaks, driver-used, loss check."""
    context = result.get("context", {})
    lines = [f"PyTorch workloads — {context.get('device_name', '?')}, torch {context.get('torch_version', '?')}, "
             f"{context.get('date', '?')[:10]} (peaks: the plug-in's statistics for vrambench strategies, "
             "torch.cuda.memory_stats() for pytorch*; driver-used: cudaMemGetInfo)", "",
             "| workload/allocator | step (median) | peak requested MiB | peak reserved MiB | reserved / pytorch "
             "| driver-used peak MiB | final loss | same loss as pytorch |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for workload, by_allocator in _cases(result).items():
        native = by_allocator.get("pytorch")
        for allocator, e in by_allocator.items():
            name = f"{workload}/{allocator}"
            if e.get("error_occurred"):
                lines.append(f"| {name} | error: {e.get('error_message', '?')[:80]} | | | | | | |")
                continue
            ratio = _ratio(e, native, "peak_reserved_bytes")

            def mib(key):
                return f"{e[key] / MiB:,.1f}" if e.get(key) is not None else "n/a"
            same = ("(reference)" if allocator == "pytorch" else
                    "yes" if e.get("loss_matches_native") else
                    f"no (rel. diff {e['loss_rel_diff']:.2e})" if "loss_rel_diff" in e else "n/a")
            lines.append(f"| {name} | {e['real_time'] / 1e6:.2f} ms | {mib('peak_requested_bytes')} | "
                         f"{mib('peak_reserved_bytes')} | {f'{ratio:.3f}' if ratio else 'n/a'} | "
                         f"{mib('driver_used_peak_bytes')} | {e.get('final_loss')} | {same} |")
    return "\n".join(lines)


def main(argv):
    parser = arguments.Parser(description=__doc__.split("\n")[0])
    parser.add_argument("result")
    parser.add_argument("--out", help="PNG to write")
    parser.add_argument("--table", action="store_true", help="print the Markdown table")
    args = parser.parse_args(argv)
    try:
        check_distinct([("the result", args.result, False), ("--out", args.out, True)])
        result = load(args.result)
    except (InputError, OutputError, ValueError) as error:
        print(f"torch_ab: error: {shown(error)}", file=sys.stderr)
        return 2
    if args.table:
        print(table(result))
    if args.out:
        try:
            write_file(args.out, lambda file: figure(result).savefig(file, format="png", dpi=110))
        except (OSError, OutputError) as error:
            print(f"torch_ab: error: cannot write {shown(args.out)}: {shown(getattr(error, 'strerror', None) or error)}",
                  file=sys.stderr)
            return 1
        print(f"torch_ab: wrote {shown(args.out)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    run_main(lambda: main(sys.argv[1:]), "torch_ab")
