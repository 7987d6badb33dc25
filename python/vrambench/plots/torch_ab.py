#!/usr/bin/env python3
"""The torch A/B results (lab/harnesses/torch_ab.py): a figure and a README table.

    python3 python/vrambench/plots/torch_ab.py RESULT.json [--out out/plots/torch-ab.png] [--table]

figure(result) -> matplotlib Figure: per workload, each allocator's peak
reserved bytes and median step time relative to PyTorch native (1.0 = same).
table(result) -> str: a Markdown table, one row per workload/allocator.
Needs only matplotlib and the package's reader and writer (vrambench.results
read_input, vrambench.output write_file: the PNG goes through a temporary
file and a rename), nothing of python/vrambench/plots.
"""
import json
import os
import sys

if __package__ in (None, ""):  # run as a script: the package vrambench is two folders up
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from vrambench import arguments  # noqa: E402
from vrambench.output import OutputError, check_distinct, shown, write_file  # noqa: E402
from vrambench.results import MAX_FILE_BYTES, InputError, read_input  # noqa: E402

MiB = 1 << 20


def load(path):
    return json.loads(read_input(path, MAX_FILE_BYTES, "torch A/B result").decode("utf-8"))


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
    sys.exit(main(sys.argv[1:]))
