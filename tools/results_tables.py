#!/usr/bin/env python3
"""Markdown tables from vrambench results, for the README or a report.

    python3 tools/results_tables.py bench RESULTS.json        overhead matrix + full summary
    python3 tools/results_tables.py replay REPLAY.json [...]  overhead ratio per allocator per trace
    python3 tools/results_tables.py claims CLAIMS.json        verdicts, claims as rows
    python3 tools/results_tables.py microbench MICRO.json     malloc+free pair latency

Standard library only. Reads only entries with run_type "iteration" and
takes the median over repetitions, as plots/plot.py does.
"""
import json
import statistics
import sys

MiB = 1 << 20


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as error:
        sys.exit(f"results_tables: error: cannot read {path}: {error}")


def iterations(document):
    """{(scenario, allocator): [entry, ...]} over repetitions."""
    cases = {}
    for entry in document.get("benchmarks", []):
        if entry.get("run_type") == "iteration":
            cases.setdefault((entry["scenario"], entry["allocator"]), []).append(entry)
    return cases


def median(entries, key):
    return statistics.median(e[key] for e in entries)


def device_line(document):
    c = document["context"]
    kind = "simulated device" if c.get("simulated") else c.get("device_name", "?")
    return f"{kind}, {c.get('date', '?')[:10]}, commit {c.get('git_commit', '?')[:10]}"


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
    print("\n<details><summary>Full summary (peaks in MiB, driver calls per repetition, time per iteration)</summary>\n")
    print("| scenario/allocator | peak requested | peak reserved | overhead | driver allocs | driver frees | time/iter |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (s, a), entries in cases.items():
        t = median(entries, "real_time")
        unit = entries[0].get("time_unit", "ns")
        scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[unit]
        ns = t * scale
        shown = f"{ns / 1e6:.2f} ms" if ns >= 1e6 else f"{ns / 1e3:.1f} µs"
        print(f"| {s}/{a} | {median(entries, 'peak_requested_bytes') / MiB:,.1f} | "
              f"{median(entries, 'peak_reserved_bytes') / MiB:,.1f} | {median(entries, 'overhead_ratio'):.3f} | "
              f"{median(entries, 'driver_alloc_calls'):,.0f} | {median(entries, 'driver_free_calls'):,.0f} | {shown} |")
    print("\n</details>")


def replay(paths):
    documents = [load(p) for p in paths]
    rows = {}
    allocators = []
    for document in documents:
        for (s, a), entries in iterations(document).items():
            rows.setdefault(s, {})[a] = (median(entries, "overhead_ratio"), median(entries, "peak_reserved_bytes"),
                                         median(entries, "peak_requested_bytes"))
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
    document = load(path)
    verdicts, allocators = {}, []
    for row in document["claims"]:
        verdicts.setdefault(row["id"], {})[row["allocator"]] = row
        allocators.append(row["allocator"])
    allocators = ordered(allocators)
    short = {"holds": "holds", "does not hold": "**no**", "depends": "depends", "undecidable": "n/a"}
    print(f"Claims — {device_line(document)}\n")
    print("| claim (document) | " + " | ".join(f"`{a}`" for a in allocators) + " |")
    print("|---|" + "---|" * len(allocators))
    for entry in document["catalogue"]:
        cells = [short[verdicts[entry["id"]][a]["verdict"]] for a in allocators]
        print(f"| {entry['claim']} ({entry['documents']}) | " + " | ".join(cells) + " |")


def microbench(path):
    document = load(path)
    rows = {}
    for e in document["benchmarks"]:
        rows.setdefault(e["allocator"], {})[int(e["bytes"])] = e
    sizes = sorted({int(e["bytes"]) for e in document["benchmarks"]})
    label = lambda b: f"{b >> 20} MiB" if b >= MiB else (f"{b >> 10} KiB" if b >= 1024 else f"{b} B")
    print(f"malloc+free pair, p50 / p99 in ns, cache-hit steady state — {device_line(document)}\n")
    print("| allocator | " + " | ".join(label(s) for s in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for a, by_size in rows.items():
        print(f"| `{a}` | " + " | ".join(f"{by_size[s]['pair_ns_p50']:,.0f} / {by_size[s]['pair_ns_p99']:,.0f}"
                                          for s in sizes) + " |")


def main(argv):
    if len(argv) < 3 or argv[1] not in ("bench", "replay", "claims", "microbench"):
        sys.exit(__doc__)
    if argv[1] == "replay":
        replay(argv[2:])
    else:
        globals()[argv[1]](argv[2])


if __name__ == "__main__":
    main(sys.argv)
