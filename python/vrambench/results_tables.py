#!/usr/bin/env python3
"""Markdown tables from vrambench results, for the README or a report.

    python3 python/vrambench/results_tables.py bench RESULTS.json        overhead matrix + full summary
    python3 python/vrambench/results_tables.py replay REPLAY.json [...]  overhead ratio per allocator per trace
    python3 python/vrambench/results_tables.py claims CLAIMS.json        verdicts, claims as rows
    python3 python/vrambench/results_tables.py microbench MICRO.json     malloc+free pair latency

Standard library only. Reads the files through python/vrambench/results.py, the loader
python/vrambench/plots uses (entries with run_type "iteration", the median over
repetitions, every type and range checked); bad input is one line on
stderr and exit status 2.
"""
import os
import sys

# The results model and loader of plots/ (python/vrambench/results.py), one for every tool.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from vrambench.results import InputError, load_claims, load_result  # noqa: E402

MiB = 1 << 20


def load(path):
    """A results file, checked by the shared loader."""
    return load_result(path)


def iterations(result):
    """{(scenario, allocator): run} in file order, repetitions folded (medians)."""
    return {(run.scenario, run.allocator): run for run in result.runs}


def median(run, key):
    """The run's counter `key` (the median over its repetitions)."""
    if key not in run.values:
        raise InputError(f"{run.name}: no counter '{key}'")
    return run.values[key]


def device_line(result):
    c = result.context
    kind = "simulated device" if c.get("simulated") else c.get("device_name", "?")
    return f"{kind}, {str(c.get('date', '?'))[:10]}, commit {str(c.get('git_commit', '?'))[:10]}"


def ordered(values):
    return list(dict.fromkeys(values))


def bench(path):
    document = load(path)
    cases = iterations(document)
    scenarios = ordered(s for s, _ in cases)
    allocators = ordered(a for _, a in cases)
    print(f"Overhead ratio (peak reserved / peak requested; 1.00 is ideal) — {device_line(document)}\n")
    print("| scenario | peak requested | " + " | ".join(f"`{a}`" for a in allocators) + " |")
    print("|---|---:|" + "---:|" * len(allocators))
    for s in scenarios:
        requested = median(cases[(s, allocators[0])], "peak_requested_bytes") / MiB
        cells = [f"{median(cases[(s, a)], 'overhead_ratio'):.2f}" if (s, a) in cases else "" for a in allocators]
        print(f"| {s} | {requested:,.1f} MiB | " + " | ".join(cells) + " |")
    # A simulated device's time is the host's (the allocator and the device's model), never a GPU time.
    time_column = "host time/iter (sim model)" if document.simulated else "time/iter"
    print("\n<details><summary>Full summary (peaks in MiB, driver calls per repetition, time per iteration)</summary>\n")
    print(f"| scenario/allocator | peak requested | peak reserved | overhead | driver allocs | driver frees | {time_column} |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (s, a), run in cases.items():
        ns = median(run, "real_time_ns")
        shown = f"{ns / 1e6:.2f} ms" if ns >= 1e6 else f"{ns / 1e3:.1f} µs"
        print(f"| {s}/{a} | {median(run, 'peak_requested_bytes') / MiB:,.1f} | "
              f"{median(run, 'peak_reserved_bytes') / MiB:,.1f} | {median(run, 'overhead_ratio'):.3f} | "
              f"{median(run, 'driver_alloc_calls'):,.0f} | {median(run, 'driver_free_calls'):,.0f} | {shown} |")
    print("\n</details>")


def replay(paths):
    documents = [load(p) for p in paths]
    devices = {document.device for document in documents}
    if len(devices) > 1:
        raise InputError(f"{', '.join(paths)}: from {len(devices)} devices; one table never mixes devices")
    rows = {}
    allocators = []
    for document in documents:
        for (s, a), run in iterations(document).items():
            rows.setdefault(s, {})[a] = (median(run, "overhead_ratio"), median(run, "peak_reserved_bytes"),
                                         median(run, "peak_requested_bytes"))
            allocators.append(a)
    allocators = ordered(allocators)
    print(f"Overhead ratio per trace (peak reserved / peak requested) — {device_line(documents[0])}\n")
    print("| trace | peak requested | " + " | ".join(f"`{a}`" for a in allocators) + " |")
    print("|---|---:|" + "---:|" * len(allocators))
    for s, cells in rows.items():
        requested = next(iter(cells.values()))[2] / MiB
        print(f"| {s} | {requested:,.0f} MiB | " +
              " | ".join(f"{cells[a][0]:.3f}" if a in cells else "" for a in allocators) + " |")


def claims(path):
    document = load_claims(path)
    verdicts, allocators = {}, []
    for row in document.claims:
        verdicts.setdefault(row["id"], {})[row["allocator"]] = row
        allocators.append(row["allocator"])
    allocators = ordered(allocators)
    short = {"holds": "holds", "does not hold": "**no**", "depends": "depends", "undecidable": "n/a"}
    print(f"Claims — {device_line(document)}\n")
    print("| claim (document) | " + " | ".join(f"`{a}`" for a in allocators) + " |")
    print("|---|" + "---|" * len(allocators))
    for entry in document.catalogue:
        cells = [short.get(verdicts.get(entry["id"], {}).get(a, {}).get("verdict"), "") for a in allocators]
        print(f"| {entry['claim']} ({entry['documents']}) | " + " | ".join(cells) + " |")


def microbench(path):
    document = load(path)
    if not document.microbench:
        raise InputError(f"{path}: no 'microbench/ALLOCATOR/BYTES' entries")
    rows = {}
    for allocator, size, values in document.microbench:
        rows.setdefault(allocator, {})[int(size)] = values
    sizes = sorted({int(size) for _, size, _ in document.microbench})
    label = lambda b: f"{b >> 20} MiB" if b >= MiB else (f"{b >> 10} KiB" if b >= 1024 else f"{b} B")
    what = "host-side ns of the simulated device's model" if document.simulated else "ns"
    print(f"malloc+free pair, p50 / p99 in {what}, cache-hit steady state — {device_line(document)}\n")
    print("| allocator | " + " | ".join(label(s) for s in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for a, by_size in rows.items():
        print(f"| `{a}` | " + " | ".join(f"{by_size[s]['pair_ns_p50']:,.0f} / {by_size[s]['pair_ns_p99']:,.0f}"
                                          if s in by_size and 'pair_ns_p99' in by_size[s] else ""
                                          for s in sizes) + " |")


def main(argv):
    """Prints the tables; returns the exit status (2: bad usage or input)."""
    if len(argv) != 3 and not (len(argv) > 2 and argv[1] == "replay") \
            or argv[1] not in ("bench", "replay", "claims", "microbench"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        if argv[1] == "replay":
            replay(argv[2:])
        else:
            {"bench": bench, "claims": claims, "microbench": microbench}[argv[1]](argv[2])
    except InputError as error:
        print(f"results_tables: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
