"""`vrambench claims` from the command line: the PyTorch column from a
recorded measurements file, and bad input. Standard library only; run by
`make test` (VRAMBENCH names the binary)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

VRAMBENCH = os.path.abspath(os.environ.get("VRAMBENCH", "build/vrambench"))
RECORDED = "results/pytorch-claims-nvidia-h200-20261121.json"


def claims(*args, quiet=True):
    done = subprocess.run([VRAMBENCH, "claims", "--device", "sim", *(["--quiet"] if quiet else []), *args],
                          capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, done.stderr


class ClaimsCommand(unittest.TestCase):
    def test_pytorch_column_is_decided_from_recorded_measurements(self):
        with tempfile.TemporaryDirectory() as directory:
            out = os.path.join(directory, "claims.json")
            status, stdout, stderr = claims("--allocator", "caching", "--pytorch", RECORDED, "--out", out, quiet=False)
            self.assertEqual(status, 0, stderr)
            rows = json.load(open(out))["claims"]
            pytorch = {r["id"]: r for r in rows if r["allocator"] == "pytorch"}
            self.assertEqual(len(pytorch), len(json.load(open(out))["catalogue"]))
            # Recorded on a GPU: every claim has a measurement and a verdict.
            for row in pytorch.values():
                self.assertIn(row["verdict"], ("holds", "does not hold", "depends"), row)
                self.assertFalse(row["simulated"])
            self.assertIn("pytorch", stdout.splitlines()[0])
            # Each column's device: the H200's PyTorch column sat under a run
            # on the simulated device with nothing naming where it came from.
            self.assertEqual(stdout.splitlines()[-1], "devices: caching: the simulated device; pytorch: NVIDIA H200")
            tables = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "vrambench",
                                  "results_tables.py")
            table = subprocess.run([sys.executable, tables, "claims", out], capture_output=True, text=True,
                                   timeout=120)
            self.assertEqual(table.returncode, 0, table.stderr)
            self.assertIn("`pytorch` measured on NVIDIA H200.", table.stdout)

    def test_a_file_that_is_not_measurements_is_one_error_line(self):
        with tempfile.TemporaryDirectory() as directory:
            bad = os.path.join(directory, "bad.json")
            with open(bad, "w") as f:
                json.dump({"context": {}, "benchmarks": []}, f)
            out = os.path.join(directory, "claims.json")
            status, _, stderr = claims("--pytorch", bad, "--out", out)
            self.assertEqual(status, 2)
            self.assertEqual(len(stderr.strip().splitlines()), 1, stderr)
            self.assertFalse(os.path.exists(out))

    def test_unknown_claim_is_a_usage_error(self):
        status, _, stderr = claims("--claim", "no_such_claim")
        self.assertEqual(status, 2)
        self.assertIn("no_such_claim", stderr)


if __name__ == "__main__":
    unittest.main()
