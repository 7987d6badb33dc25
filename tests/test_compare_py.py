#!/usr/bin/env python3
"""Checks that two vrambench result files carry what Google Benchmark's
tools/compare.py reads, and that compare.py's way of pairing two files works
on them. Standard library only.

What compare.py reads (google/benchmark tools/gbench/util.py and report.py):
  - util.load_benchmark_results: the "benchmarks" list, each entry's
    "run_name" (or "name") for --benchmark_filter; newer versions refuse a
    context.json_schema_version other than 1;
  - util.sort_benchmark_results: "family_index", "per_family_instance_index",
    "run_type" and "repetition_index" when present;
  - report.partition_benchmarks: entries paired by "name", kept when they have
    "time_unit", "real_time" and "cpu_time", filtered by the lhs time_unit;
  - report.get_difference_report: "real_time", "cpu_time" per measurement,
    "run_type" and, for aggregates, "aggregate_name"; the geomean line takes
    run_type "iteration" entries only.
Aggregates are named RUN_NAME + "_" + AGGREGATE_NAME, as Google Benchmark does.

usage: test_compare_py.py PATH/TO/vrambench
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

# The binary under test: $VRAMBENCH (make test sets it), else build/vrambench.
VRAMBENCH = os.path.abspath(os.environ.get("VRAMBENCH", "build/vrambench"))
AGGREGATES = ("mean", "median", "stddev", "cv")


def run_vrambench(*args):
    """Runs the binary; returns (exit status, stdout, stderr)."""
    completed = subprocess.run([VRAMBENCH, "run", *args], capture_output=True, text=True, timeout=300)
    return completed.returncode, completed.stdout, completed.stderr


def calculate_change(old, new):
    """compare.py's relative change (report.calculate_change)."""
    if old == 0 and new == 0:
        return 0.0
    if old == 0:
        return float(new - old) / (float(old + new) / 2)
    return float(new - old) / abs(old)


def partition(json1, json2):
    """A re-implementation of report.partition_benchmarks: unique names in
    lhs order, present in both, filtered by the lhs entry's time unit."""
    def unique_names(document):
        seen = []
        for entry in document["benchmarks"]:
            if entry["name"] not in seen:
                seen.append(entry["name"])
        return seen

    rhs_names = unique_names(json2)
    partitions = []
    for name in (n for n in unique_names(json1) if n in rhs_names):
        time_unit = next((e["time_unit"] for e in json1["benchmarks"] if e["name"] == name
                          and all(k in e for k in ("time_unit", "real_time", "cpu_time"))), None)
        if time_unit is None:
            continue
        lhs = [e for e in json1["benchmarks"] if e["name"] == name and e["time_unit"] == time_unit]
        rhs = [e for e in json2["benchmarks"] if e["name"] == name and e["time_unit"] == time_unit]
        partitions.append((lhs, rhs))
    return partitions


def difference_report(json1, json2):
    """report.get_difference_report without the U test."""
    report = []
    for lhs, rhs in partition(json1, json2):
        measurements = [{"time": calculate_change(a["real_time"], b["real_time"]),
                         "cpu": calculate_change(a["cpu_time"], b["cpu_time"])}
                        for a, b in zip(lhs, rhs)]
        run_type = lhs[0].get("run_type", "")
        report.append({"name": lhs[0]["name"], "measurements": measurements, "run_type": run_type,
                       "aggregate_name": lhs[0].get("aggregate_name", "") if run_type == "aggregate" else ""})
    return report


class CompareTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory(prefix="vb-test-compare-")
        cls.files = []
        for stem in ("a", "b"):
            path = os.path.join(cls.directory.name, stem + ".json")
            status, _, stderr = run_vrambench("--device", "sim", "--scenario", "random_mix", "--allocator", "cuda",
                                              "--param", "allocations=100", "--repetitions", "3",
                                              "--min-time", "0", "--quiet", "--out", path)
            if status != 0:
                raise RuntimeError("vrambench run failed: " + stderr)
            with open(path) as file:
                cls.files.append(json.load(file))

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def test_schema_version_is_one(self):
        for document in self.files:
            self.assertEqual(document["context"]["json_schema_version"], 1)

    def test_every_entry_has_the_fields_compare_reads(self):
        for document in self.files:
            for entry in document["benchmarks"]:
                for key in ("name", "run_name", "run_type", "iterations", "real_time", "cpu_time", "time_unit",
                            "family_index", "per_family_instance_index", "repetitions", "threads"):
                    self.assertIn(key, entry, entry["name"])
                self.assertIn(entry["time_unit"], ("ns", "us", "ms", "s"))
                self.assertIsInstance(entry["real_time"], (int, float))
                self.assertIsInstance(entry["cpu_time"], (int, float))

    def test_iterations_have_repetition_indices(self):
        indices = [e["repetition_index"] for e in self.files[0]["benchmarks"] if e["run_type"] == "iteration"]
        self.assertEqual(indices, [0, 1, 2])

    def test_aggregates_are_named_as_google_benchmark_names_them(self):
        aggregates = [e for e in self.files[0]["benchmarks"] if e["run_type"] == "aggregate"]
        self.assertEqual([e["aggregate_name"] for e in aggregates], list(AGGREGATES))
        for entry in aggregates:
            self.assertEqual(entry["name"], entry["run_name"] + "_" + entry["aggregate_name"])
            self.assertEqual(entry["aggregate_unit"], "percentage" if entry["aggregate_name"] == "cv" else "time")
            self.assertNotIn("repetition_index", entry)

    def test_pairing_by_name_matches_every_entry(self):
        report = difference_report(*self.files)
        names = [row["name"] for row in report]
        run_name = "random_mix:allocations=100/cuda"  # SCENARIO:PARAMETER/ALLOCATOR
        self.assertEqual(names, [run_name] + [run_name + "_" + a for a in AGGREGATES])
        self.assertEqual(len(report[0]["measurements"]), 3)  # the three repetitions, pairwise
        self.assertTrue(all(len(row["measurements"]) == 1 for row in report[1:]))

    def test_paired_aggregates_keep_their_aggregate_names(self):
        report = difference_report(*self.files)
        self.assertEqual([row["aggregate_name"] for row in report if row["run_type"] == "aggregate"],
                         list(AGGREGATES))

    def test_a_file_compared_with_itself_shows_no_change(self):
        report = difference_report(self.files[0], self.files[0])
        self.assertTrue(all(m["time"] == 0.0 and m["cpu"] == 0.0 for row in report for m in row["measurements"]))


class CommandLineTest(unittest.TestCase):
    def test_unknown_scenario_exits_2_with_one_line_and_no_file(self):
        with tempfile.TemporaryDirectory(prefix="vb-test-cli-") as directory:
            path = os.path.join(directory, "out.json")
            status, _, stderr = run_vrambench("--device", "sim", "--scenario", "nope", "--out", path)
            self.assertEqual(status, 2)
            self.assertEqual(len(stderr.splitlines()), 1, stderr)
            self.assertEqual(os.listdir(directory), [])


if __name__ == "__main__":
    unittest.main(verbosity=1)
