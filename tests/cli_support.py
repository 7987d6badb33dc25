"""What the command-line tests of compare, merge, report and the fleet
share: the binary under test ($VRAMBENCH, else build/vrambench), a runner
for it, the committed results, and an entry's memory figures."""

import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VRAMBENCH = os.path.abspath(os.environ.get("VRAMBENCH") or os.path.join(ROOT, "build", "vrambench"))
RESULTS = os.path.join(ROOT, "results")
CLAIMS = os.path.join(RESULTS, "claims-nvidia-h100-80gb-hbm3-20261123.json")
MICROBENCH = os.path.join(RESULTS, "microbench-nvidia-h100-80gb-hbm3-20261123.json")
GPU_RUN = os.path.join(RESULTS, "nvidia-h100-80gb-hbm3-20261123.json")


def vrambench(*args, env=None, timeout=600):
    """Runs the binary; (exit status, stdout, stderr)."""
    completed = subprocess.run([VRAMBENCH, *args], capture_output=True, text=True, timeout=timeout,
                               env=dict(os.environ, **(env or {})))
    return completed.returncode, completed.stdout, completed.stderr


def load(path):
    with open(path) as stream:
        return json.load(stream)


def memory_figures(entry):
    """An entry's memory figures: every counter but times, and the segment
    map with offsets from each segment's start (the addresses of virtual
    ranges depend on how many iterations ran before)."""
    figures = {key: value for key, value in entry.items()
               if not key.endswith(("_ns", "_time", "_p50", "_p99")) and key not in
               ("real_time", "cpu_time", "iterations", "segments_at_peak", "family_index",
                "per_family_instance_index")}
    figures["segments"] = [(s["size"], s["stream"], [(b["address"] - s["address"], b["size"], b["allocated"])
                                                     for b in s["blocks"]]) for s in entry.get("segments_at_peak", [])]
    return figures
