"""`vrambench check-sim`: re-running GPU result files on the simulated device
and listing the cases whose memory figures differ. The "GPU" files here are
sim results marked as from a GPU, so the check must find them equal, and
must find exactly the differences planted in them. Standard library only;
run by `make test` (VRAMBENCH names the binary)."""
import json
import os
import subprocess
import tempfile
import unittest

VRAMBENCH = os.path.abspath(os.environ.get("VRAMBENCH", "build/vrambench"))
TRACE = "tests/fixtures/traces/resnet50.trace.gz"


def vrambench(*args):
    done = subprocess.run([VRAMBENCH, *args], capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout, done.stderr


def as_gpu(path, out, change=None):
    """Writes `path` as a GPU result to `out`, after `change(document)`."""
    with open(path) as f:
        document = json.load(f)
    document["context"]["simulated"] = False
    document["context"]["device_name"] = "test GPU"
    if change:
        change(document)
    with open(out, "w") as f:
        json.dump(document, f)
    return out


class CheckSim(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()
        cls.run_file = os.path.join(cls.directory.name, "run.json")
        cls.replay_file = os.path.join(cls.directory.name, "replay.json")
        cls.claims_file = os.path.join(cls.directory.name, "claims.json")
        cls.made = [
            vrambench("run", "--scenario", "views,empty_cache_loop", "--allocator", "cuda,bfc,caching[max_split_size_mb=256]",
                      "--device", "sim", "--min-time", "0", "--quiet", "--out", cls.run_file),
            vrambench("replay", TRACE, "--allocator", "caching,async", "--device", "sim", "--quiet",
                      "--out", cls.replay_file),
            vrambench("claims", "--allocator", "cuda", "--device", "sim", "--quiet", "--out", cls.claims_file),
        ]

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def path(self, name):
        return os.path.join(self.directory.name, name)

    def checked(self):
        """A GPU file whose cases are checked, beside a skipped one (a check
        of nothing at all is not a pass)."""
        return as_gpu(self.run_file, self.path("checked-run.json"))

    def test_inputs_were_made(self):
        for status, _, stderr in self.made:
            self.assertEqual(status, 0, stderr)

    def test_equal_figures_pass(self):
        files = [as_gpu(self.run_file, self.path("gpu-run.json")),
                 as_gpu(self.replay_file, self.path("gpu-replay.json")),
                 as_gpu(self.claims_file, self.path("gpu-claims.json"))]
        status, stdout, stderr = vrambench("check-sim", *files)
        self.assertEqual(status, 0, stdout + stderr)
        self.assertIn("6 cases, 0 differ", stdout)     # run: 2 scenarios x 3 allocators
        self.assertIn("2 cases, 0 differ", stdout)     # replay: 2 allocators
        self.assertNotIn("skipped", stdout)
        # Nothing differed, so every documented difference is named as not seen.
        self.assertIn("documented difference not seen in these files: replay:*/async *", stdout)

    def test_a_planted_difference_is_listed_with_both_numbers_and_fails(self):
        def plant(document):
            for entry in document["benchmarks"]:
                if entry["name"] == "views/bfc":
                    entry["peak_reserved_bytes"] += 2097152
                    entry["timeline"][-1]["allocated"] += 512
        gpu = as_gpu(self.run_file, self.path("planted.json"), plant)
        status, stdout, _ = vrambench("check-sim", gpu)
        self.assertEqual(status, 1, stdout)
        lines = [line for line in stdout.splitlines() if line.startswith("  views/bfc:")]
        self.assertEqual(len(lines), 2, stdout)
        self.assertIn("peak_reserved_bytes", lines[0])
        self.assertIn("(-2097152)", lines[0])   # sim minus gpu
        self.assertIn("timeline.allocated", lines[1])
        self.assertIn("6 cases, 1 differ", stdout)

    def test_a_planted_claim_difference_fails(self):
        def plant(document):
            claim = next(c for c in document["claims"] if c["allocator"] == "cuda"
                         and "large_tensor_bytes" in c["numbers"])
            claim["numbers"]["large_tensor_bytes"] += 1
            claim["numbers"]["every1_iter_ns"] = 123.0   # a time: not compared
        gpu = as_gpu(self.claims_file, self.path("planted-claims.json"), plant)
        status, stdout, _ = vrambench("check-sim", gpu)
        self.assertEqual(status, 1, stdout)
        self.assertIn("large_tensor_bytes", stdout)
        self.assertNotIn("every1_iter_ns", stdout)

    def test_files_before_the_memory_pass_are_skipped_with_a_note(self):
        def old(document):
            del document["context"]["memory_pass"]
        gpu = as_gpu(self.run_file, self.path("old.json"), old)
        status, stdout, _ = vrambench("check-sim", gpu, self.checked())
        self.assertEqual(status, 0, stdout)
        self.assertIn("skipped: made before the memory pass", stdout)

    def test_newest_checks_only_the_newest_file_of_a_kind(self):
        def older(document):
            document["context"]["date"] = "2000-01-01T00:00:00+00:00"
            document["benchmarks"][0]["peak_reserved_bytes"] += 1   # would fail if checked
        old = as_gpu(self.run_file, self.path("older.json"), older)
        new = as_gpu(self.run_file, self.path("newer.json"))
        status, stdout, _ = vrambench("check-sim", "--newest", old, new)
        self.assertEqual(status, 0, stdout)
        self.assertIn("older.json\n  skipped: a newer file", stdout)
        self.assertIn("6 cases, 0 differ", stdout)

    def test_newest_keeps_an_older_file_whose_cases_the_newer_lacks(self):
        def older(document):
            document["context"]["date"] = "2000-01-01T00:00:00+00:00"
            document["benchmarks"][0]["peak_reserved_bytes"] += 1   # fails: it must be checked
        def fewer(document):
            first = document["benchmarks"][0]["name"]
            document["benchmarks"] = [e for e in document["benchmarks"] if e["name"] != first]
        old = as_gpu(self.run_file, self.path("older.json"), older)
        new = as_gpu(self.run_file, self.path("newer-fewer.json"), fewer)
        status, stdout, _ = vrambench("check-sim", "--newest", old, new)
        self.assertEqual(status, 1, stdout)
        self.assertNotIn("skipped: a newer file", stdout)

    def test_json_that_is_not_results_is_skipped_as_the_help_says(self):
        # Without --newest it was exit 2 after the other files were checked
        # (the help says such files are skipped: a folder's glob holds them).
        other = self.path("other.json")
        with open(other, "w") as f:
            json.dump({"grid": []}, f)
        for newest in ([], ["--newest"]):
            with self.subTest(newest=newest):
                status, stdout, _ = vrambench("check-sim", *newest, other, self.checked())
                self.assertEqual(status, 0, stdout)
                self.assertIn("skipped: not a vrambench results file", stdout)
        status, stdout, stderr = vrambench("check-sim", other)  # alone: nothing checked
        self.assertEqual(status, 2, stderr)
        self.assertIn("nothing was checked", stderr)
        self.assertIn("skipped: not a vrambench results file", stdout)

    def test_sim_results_are_skipped(self):
        status, stdout, _ = vrambench("check-sim", self.run_file, self.checked())
        self.assertEqual(status, 0, stdout)
        self.assertIn("skipped: a sim result", stdout)

    def test_a_file_that_is_not_json_is_one_error_line(self):
        bad = self.path("bad.json")
        with open(bad, "w") as f:
            f.write("{not json")
        status, _, stderr = vrambench("check-sim", bad)
        self.assertEqual(status, 2)
        self.assertEqual(len(stderr.strip().splitlines()), 1, stderr)
        self.assertIn("vrambench: error: check-sim: " + bad + ":1:", stderr)


if __name__ == "__main__":
    unittest.main()
