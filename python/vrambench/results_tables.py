#!/usr/bin/env python3
"""Markdown tables from vrambench results, for a report or the generated docs pages.

    python3 python/vrambench/results_tables.py bench RESULTS.json        overhead matrix + full summary
    python3 python/vrambench/results_tables.py replay REPLAY.json [...]  overhead ratio per allocator per trace
    python3 python/vrambench/results_tables.py claims CLAIMS.json        verdicts, claims as rows
    python3 python/vrambench/results_tables.py microbench MICRO.json     malloc+free pair latency
    python3 python/vrambench/results_tables.py tune-check CHECK.json     tune's predictions against PyTorch

Standard library only; python/vrambench/docs_pages.py builds docs/results/ from
these tables. Reads the files through python/vrambench/results.py, the loader
python/vrambench/plots uses (entries with run_type "iteration", the median over
repetitions, every type and range checked); bad input is one line on
stderr and exit status 2.
"""
import os
import sys

# The results model and loader of plots/ (python/vrambench/results.py), one for every tool.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from vrambench.arguments import did_you_mean  # noqa: E402
from vrambench.output import run_main, shown  # noqa: E402
from vrambench.results import InputError, load_claims, load_result, load_tune_check, mib_up  # noqa: E402

MiB = 1 << 20


def load(path):
    """A results file, checked by the shared loader."""
    return load_result(path)


def iterations(result):
    """{(scenario, allocator): run} in file order, repetitions folded (medians)."""
    return {(run.scenario, run.allocator): run for run in result.runs}


def median(run, key):
    """The run's counter `key` (the median over its repetitions); the loader
    has refused a file where it is not a number, so here it is only absent."""
    if key not in run.values:
        raise InputError(f"{run.path}: {run.name}: no counter '{key}'")
    return run.values[key]


def device_line(result):
    c = result.context
    kind = "simulated device" if c.get("simulated") else c.get("device_name", "?")
    return f"{kind}, {str(c.get('date', '?'))[:10]}, commit {str(c.get('git_commit', '?'))[:10]}"


def ordered(values):
    return list(dict.fromkeys(values))


def bench_table(document):
    """Markdown: the overhead matrix (scenarios x allocators) and, folded, the full summary."""
    cases = iterations(document)
    scenarios = ordered(s for s, _ in cases)
    allocators = ordered(a for _, a in cases)
    lines = [f"Overhead ratio (peak reserved / peak requested; 1.00 is ideal) — {device_line(document)}", "",
             "| scenario | peak requested | " + " | ".join(f"`{a}`" for a in allocators) + " |",
             "|---|---:|" + "---:|" * len(allocators)]
    for s in scenarios:
        # Not every allocator ran every scenario (a merged file, a hand-picked run): the
        # scenario's requested bytes are its first allocator's that has the case.
        first = next(cases[(s, a)] for a in allocators if (s, a) in cases)
        requested = median(first, "peak_requested_bytes") / MiB
        cells = [f"{median(cases[(s, a)], 'overhead_ratio'):.2f}" if (s, a) in cases else "" for a in allocators]
        lines.append(f"| {s} | {requested:,.1f} MiB | " + " | ".join(cells) + " |")
    lines += ["", summary_table(document)]
    return "\n".join(lines)


def time_text(ns):
    """A time per iteration, in ms from 1 ms up, else in µs."""
    return f"{ns / 1e6:.2f} ms" if ns >= 1e6 else f"{ns / 1e3:.1f} µs"


def summary_table(document):
    """Markdown, folded: one row per case with peaks, driver calls and time per iteration."""
    # A simulated device's time is the host's (the allocator and the device's model), never a GPU time.
    time_column = "host time/iter (sim model)" if document.simulated else "time/iter"
    lines = ["<details><summary>Full summary (peaks in MiB, driver calls per repetition, time per iteration)"
             "</summary>", "",
             "| scenario/allocator | peak requested | peak reserved | overhead | driver allocs | driver frees | "
             f"{time_column} |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for (s, a), run in iterations(document).items():
        lines.append(f"| {s}/{a} | {median(run, 'peak_requested_bytes') / MiB:,.1f} | "
                     f"{median(run, 'peak_reserved_bytes') / MiB:,.1f} | {median(run, 'overhead_ratio'):.3f} | "
                     f"{median(run, 'driver_alloc_calls'):,.0f} | {median(run, 'driver_free_calls'):,.0f} | "
                     f"{time_text(median(run, 'real_time_ns'))} |")
    lines += ["", "</details>"]
    return "\n".join(lines)


def require_runs(document, replays):
    """`document` when it holds cases of run or replay (`replays`: replays
    of traces only), at least one; InputError otherwise: a microbench file
    made empty tables, and a run's scenarios a "per trace" table, each with
    exit 0, where the plots refuse the same files."""
    if not document.runs:
        holds = "microbench entries" if document.microbench else "no case"
        raise InputError(f"{document.path}: not a {'replay' if replays else 'run'} results file (it holds {holds})")
    for run in document.runs:
        if run.scenario.startswith("tune:") or (replays and not run.scenario.startswith("replay:")):
            raise InputError(f"{document.path}: not a {'replay' if replays else 'run'} results file (case "
                             f"{shown(run.name)!r} is a {run.scenario.split(':')[0] if ':' in run.scenario else 'run'}'s)")
    return document


def bench(path):
    print(bench_table(require_runs(load(path), replays=False)))


def replay_table(documents):
    """Markdown: overhead ratio per trace (rows) and allocator (columns); one device only."""
    devices = {document.device for document in documents}
    if len(devices) > 1:
        raise InputError(f"{', '.join(d.path for d in documents)}: from {len(devices)} devices; "
                         "one table never mixes devices")
    rows = {}
    allocators = []
    for document in documents:
        for (s, a), run in iterations(document).items():
            rows.setdefault(s, {})[a] = (median(run, "overhead_ratio"), median(run, "peak_reserved_bytes"),
                                         median(run, "peak_requested_bytes"))
            allocators.append(a)
    allocators = ordered(allocators)
    lines = [f"Overhead ratio per trace (peak reserved / peak requested) — {device_line(documents[0])}", "",
             "| trace | peak requested | " + " | ".join(f"`{a}`" for a in allocators) + " |",
             "|---|---:|" + "---:|" * len(allocators)]
    for s, cells in rows.items():
        requested = next(iter(cells.values()))[2] / MiB
        lines.append(f"| {s} | {requested:,.0f} MiB | " +
                     " | ".join(f"{cells[a][0]:.3f}" if a in cells else "" for a in allocators) + " |")
    return "\n".join(lines)


def replay(paths):
    print(replay_table([require_runs(load(p), replays=True) for p in paths]))


def times_table(labelled, baseline="caching"):
    """Markdown: per case (rows: label and scenario) and allocator (columns) the
    median time per iteration in ms / overhead ratio / time over `baseline`'s
    in the same case. `labelled`: [(label, document)], one device only."""
    devices = {document.device for _, document in labelled}
    if len(devices) > 1:
        raise InputError("one table never mixes devices")
    rows = []
    for label, document in labelled:
        cases = iterations(document)
        for s in ordered(s for s, _ in cases):
            rows.append((label, s, {a: run for (s2, a), run in cases.items() if s2 == s}))
    # Columns in the order of the file with the most allocators, then any others.
    widest = sorted((document for _, document in labelled), key=lambda d: -len(iterations(d)))
    allocators = ordered(a for document in widest for _, a in iterations(document))
    lines = ["| file | case | " + " | ".join(f"`{a}`" for a in allocators) + " |",
             "|---|---|" + "---:|" * len(allocators)]
    for label, s, runs in rows:
        base = runs.get(baseline)
        cells = []
        for a in allocators:
            run = runs.get(a)
            if run is None:
                cells.append("")
                continue
            ns = median(run, "real_time_ns")
            cell = f"{ns / 1e6:,.2f} / {median(run, 'overhead_ratio'):.4f}"
            if base is not None and a != baseline:
                cell += f" / {ns / median(base, 'real_time_ns'):,.2f}×"
            cells.append(cell)
        lines.append(f"| {label} | {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def claims_table(document):
    """Markdown: the catalogue's claims as rows, allocators as columns, verdicts in the cells."""
    verdicts, allocators = {}, []
    for row in document.claims:
        verdicts.setdefault(row["id"], {})[row["allocator"]] = row
        allocators.append(row["allocator"])
    allocators = ordered(allocators)
    short = {"holds": "holds", "does not hold": "**no**", "depends": "depends", "undecidable": "n/a"}
    lines = [f"Claims — {device_line(document)}", "",
             "| claim (document) | " + " | ".join(f"`{a}`" for a in allocators) + " |",
             "|---|" + "---|" * len(allocators)]
    for entry in document.catalogue:
        cells = [short.get(verdicts.get(entry["id"], {}).get(a, {}).get("verdict"), "") for a in allocators]
        lines.append(f"| {entry['claim']} ({entry['documents']}) | " + " | ".join(cells) + " |")
    # A column measured elsewhere (claims --pytorch: PyTorch's own, on its
    # GPU) is named with its device: the heading is this run's.
    own = document.context.get("device_name")
    elsewhere = {}
    for row in document.claims:
        device = row.get("device_name")
        if isinstance(device, str) and device != own and row.get("simulated") is not True:
            elsewhere.setdefault(row["allocator"], device)
    if elsewhere:
        lines += ["", "; ".join(f"`{a}` measured on {shown(d)}" for a, d in elsewhere.items()) + "."]
    return "\n".join(lines)


def claims(path):
    print(claims_table(load_claims(path)))


def size_label(size):
    """512 B, 64 KiB, 2 MiB."""
    return f"{size >> 20} MiB" if size >= MiB else (f"{size >> 10} KiB" if size >= 1024 else f"{size} B")


def microbench_table(document):
    """Markdown: malloc+free pair latency p50 / p99 per allocator (rows) and size (columns)."""
    if not document.microbench:
        raise InputError(f"{document.path}: no 'microbench/ALLOCATOR/BYTES' entries")
    rows = {}
    for allocator, size, values in document.microbench:
        rows.setdefault(allocator, {})[int(size)] = values
    sizes = sorted({int(size) for _, size, _ in document.microbench})
    threads = max(int(values.get("threads", 1)) for _, _, values in document.microbench)
    measured = f", one of {threads} threads on one allocator" if threads > 1 else ""
    what = "host-side ns of the simulated device's model" if document.simulated else "ns"
    lines = [f"malloc+free pair, p50 / p99 in {what}, cache-hit steady state{measured} — {device_line(document)}", "",
             "| allocator | " + " | ".join(size_label(s) for s in sizes) + " |",
             "|---|" + "---:|" * len(sizes)]
    for a, by_size in rows.items():
        lines.append(f"| `{a}` | " + " | ".join(f"{by_size[s]['pair_ns_p50']:,.0f} / {by_size[s]['pair_ns_p99']:,.0f}"
                                                 if s in by_size and 'pair_ns_p99' in by_size[s] else ""
                                                 for s in sizes) + " |")
    twins = {a: by_size for a, by_size in rows.items()
             if any("pair_to_driver_twin" in values for values in by_size.values())}
    if twins:
        lines += ["", "A pair's time over its driver twin's, timed in alternating batches in the same cell "
                  "(`pair_to_driver_twin`):", "",
                  "| allocator | " + " | ".join(size_label(s) for s in sizes) + " |",
                  "|---|" + "---:|" * len(sizes)]
        for a, by_size in twins.items():
            lines.append(f"| `{a}` | " + " | ".join(f"{by_size[s]['pair_to_driver_twin']:.2f}×"
                                                     if "pair_to_driver_twin" in by_size.get(s, {}) else ""
                                                     for s in sizes) + " |")
    return "\n".join(lines)


def microbench(path):
    print(microbench_table(load(path)))


def tune_check_table(document):
    """Markdown: `vrambench tune`'s predictions against real PyTorch, one row per
    workload and setting (a tune-check file of lab/harnesses/tune_check.py)."""
    first = document.rows[0] if document.rows else {}
    lines = [f"Predicted against real peak reserved memory — {first.get('device', '?')}, "
             f"torch {first.get('torch_version', '?')}", "",
             "| workload | PYTORCH_ALLOC_CONF | predicted peak reserved MiB | real MiB | error "
             "| predicted smallest device MiB |",
             "|---|---|---:|---:|---:|---:|"]
    for row in document.rows:
        conf = f"`{row['pytorch_alloc_conf']}`" if row["pytorch_alloc_conf"] else '`""` (defaults)'
        if row.get("memory_fraction") is not None:
            conf += f" + memory fraction {row['memory_fraction']}"
        if row.get("recommended"):
            conf += " (recommended)"
        smallest = row.get("predicted_min_capacity_bytes")
        lines.append(f"| {row['workload']} | {conf} | {row['predicted_peak_reserved_bytes'] / MiB:,.0f} | "
                     f"{row['real_peak_reserved_bytes'] / MiB:,.0f} | {row['error_percent']:+.2f}% | "
                     + (f"{mib_up(smallest, 0):,.0f}" if smallest is not None else "") + " |")
    exact = sum(1 for row in document.rows
                if row["predicted_peak_reserved_bytes"] == row["real_peak_reserved_bytes"])
    lines += ["", f"{exact} of {len(document.rows)} predictions equal to the byte."]
    return "\n".join(lines)


def tune_check(path):
    print(tune_check_table(load_tune_check(path)))


def usage_error(argv):
    """The one error line for a command line main() cannot run, or None."""
    kinds = ("bench", "replay", "claims", "microbench", "tune-check")
    if len(argv) < 2:
        return f"which table? ({', '.join(kinds)}; results_tables --help)"
    if argv[1] not in kinds:
        return (f"unknown table {shown(argv[1])!r}{did_you_mean(argv[1], kinds)}"
                f" (known: {', '.join(kinds)}; results_tables --help)")
    if len(argv) < 3 or (argv[1] != "replay" and len(argv) != 3):
        return f"{argv[1]} takes {'FILE...' if argv[1] == 'replay' else 'one FILE'} (results_tables --help)"
    return None


def main(argv):
    """Prints the tables; returns the exit status (2: bad usage or input)."""
    if argv[1:] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    wrong = usage_error(argv)
    if wrong:
        # One line, as every bad command line (the usage was 13 lines, without the word "error")
        print(f"results_tables: error: {wrong}", file=sys.stderr)
        return 2
    try:
        if argv[1] == "replay":
            replay(argv[2:])
        else:
            {"bench": bench, "claims": claims, "microbench": microbench,
             "tune-check": tune_check}[argv[1]](argv[2])
    except InputError as error:
        print(f"results_tables: error: {shown(error)}", file=sys.stderr)  # one line, whatever a file is called
        return 2
    return 0


if __name__ == "__main__":
    run_main(lambda: main(sys.argv), "results_tables")
