"""Tests of lab/probes/stitch_tradeoff_plot.py (standard library unittest): the figure
has one line per workload on each panel, its points at the rows' figures,
and the CLI writes a PNG or refuses bad usage with exit status 2."""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "lab", "probes", "stitch_tradeoff_plot.py")

try:
    import matplotlib  # noqa: F401  (only whether it is there)
    HAVE_MATPLOTLIB = True
except ImportError:
    HAVE_MATPLOTLIB = False


def row(workload, config, calls, overhead):
    """A stitch row as lab/probes/stitch_tradeoff.py writes it (figures made up)."""
    return {"workload": workload, "allocator": "stitch", "config": config, "calls": calls,
            "estimated_ms": calls * 0.01, "vs_caching": calls * 0.001, "overhead": overhead}


DATA = {"simulated": True, "cost_us": {"map": 5.0},
        "rows": [row("a.trace.gz", "chunk_mb=2", 1000, 1.01),
                 row("a.trace.gz", "chunk_mb=20", 100, 1.10),
                 row("random_mix", "chunk_mb=2", 2000, 1.02),
                 row("random_mix", "chunk_mb=20", 300, 1.05),
                 {"workload": "random_mix", "allocator": "caching", "config": "", "calls": 0,
                  "estimated_ms": 1.0, "vs_caching": 1.0, "overhead": 1.2}]}


def load_module():
    spec = importlib.util.spec_from_file_location("stitch_tradeoff", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@unittest.skipUnless(HAVE_MATPLOTLIB, "matplotlib is not installed")
class StitchTradeoffPlot(unittest.TestCase):
    def test_one_line_per_workload_at_the_rows_figures(self):
        fig = load_module().figure(DATA)
        calls_axes, time_axes = fig.axes[:2]
        self.assertEqual(len(calls_axes.get_lines()) - 1, 2)  # one per workload, plus the 1.02 line
        lines = {line.get_label(): line for line in calls_axes.get_lines()}
        self.assertEqual(sorted(lines["a"].get_xdata()), [100, 1000])
        self.assertEqual(sorted(lines["random_mix"].get_ydata()), [1.02, 1.05])  # caching left out
        time_lines = {line.get_label(): line for line in time_axes.get_lines()}
        self.assertEqual(sorted(time_lines["a"].get_xdata()), [0.1, 1.0])

    def test_points_are_labelled_chunk_mb_slash_handle_max_mb(self):
        label = load_module()._label
        self.assertEqual(label(row("a", "chunk_mb=20,handle_max_mb=20", 1, 1.0)), "20/20")
        self.assertEqual(label(row("a", "chunk_mb=8,handle_max_mb=0", 1, 1.0)), "8/-")
        self.assertEqual(label(row("a", "chunk_mb=2", 1, 1.0)), "2")

    def test_cli_writes_a_png_and_refuses_bad_usage(self):
        with tempfile.TemporaryDirectory() as tmp:
            data, png = os.path.join(tmp, "data.json"), os.path.join(tmp, "out.png")
            with open(data, "w") as f:
                json.dump(DATA, f)
            subprocess.run([sys.executable, SCRIPT, data, png], check=True)
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            self.assertEqual(subprocess.run([sys.executable, SCRIPT, data], capture_output=True).returncode, 2)


if __name__ == "__main__":
    unittest.main()
