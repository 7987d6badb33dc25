"""python/vrambench/plots/torch_ab.py on a made-up torch A/B file (the format lab/harnesses/torch_ab.py
writes): the table's ratios and loss column, and that the figure draws
every allocator. Needs matplotlib (run by `make test`)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "vrambench", "plots"))
import torch_ab  # noqa: E402

MiB = 1 << 20


def made_up():
    def ok(workload, allocator, reserved, step_ns, loss_hex, matches):
        e = {"name": f"{workload}/{allocator}", "run_type": "iteration", "real_time": step_ns,
             "peak_reserved_bytes": reserved, "peak_requested_bytes": 100 * MiB,
             "driver_used_peak_bytes": reserved + 500 * MiB, "final_loss": 1.5, "final_loss_hex": loss_hex}
        if allocator != "pytorch":
            e.update(loss_matches_native=matches, loss_rel_diff=0.0 if matches else 1e-3)
        return e
    return {"context": {"device_name": "test GPU", "torch_version": "x", "date": "2026-11-22"},
            "benchmarks": [ok("resnet50", "pytorch", 200 * MiB, 10e6, "a", True),
                           ok("resnet50", "caching", 202 * MiB, 11e6, "a", True),
                           ok("resnet50", "stitch", 150 * MiB, 20e6, "b", False),
                           {"name": "resnet50/buddy", "error_occurred": True, "error_message": "exit 134: oom"}]}


class TorchAbPlot(unittest.TestCase):
    def test_table_has_ratios_and_loss_checks(self):
        lines = torch_ab.table(made_up()).splitlines()
        rows = {line.split(" | ")[0].strip("| "): line for line in lines if line.startswith("| resnet50/")}
        self.assertIn("| 1.010 |", rows["resnet50/caching"])
        self.assertIn("| 0.750 |", rows["resnet50/stitch"])
        self.assertIn("no (rel. diff 1.00e-03)", rows["resnet50/stitch"])
        self.assertIn("| yes |", rows["resnet50/caching"])
        self.assertIn("error: exit 134: oom", rows["resnet50/buddy"])

    def test_figure_draws_each_allocator(self):
        figure = torch_ab.figure(made_up())
        labels = figure.axes[0].get_legend_handles_labels()[1]
        self.assertEqual(labels, ["pytorch", "caching", "stitch", "buddy"])

    def test_a_file_of_another_shape_is_one_error_line_not_a_traceback(self):
        # load() was json.loads alone: each of these was a traceback (exit 1), and a
        # vrambench run's results file a table of None.
        def changed(change):
            document = made_up()
            change(document)
            return document
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "vrambench", "plots",
                              "torch_ab.py")
        cases = {
            "a list": [], "NaN": float("nan"), "benchmarks a number": {"context": {}, "benchmarks": 5},
            "a run's results (no torch_version)": changed(lambda d: d["context"].pop("torch_version")),
            "context a number": changed(lambda d: d.__setitem__("context", 5)),
            "date a number": changed(lambda d: d["context"].update(date=5)),
            "an entry a number": changed(lambda d: d["benchmarks"].append(5)),
            "an entry without a name": changed(lambda d: d["benchmarks"].append({})),
            "a name that is a number": changed(lambda d: d["benchmarks"][0].update(name=5)),
            "no real_time": changed(lambda d: d["benchmarks"][0].pop("real_time")),
            "real_time text": changed(lambda d: d["benchmarks"][0].update(real_time="x")),
            "bytes text": changed(lambda d: d["benchmarks"][0].update(peak_reserved_bytes="x")),
            "loss_rel_diff text": changed(lambda d: d["benchmarks"][1].update(loss_rel_diff="x")),
        }
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "ab.json")
            for what, document in cases.items():
                with self.subTest(what):
                    with open(path, "w") as stream:
                        json.dump(document, stream)
                    run = subprocess.run([sys.executable, script, path, "--table"], capture_output=True, text=True,
                                         timeout=60)
                    self.assertEqual(run.returncode, 2, run.stderr)
                    self.assertEqual(len(run.stderr.strip().splitlines()), 1, run.stderr)
                    self.assertTrue(run.stderr.startswith("torch_ab: error: "), run.stderr)
                    self.assertEqual(run.stdout, "")


if __name__ == "__main__":
    unittest.main()
