#!/usr/bin/env python3
"""vrambench tools - the stitch trade-off data: handle sizes against memory
overhead and estimated GPU time, measured on the simulated device.

    make build/lab/vm-calls && lab/probes/stitch_tradeoff.py OUT.json [TRACE...]

Runs build/lab/vm-calls (lab/probes/vm_calls.c) for `stitch` with each setting
of SETTINGS (chunk_mb = the smallest handle a large-pool growth creates,
handle_max_mb = the largest, equal values giving fixed-size chunks;
stitch_max_maps = the most mappings a stitched range takes, 0 for none: the
previous design), and for `caching` and `expandable` as references, on every
workload: the fixture traces, tests/fixtures/torch, tests/fixtures/stitch,
random_mix, capped_training and any trace given. Writes one JSON file:
{"simulated": true, "cost_us": {...}, "rows": [...]}, each row one workload
x setting with its driver calls by kind (first pass on a fresh allocator,
as a replay is timed), overhead ratio (exact on sim), host seconds, an
estimated GPU time (host time + calls x COST_US), that time over caching's
on the same workload, and the calls of a third pass on the same allocator
("steady_calls": what each further iteration of a scenario costs).
lab/probes/stitch_tradeoff_plot.py draws it.

COST_US are per-call costs measured on an H100 by lab/probes/probe_driver.c
(results/probe-driver-nvidia-h100-20261122.txt), middles of the ranges seen:
cuMemCreate 15-17 us, cuMemMap ~1.1 us, cuMemSetAccess 35-44 us per mapping
it covers (one call over 64 chunks took 64 times one call's time; counted
here per vm_map: every vm_map maps one handle), cuMemUnmap 22-25 us per
mapping (every vm_unmap of stitch and expandable unmaps one handle),
cuMemRelease 18-32 us, a cudaMalloc + cudaFree pair 75-90 us (counted on
mem_alloc). The probe timed handles of 2 and 20 MiB only, which cost the
same per call: larger handles are assumed to cost the same too
(`probe_driver` now also times 64 MiB-1 GiB handles to check it). Host time
is the sim's, which leaves out the CUDA runtime's own cost per event.
"""
import glob
import json
import os
import subprocess
import sys

# (chunk_mb, handle_max_mb, stitch_max_maps): the default (8, 64, 0: handles of 8-64 MiB, whole ones
# moved out of holes, no stitched ranges); stitched ranges of up to 16 and 64 mappings on those handles
# and on one handle per growth (handle_max_mb 0: no maximum); smaller handles (2-4, 4-8 MiB) with stitched
# ranges of up to 64 (memory's end); the first design (20, 20, 0: fixed 20 MiB chunks) and fixed 2 MiB
# chunks without and with stitched ranges.
SETTINGS = [(8, 64, 0), (8, 64, 16), (8, 64, 64), (8, 0, 16), (4, 8, 64), (2, 4, 64), (2, 4, 16), (20, 20, 0),
            (2, 2, 0), (2, 2, 64)]
COST_US = {"create": 16.0, "map": 1.1 + 40.0, "unmap": 23.0, "release": 25.0, "mem_alloc": 82.0}
WORKLOADS = (["tests/fixtures/traces/resnet50.trace.gz", "tests/fixtures/traces/gpt2.trace.gz", "random_mix",
              "capped_training"] + sorted(glob.glob("tests/fixtures/torch/*.trace.gz"))
             + sorted(glob.glob("tests/fixtures/stitch/*.trace.gz")))
KINDS = ("create", "map", "unmap", "set_access", "release")


def run(tool, allocator, workloads, settings, repeat):
    """The vm-calls rows of one allocator and setting over the workloads."""
    command = [tool, "--repeat", str(repeat)]
    for setting in settings:
        command += ["--config", setting]
    command += [allocator] + workloads
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def measure(tool, allocator, workloads, settings):
    """Rows of vm-calls for one allocator and setting over the workloads:
    the first pass's calls and estimate, and the third pass's calls."""
    rows = run(tool, allocator, workloads, settings, 1)
    steady = run(tool, allocator, workloads, settings, 3)
    for row, later in zip(rows, steady):
        row["driver_ms"] = sum(row.get(kind, 0) * cost for kind, cost in COST_US.items()) / 1e3
        row["estimated_ms"] = row["host_s"] * 1e3 + row["driver_ms"]
        row["calls"] = sum(row.get(kind, 0) for kind in KINDS)
        row["steady_calls"] = sum(later.get(kind, 0) for kind in KINDS)
    return rows


def main(argv):
    if len(argv) < 2:
        print("usage: stitch_tradeoff.py OUT.json [TRACE...]", file=sys.stderr)
        return 2
    tool = os.environ.get("VM_CALLS", "build/lab/vm-calls")
    if not os.access(tool, os.X_OK):
        print(f"stitch_tradeoff.py: error: {tool} not found: run `make build/lab/vm-calls` first", file=sys.stderr)
        return 2
    workloads = WORKLOADS + argv[2:]
    rows = measure(tool, "caching", workloads, []) + measure(tool, "expandable", workloads, [])
    for chunk_mb, handle_max_mb, max_maps in SETTINGS:
        rows += measure(tool, "stitch", workloads, [f"chunk_mb={chunk_mb}", f"handle_max_mb={handle_max_mb}",
                                                    f"stitch_max_maps={max_maps}"])
    caching_ms = {row["workload"]: row["estimated_ms"] for row in rows if row["allocator"] == "caching"}
    for row in rows:
        row["vs_caching"] = row["estimated_ms"] / caching_ms[row["workload"]]
    with open(argv[1], "w") as f:
        json.dump({"simulated": True, "cost_us": COST_US, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
