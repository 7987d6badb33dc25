#!/usr/bin/env python3
"""vrambench tools - the stitch trade-off data: chunk size against memory
overhead and estimated GPU time, measured on the simulated device.

    make build/tools/vm-calls && tools/stitch_tradeoff.py OUT.json [TRACE...]

Runs build/tools/vm-calls (tools/vm_calls.c) for `stitch` with each chunk_mb
of CHUNKS_MB, and for `caching` and `expandable` as references, on every
workload: the fixture traces, tests/fixtures/stitch, random_mix,
capped_training and any trace given. Writes one JSON file: {"simulated":
true, "cost_us": {...}, "rows": [...]}, each row one workload x setting with
its driver calls by kind, overhead ratio (exact on sim), host seconds, an
estimated GPU time (host time + calls x COST_US) and that time over
caching's on the same workload. plots/stitch_tradeoff.py draws it.

COST_US are per-call costs measured on an H100 by tools/probe_driver.c
(results/probe-driver-nvidia-h100-20261122.txt), middles of the ranges seen:
cuMemCreate 15-17 us, cuMemMap ~1.1 us, cuMemSetAccess 35-44 us per chunk it
covers (counted here per chunk mapped: every vm_map maps one chunk),
cuMemUnmap 22-25 us per chunk (every vm_unmap of stitch and expandable
unmaps one chunk), cuMemRelease 18-32 us, a cudaMalloc + cudaFree pair
75-90 us (counted on mem_alloc). Host time is the sim's, which leaves out
the CUDA runtime's own cost per event, so the ratios over caching are
pessimistic (caching's estimate is the smaller).
"""
import glob
import json
import os
import subprocess
import sys

CHUNKS_MB = [2, 4, 8, 12, 16, 20, 32, 64]
COST_US = {"create": 16.0, "map": 1.1 + 40.0, "unmap": 23.0, "release": 25.0, "mem_alloc": 82.0}
WORKLOADS = (["tests/fixtures/traces/resnet50.trace.gz", "tests/fixtures/traces/gpt2.trace.gz", "random_mix",
              "capped_training"] + sorted(glob.glob("tests/fixtures/stitch/*.trace.gz")))


def measure(tool, allocator, workloads, settings):
    """Rows of vm-calls for one allocator and setting over the workloads."""
    command = [tool]
    for setting in settings:
        command += ["--config", setting]
    command += [allocator] + workloads
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    for row in rows:
        row["driver_ms"] = sum(row.get(kind, 0) * cost for kind, cost in COST_US.items()) / 1e3
        row["estimated_ms"] = row["host_s"] * 1e3 + row["driver_ms"]
        row["calls"] = sum(row.get(kind, 0) for kind in ("create", "map", "unmap", "set_access", "release"))
    return rows


def main(argv):
    if len(argv) < 2:
        print("usage: stitch_tradeoff.py OUT.json [TRACE...]", file=sys.stderr)
        return 2
    tool = os.environ.get("VM_CALLS", "build/tools/vm-calls")
    if not os.access(tool, os.X_OK):
        print(f"stitch_tradeoff.py: error: {tool} not found: run `make build/tools/vm-calls` first", file=sys.stderr)
        return 2
    workloads = WORKLOADS + argv[2:]
    rows = measure(tool, "caching", workloads, []) + measure(tool, "expandable", workloads, [])
    for mb in CHUNKS_MB:
        rows += measure(tool, "stitch", workloads, [f"chunk_mb={mb}"])
    caching_ms = {row["workload"]: row["estimated_ms"] for row in rows if row["allocator"] == "caching"}
    for row in rows:
        row["vs_caching"] = row["estimated_ms"] / caching_ms[row["workload"]]
    with open(argv[1], "w") as f:
        json.dump({"simulated": True, "cost_us": COST_US, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
