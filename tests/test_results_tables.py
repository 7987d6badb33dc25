"""python/vrambench/results_tables.py reads through python/vrambench/results.py: tables from good
files, one error line and exit status 2 for bad ones (standard library only)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import plot_fixture

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLES = os.path.join(REPO, "python", "vrambench", "results_tables.py")


def tables(*args):
    return subprocess.run([sys.executable, TABLES, *args], capture_output=True, text=True,
                          timeout=120, check=False)


class ResultsTables(unittest.TestCase):

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="vb-tables-")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def write(self, name, document):
        path = os.path.join(self.work, name)
        with open(path, "w", encoding="utf-8") as stream:
            stream.write(document if isinstance(document, str) else json.dumps(document))
        return path

    def test_bench_table_has_a_row_per_scenario_and_a_column_per_allocator(self):
        path = self.write("sim.json", plot_fixture.sim_result(scenarios=["views", "random_mix"]))
        run = tables("bench", path)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("simulated device", run.stdout)
        self.assertIn("| scenario | peak requested | `cuda` | `caching` |", run.stdout)
        self.assertIn("| views |", run.stdout)
        self.assertIn("| random_mix/caching |", run.stdout)

    def test_bench_table_takes_a_scenario_the_first_allocator_did_not_run(self):
        # The matrix read each scenario's requested bytes from the first allocator's
        # case: a scenario only a later allocator ran was a KeyError traceback.
        document = plot_fixture.sim_result(scenarios=["views", "random_mix"])
        document["benchmarks"] = [entry for entry in document["benchmarks"]
                                  if entry["name"].split("/")[:2] != ["random_mix", "cuda"]]
        run = tables("bench", self.write("sim.json", document))
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("| random_mix |", run.stdout)
        self.assertIn("| random_mix/caching |", run.stdout)

    def test_microbench_table_has_a_row_per_allocator(self):
        document = plot_fixture.microbench_result()
        for entry in document["benchmarks"]:
            entry["pair_ns_p50"], entry["pair_ns_p99"] = 1000, 2000
        run = tables("microbench", self.write("micro.json", document))
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("| `cuda` | 1,000 / 2,000", run.stdout)

    def test_replay_tables_never_mix_devices(self):
        replay = ["replay:traces/resnet50_train.json"]
        sim = self.write("a.json", plot_fixture.sim_result(scenarios=replay))
        gpu = self.write("b.json", plot_fixture.sim_result(scenarios=replay, device_name="NVIDIA H200",
                                                           simulated=False))
        run = tables("replay", sim, gpu)
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertIn("never mixes devices", run.stderr)

    def test_a_file_of_another_kind_is_refused_not_made_an_empty_table(self):
        # A microbench file made a bench table of nothing, and a run's scenarios
        # a "per trace" table, each with exit 0.
        cases = [("bench", self.write("micro.json", plot_fixture.microbench_result()), "it holds microbench entries"),
                 ("replay", self.write("run.json", plot_fixture.sim_result(scenarios=["views"])),
                  "not a replay results file (case 'views/cuda' is a run's)")]
        for kind, path, words in cases:
            with self.subTest(kind):
                run = tables(kind, path)
                self.assertEqual(run.returncode, 2, run.stdout)
                self.assertEqual(len(run.stderr.strip().splitlines()), 1, run.stderr)
                self.assertIn(words, run.stderr)
                self.assertEqual(run.stdout, "")
        replay = tables("replay", self.write("replay.json", plot_fixture.sim_result(
            scenarios=["replay:traces/resnet50_train.json"])))
        self.assertEqual(replay.returncode, 0, replay.stderr)

    def test_bad_input_is_one_line_and_exit_2(self):
        cases = {"not json": "{", "a list": "[]", "NaN": '{"context": {}, "benchmarks": [], "x": NaN}',
                 "deep": "[" * 100000 + "]" * 100000}
        for what, text in cases.items():
            for kind in ("bench", "claims", "microbench"):
                with self.subTest(what=what, kind=kind):
                    run = tables(kind, self.write("bad.json", text))
                    self.assertEqual(run.returncode, 2, run.stderr)
                    self.assertEqual(len(run.stderr.strip().splitlines()), 1, run.stderr)
                    self.assertNotIn("Traceback", run.stderr)

    def test_a_bad_command_line_is_one_error_line_and_help_is_exit_0(self):
        # It printed the 13-line usage on stderr, with no error line and no nearest kind.
        path = self.write("sim.json", plot_fixture.sim_result(scenarios=["views"]))
        for arguments, words in ((("bnch", path), "unknown table 'bnch'; did you mean bench?"),
                                 ((), "which table?"), (("bench",), "bench takes one FILE"),
                                 (("bench", path, path), "bench takes one FILE"), (("replay",), "replay takes FILE..."),
                                 (("--bogus", path), "unknown table '--bogus'")):
            with self.subTest(arguments):
                run = tables(*arguments)
                self.assertEqual(run.returncode, 2, run.stderr)
                self.assertEqual(len(run.stderr.strip().splitlines()), 1, run.stderr)
                self.assertTrue(run.stderr.startswith("results_tables: error: "), run.stderr)
                self.assertIn(words, run.stderr)
        run = tables("--help")
        self.assertEqual((run.returncode, run.stderr), (0, ""))
        self.assertIn("bench RESULTS.json", run.stdout)

    def test_a_newline_in_a_file_name_is_still_one_error_line(self):
        for kind in ("bench", "claims", "microbench"):
            with self.subTest(kind=kind):
                run = tables(kind, self.write("bad\nname.json", "{"))
                self.assertEqual(run.returncode, 2, run.stderr)
                self.assertEqual(len(run.stderr.strip().splitlines()), 1, run.stderr)
                self.assertIn("bad?name.json", run.stderr)

    def test_a_missing_counter_is_named(self):
        document = plot_fixture.sim_result(scenarios=["views"])
        for entry in document["benchmarks"]:
            entry.pop("overhead_ratio", None)
        path = self.write("sim.json", document)
        run = tables("bench", path)
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertIn(f"{path}: views/cuda: no counter 'overhead_ratio'", run.stderr)

    def test_a_counter_that_is_not_a_number_names_the_file(self):
        document = plot_fixture.sim_result(scenarios=["views"])
        document["benchmarks"][0]["peak_reserved_bytes"] = "big"
        path = self.write("sim.json", document)
        for kind in ("bench", "replay"):
            with self.subTest(kind=kind):
                run = tables(kind, path)
                self.assertEqual(run.returncode, 2, run.stderr)
                self.assertEqual(len(run.stderr.strip().splitlines()), 1, run.stderr)
                self.assertIn(f"{path}: benchmarks[0] (views/cuda): 'peak_reserved_bytes' is a string, not a number",
                              run.stderr)

    def test_a_byte_count_or_count_of_2_64_is_named_out_of_range_not_a_fraction(self):
        # 2^64 is a whole number: "not a whole number" sent the reader looking for a fraction.
        for key, value, kind in (("peak_reserved_bytes", 2 ** 64, "byte count"),
                                 ("peak_reserved_bytes", 2.0 ** 64, "byte count"), ("ooms", 2 ** 64, "count")):
            document = plot_fixture.sim_result(scenarios=["views"])
            document["benchmarks"][0][key] = value
            path = self.write("sim.json", document)
            with self.subTest(key=key, value=value):
                run = tables("replay", path)
                self.assertEqual(run.returncode, 2, run.stderr)
                self.assertEqual(len(run.stderr.strip().splitlines()), 1, run.stderr)
                self.assertIn(f"{path}: benchmarks[0] (views/cuda): '{key}' is 18446744073709551616, out of range "
                              f"(at or above 2^64; a {kind} is below 2^64)", run.stderr)


if __name__ == "__main__":
    unittest.main()
