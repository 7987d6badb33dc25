#!/usr/bin/env python3
"""vrambench tools - the stitch trade-off data: granule size against memory
overhead and driver calls, measured on the simulated device.

    make build/tools/vm-calls && tools/stitch_tradeoff.py OUT.json [TRACE...]

Runs build/tools/vm-calls (tools/vm_calls.c) for `stitch` with each
granule_mb x granule_parts x split_free setting of the grid below (and `caching` for the
host-time reference) on every workload: the fixture traces, random_mix,
capped_training and any trace given. Writes one JSON file: {"simulated": true,
"cost_us": {...}, "rows": [...]}, each row one workload x setting with its VM
calls by kind, overhead ratio (exact on sim), host seconds, and an estimated
GPU time: host time + calls x the per-call costs in COST_US (assumed, not
measured: the driver's calls take several microseconds each for map, unmap
and set_access, tens for create and release). plots/stitch_tradeoff.py draws it.
"""
import json
import os
import subprocess
import sys

GRID = ([(0, 8, 0)] + [(mb, parts, 0) for mb in (4, 8, 16, 32, 64) for parts in (1, 8)] + [(64, 32, 0)]
        + [(0, 8, 1), (8, 8, 1), (64, 8, 1)])  # (granule_mb, granule_parts, split_free)
COST_US = {"create": 25.0, "release": 25.0, "map": 5.0, "unmap": 5.0, "set_access": 5.0}
FIXTURES = ["tests/fixtures/traces/resnet50.trace.gz", "tests/fixtures/traces/gpt2.trace.gz",
            "random_mix", "capped_training"]


def measure(tool, allocator, workloads, settings):
    """Rows of vm-calls for one allocator and setting over the workloads."""
    command = [tool]
    for setting in settings:
        command += ["--config", setting]
    command += [allocator] + workloads
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    for row in rows:
        calls_us = sum(row[kind] * cost for kind, cost in COST_US.items())
        row["estimated_ms"] = row["host_s"] * 1e3 + calls_us / 1e3
        row["calls"] = sum(row[kind] for kind in COST_US)
    return rows


def main(argv):
    if len(argv) < 2:
        print("usage: stitch_tradeoff.py OUT.json [TRACE...]", file=sys.stderr)
        return 2
    tool = os.environ.get("VM_CALLS", "build/tools/vm-calls")
    if not os.access(tool, os.X_OK):
        print(f"stitch_tradeoff.py: error: {tool} not found: run `make build/tools/vm-calls` first", file=sys.stderr)
        return 2
    workloads = FIXTURES + argv[2:]
    rows = measure(tool, "caching", workloads, [])
    for mb, parts, split in GRID:
        rows += measure(tool, "stitch", workloads,
                        [f"granule_mb={mb}", f"granule_parts={parts}", f"split_free={split}"])
    with open(argv[1], "w") as f:
        json.dump({"simulated": True, "cost_us": COST_US, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
