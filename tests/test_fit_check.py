"""lab/harnesses/fit_check.py without a GPU: the fraction that gives PyTorch's
limit to the byte, the sim's verdicts it compares against, and the whole
check with its PyTorch workers stood in for (by the sim itself, then by a
PyTorch that runs out where the sim fits: an unsafe miss). Standard library
only; run by `make test` (VRAMBENCH names the binary)."""
import importlib.util
import json
import os
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
VRAMBENCH = os.path.abspath(os.environ.get("VRAMBENCH", "build/vrambench"))
SPEC = importlib.util.spec_from_file_location("fit_check", os.path.join(HERE, "..", "lab", "harnesses", "fit_check.py"))
fit_check = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(fit_check)
MiB = 1 << 20


class Fraction(unittest.TestCase):
    def test_the_limit_to_the_byte(self):
        # The naive limit / total is a byte short for some limits (about 4% of 2 MiB steps on these totals),
        # and a limit a byte under the minimum runs out.
        for total in (85017493504, 150109880320, 42505273344, 25393692672):
            short = 0
            for k in range(1000, 20000, 7):
                limit = k * 2 * MiB + (k % 3) * 12345
                if limit >= total:
                    break
                short += int(limit / total * total) < limit
                fraction = fit_check.fraction_for(limit, total)
                self.assertEqual(int(fraction * total), limit)
                self.assertLess(fraction, 1.0)
            self.assertGreater(short, 0)
        self.assertIsNone(fit_check.fraction_for(80 * 2**30, 80 * 2**30))  # a fraction of 1 sets no limit


class Check(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.addCleanup(self.directory.cleanup)
        self.dir = self.directory.name
        self.trace = os.path.join(self.dir, "workload.trace")
        done = subprocess.run([VRAMBENCH, "gen-trace", "random", "--seed", "4", "--events", "800", "--max-size", "40M",
                               "--max-live", "400M", "-o", self.trace], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.saved = (fit_check.worker, fit_check.convert)
        self.addCleanup(self.restore)

    def restore(self):
        fit_check.worker, fit_check.convert = self.saved

    def fake_pytorch(self, unsafe_at_prediction=False):
        """Workers that answer as the sim does (or, with unsafe_at_prediction, run out at every prediction)."""
        predictions = {}

        def worker(budget, outdir, name, conf, tag, limit=None, snapshot=None):
            if snapshot:
                with open(snapshot, "wb") as f:
                    f.write(b"\x80\x02}.")
                return {"completed": True, "oom": False, "peak_reserved": 1, "used_after_workload": 700 * MiB,
                        "reserved_now": 200 * MiB, "device_name": "fake", "torch_version": "0"}
            if conf == fit_check.ASYNC:  # its limit counts the bytes handed out: it fits from their peak, P, up
                fits = not tag.endswith("-async-64")
            else:  # as the sim placed top-down (where the two placements differ, the driver's is one of them)
                verdict = fit_check.sim_verdict(VRAMBENCH, self.trace, conf, limit, outdir, "fake-" + tag)
                fits = verdict["by_placement"]["top-down"]
            if unsafe_at_prediction and tag.endswith("-max+0"):
                fits = False
            return {"completed": fits, "oom": not fits, "num_alloc_retries": 0, "num_ooms": int(not fits),
                    "peak_reserved": 123}

        fit_check.worker = worker
        fit_check.convert = lambda snapshot, trace: shutil.copy(self.trace, trace) and True
        return predictions

    def run_check(self):
        out = os.path.join(self.dir, "out")
        status = fit_check.main([out, "--vrambench", VRAMBENCH, "--workloads", "mlp_varbatch", "--jobs", "2",
                                 "--budget-s", "300"])
        with open(os.path.join(out, "fit-check.json")) as f:
            document = json.load(f)
        with open(os.path.join(out, "fit-check.md")) as f:
            table = f.read()
        return status, document, table

    def test_a_pytorch_that_behaves_as_the_sim_agrees_everywhere(self):
        self.fake_pytorch()
        status, document, table = self.run_check()
        self.assertEqual(status, 0, table)
        self.assertTrue(document["verdict"]["all_agree"])
        self.assertEqual(len(document["rows"]), 4)  # the four settings
        self.assertEqual(len(document["async"]), 1)
        for row in document["rows"]:
            checks = {c["point"]: c for c in row["checks"]}
            self.assertTrue(checks["P"]["sim"]["fits"])  # the prediction fits under both placements ...
            low, high = row["predicted_min_capacity_bytes_min"], row["predicted_min_capacity_bytes"]
            self.assertLessEqual(low, high)
            self.assertEqual(checks["L - 2 MiB"]["limit_bytes"], low - 2 * MiB)
            if row["min_capacity_exact"]:
                self.assertFalse(checks["L - 2 MiB"]["sim"]["fits"])  # ... and below the interval under neither
            self.assertTrue(checks["P + 64 MiB"]["sim"]["fits"])
            self.assertEqual("L" in checks, low < high)  # inside the interval where it is one
        self.assertEqual(document["overhead_bytes"], 500 * MiB - (document["baseline_used_bytes"] or 0))
        self.assertIn("| mlp_varbatch | `(defaults)` |", table)

    def test_an_oom_at_the_prediction_is_an_unsafe_miss(self):
        self.fake_pytorch(unsafe_at_prediction=True)
        status, document, table = self.run_check()
        self.assertEqual(status, 1)
        self.assertEqual(document["verdict"]["unsafe"], 4)
        self.assertIn("**MISS**", table)


if __name__ == "__main__":
    unittest.main()
