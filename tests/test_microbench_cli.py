"""`vrambench microbench`: the driver rows beside the strategies'. Standard
library only; run by `make test` (VRAMBENCH names the binary). No timing is
asserted: only which rows exist and that they carry the same fields."""
import json
import os
import subprocess
import tempfile
import unittest

VRAMBENCH = os.path.abspath(os.environ.get("VRAMBENCH", "build/vrambench"))
SIZES = (512, 65536, 2097152, 20971520, 268435456)
TWIN_FIELDS = {"driver_twin_pair_ns_p50", "pair_to_driver_twin"}


def microbench(*args):
    done = subprocess.run([VRAMBENCH, "microbench", "--device", "sim", *args],
                          capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, done.stderr


class DriverRows(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()
        out = os.path.join(cls.directory.name, "micro.json")
        cls.status, cls.stdout, cls.stderr = microbench(
            "--allocator", "async,driver:cudaMalloc,driver:cudaMallocAsync", "--out", out)
        cls.entries = {}
        if cls.status == 0:
            cls.entries = {e["name"]: e for e in json.load(open(out))["benchmarks"]}

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def test_driver_rows_exist_for_every_size(self):
        self.assertEqual(self.status, 0, self.stderr)
        for driver in ("driver:cudaMalloc", "driver:cudaMallocAsync"):
            for size in SIZES:
                self.assertIn(f"microbench/{driver}/{size}", self.entries)

    def test_driver_rows_carry_the_strategy_rows_fields(self):
        strategy = self.entries[f"microbench/async/{SIZES[0]}"]
        for driver in ("driver:cudaMalloc", "driver:cudaMallocAsync"):
            row = self.entries[f"microbench/{driver}/{SIZES[0]}"]
            self.assertEqual(set(row) | TWIN_FIELDS, set(strategy))
            self.assertEqual(row["allocator"], driver)
            # Every driver malloc is a driver allocation.
            self.assertEqual(row["driver_allocs_per_pair"], 1.0)

    def test_async_carries_its_driver_twin_timed_interleaved(self):
        for size in SIZES:
            row = self.entries[f"microbench/async/{size}"]
            self.assertGreater(row["driver_twin_pair_ns_p50"], 0)
            self.assertAlmostEqual(row["pair_to_driver_twin"],
                                   row["pair_ns_p50"] / row["driver_twin_pair_ns_p50"], places=9)

    def test_rows_without_a_driver_twin_have_no_twin_fields(self):
        status, _, stderr = microbench("--allocator", "caching,async", "--threads", "2",
                                       "--out", os.path.join(self.directory.name, "threads.json"))
        self.assertEqual(status, 0, stderr)
        with open(os.path.join(self.directory.name, "threads.json")) as file:
            entries = json.load(file)["benchmarks"]
        self.assertTrue(entries)
        for entry in entries:   # caching has no twin; nor has async while threads contend
            self.assertFalse(TWIN_FIELDS & set(entry), entry["name"])

    def test_unknown_driver_row_is_a_usage_error(self):
        status, _, stderr = microbench("--allocator", "driver:bogus")
        self.assertEqual(status, 2)
        self.assertIn("vrambench: error:", stderr)
        self.assertEqual(len(stderr.strip().splitlines()), 1)

    def test_a_bad_allocator_key_is_refused_before_the_table_starts(self):
        status, stdout, stderr = microbench("--allocator", "bfc,caching[bogus=1]")
        self.assertEqual(status, 2)
        self.assertIn("unknown config key 'bogus'", stderr)
        self.assertEqual(len(stderr.strip().splitlines()), 1)
        self.assertEqual(stdout, "")


if __name__ == "__main__":
    unittest.main()
