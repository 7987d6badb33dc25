"""Tests of python/vrambench/plots and `make plots` (standard library unittest).

Run by `make test` with a python that has matplotlib:
    /usr/bin/python3 -m unittest discover -s tests -p 'test_*.py'
The input is a synthetic sim result (tests/plot_fixture.py) that follows
docs/results-json.md; write_results() is the one place to swap it for a real
`vrambench run` output.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

import plot_fixture
import signal_defaults

signal_defaults.restore()

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLOT_SCRIPT = os.path.join(REPO, "python", "vrambench", "plots", "__main__.py")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

try:
    import matplotlib  # noqa: F401  (only whether it is there)
    HAVE_MATPLOTLIB = True
except ImportError:
    HAVE_MATPLOTLIB = False

# Every PNG plot.py makes from the full fixture: one timeline per scenario
# and trace, the four summary plots, and the segment map of the entry with
# the largest external fragmentation (plot_fixture: the caching allocator's
# split and cached segments in random_mix).
FULL_FIXTURE_PNGS = {
    "timeline-views.png", "timeline-function_scope.png", "timeline-training_cleanup.png",
    "timeline-random_mix.png", "timeline-empty_cache_loop.png",
    "timeline-dataloader_batches.png", "timeline-replay-resnet50_train.png",
    "peaks.png", "latency.png", "empty_cache_loop.png", "dataloader_batches.png",
    "segments-random_mix-caching.png",
}


def write_json(path, document):
    with open(path, "w", encoding="utf-8") as stream:
        json.dump(document, stream)
    return path


def write_results(path, **options):
    """Writes a sim results file (the synthetic stand-in for a real run)."""
    return write_json(path, plot_fixture.sim_result(**options))


def run_plot(*args):
    """Runs plot.py with the test's python; returns the CompletedProcess."""
    return subprocess.run([sys.executable, PLOT_SCRIPT, *args], capture_output=True,
                          text=True, timeout=300, check=False)


def pngs_in(directory):
    return {name for name in os.listdir(directory) if name.endswith(".png")}


@unittest.skipUnless(HAVE_MATPLOTLIB, f"matplotlib is not installed for {sys.executable}")
class PlotsFromSimResult(unittest.TestCase):
    """One plot.py run on the full fixture, shared by the checks on its PNGs."""

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="vb-plots-")
        cls.results = write_results(os.path.join(cls.work, "sim.json"))
        cls.out = os.path.join(cls.work, "out")
        cls.plot_run = run_plot(cls.results, "--out-dir", cls.out)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def test_plot_script_succeeds_on_a_sim_result(self):
        self.assertEqual(self.plot_run.returncode, 0, self.plot_run.stderr)

    def test_every_png_is_written(self):
        self.assertEqual(pngs_in(self.out), FULL_FIXTURE_PNGS)

    def test_every_png_is_a_non_empty_png(self):
        for name in FULL_FIXTURE_PNGS & pngs_in(self.out):
            with open(os.path.join(self.out, name), "rb") as stream:
                head = stream.read(64)
            with self.subTest(png=name):
                self.assertTrue(head.startswith(PNG_SIGNATURE))
                self.assertGreater(os.path.getsize(os.path.join(self.out, name)), 1000)

    def test_no_staging_folder_is_left_behind(self):
        self.assertEqual([n for n in os.listdir(self.out) if n.startswith(".plot-")], [])


VRAMBENCH = os.path.abspath(os.environ.get("VRAMBENCH", os.path.join(REPO, "build", "vrambench")))


@unittest.skipUnless(HAVE_MATPLOTLIB, f"matplotlib is not installed for {sys.executable}")
@unittest.skipUnless(os.access(VRAMBENCH, os.X_OK), f"{VRAMBENCH} is not built")
class PlotsFromRealSimRun(unittest.TestCase):
    """plot.py on what `vrambench run`, `microbench` and `replay` really write
    (simulated device), not on the synthetic fixture."""

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="vb-plots-real-")
        cls.results = os.path.join(cls.work, "run.json")
        cls.micro = os.path.join(cls.work, "micro.json")
        cls.replayed = os.path.join(cls.work, "replay.json")
        for command in (
                ["run", "--device", "sim", "--quiet", "--repetitions", "1", "--min-time", "0",
                 "--scenario", "views,empty_cache_loop,dataloader_batches", "--allocator", "cuda,caching",
                 "--out", cls.results],
                ["microbench", "--device", "sim", "--allocator", "caching", "--out", cls.micro],
                ["replay", os.path.join(REPO, "tests", "fixtures", "traces", "resnet50.trace.gz"), "--device", "sim",
                 "--quiet", "--allocator", "caching,expandable", "--out", cls.replayed]):
            subprocess.run([VRAMBENCH, *command], capture_output=True, text=True, timeout=300, check=True)
        cls.out = os.path.join(cls.work, "plots")
        cls.replay_out = os.path.join(cls.work, "replay-plots")
        cls.completed = run_plot(cls.results, "--microbench", cls.micro, "--out-dir", cls.out)
        cls.replay_completed = run_plot(cls.replayed, "--out-dir", cls.replay_out)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def test_every_png_of_a_run_is_written_and_non_empty(self):
        self.assertEqual(self.completed.returncode, 0, self.completed.stderr)
        made = pngs_in(self.out)
        for name in ("timeline-views.png", "timeline-empty_cache_loop.png", "timeline-dataloader_batches.png",
                     "peaks.png", "latency.png", "empty_cache_loop.png", "dataloader_batches.png"):
            self.assertIn(name, made)
        self.assertTrue(any(name.startswith("segments-") for name in made), made)
        for name in made:
            with open(os.path.join(self.out, name), "rb") as png:
                self.assertTrue(png.read(8) == PNG_SIGNATURE, name)

    def test_a_replay_result_gets_its_timeline(self):
        self.assertEqual(self.replay_completed.returncode, 0, self.replay_completed.stderr)
        self.assertIn("timeline-replay-resnet50.trace.gz.png", pngs_in(self.replay_out))


@unittest.skipUnless(HAVE_MATPLOTLIB, f"matplotlib is not installed for {sys.executable}")
class PlotOptions(unittest.TestCase):
    """The optional plots and options, each on a small fixture."""

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="vb-plots-")
        self.out = os.path.join(self.work, "out")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def test_two_results_give_a_comparison_png(self):
        first = write_results(os.path.join(self.work, "a.json"), scenarios=["views"])
        second = write_results(os.path.join(self.work, "b.json"), scenarios=["views"],
                               time_factor=0.5, device_name="NVIDIA H100 80GB HBM3",
                               simulated=False)
        run = run_plot(first, second, "--out-dir", self.out)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("compare.png", pngs_in(self.out))

    def test_microbench_file_is_accepted_for_latency(self):
        results = write_results(os.path.join(self.work, "sim.json"), scenarios=["views"])
        micro = write_json(os.path.join(self.work, "micro.json"),
                           plot_fixture.microbench_result())
        run = run_plot(results, "--microbench", micro, "--out-dir", self.out)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("latency.png", pngs_in(self.out))

    def test_segments_option_draws_the_named_entry(self):
        results = write_results(os.path.join(self.work, "sim.json"), scenarios=["views"])
        run = run_plot(results, "--segments", "views/cuda", "--out-dir", self.out)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("segments-views-cuda.png", pngs_in(self.out))

    def test_ctrl_c_while_drawing_ends_by_sigint_with_no_traceback_and_no_png(self):
        results = write_results(os.path.join(self.work, "sim.json"))
        def drawing(process):  # a first PNG is in the staging folder
            try:
                staging = [name for name in os.listdir(self.out) if name.startswith(".plot-")]
                return any(os.listdir(os.path.join(self.out, name)) for name in staging)
            except FileNotFoundError:  # no output folder yet, or the staging folder just went
                return False
        def missed(process, errors):  # the run got past its drawing before the signal
            self.assertEqual(process.returncode, 0, errors)
            shutil.rmtree(self.out)
        run = signal_defaults.interrupt_a_run(
            lambda: subprocess.Popen([sys.executable, PLOT_SCRIPT, results, "--out-dir", self.out],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE),
            drawing, signal.SIGINT, missed)
        if run is None:
            self.skipTest("the plots were done before they could be interrupted, 3 times")
        process, errors = run
        self.assertEqual(process.returncode, -signal.SIGINT, errors)
        self.assertNotIn(b"Traceback", errors)
        self.assertEqual(os.listdir(self.out), [])  # no PNG, no staging folder

    def test_absent_plot_data_is_skipped_with_a_note(self):
        # Only "views": no empty_cache_loop entries, so that plot is skipped,
        # which is no error.
        results = write_results(os.path.join(self.work, "sim.json"), scenarios=["views"])
        run = run_plot(results, "--out-dir", self.out)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("skipping empty_cache_loop.png", run.stderr)
        self.assertNotIn("empty_cache_loop.png", pngs_in(self.out))

    def test_latest_picks_the_newest_run_result_by_date(self):
        folder = os.path.join(self.work, "results")
        os.mkdir(folder)
        write_results(os.path.join(folder, "gpu-new.json"), scenarios=["views"],
                      date="2025-03-01T10:00:00+00:00")
        write_results(os.path.join(folder, "gpu-old.json"), scenarios=["views"],
                      date="2025-01-01T10:00:00+00:00")
        write_json(os.path.join(folder, "claims-gpu.json"), {"context": {}, "claims": []})
        run = run_plot("--latest", folder, "--out-dir", self.out)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("gpu-new.json", run.stderr)

    @unittest.skipUnless(shutil.which("make"), "make is not installed")
    def test_make_plots_writes_pngs(self):
        results = write_results(os.path.join(self.work, "sim.json"), scenarios=["views"])
        run = subprocess.run(["make", "--no-print-directory", "-C", REPO, "plots",
                              f"RESULTS={results}", f"PLOTS_DIR={self.out}",
                              f"PLOT_PYTHON={sys.executable}"],
                             capture_output=True, text=True, timeout=300, check=False)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn("timeline-views.png", pngs_in(self.out))


class BadInput(unittest.TestCase):
    """Bad input: one error line, exit status 2, no PNG written. These run
    even without matplotlib: the input is checked before it is imported."""

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="vb-plots-")
        self.out = os.path.join(self.work, "out")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def assert_rejected(self, run, words):
        self.assertEqual(run.returncode, 2, run.stderr)
        lines = run.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, run.stderr)
        self.assertIn("error:", lines[0])
        self.assertIn(words, lines[0])

    def test_missing_file_is_rejected(self):
        run = run_plot(os.path.join(self.work, "nope.json"), "--out-dir", self.out)
        self.assert_rejected(run, "no such file")

    def test_malformed_json_is_rejected(self):
        path = os.path.join(self.work, "broken.json")
        with open(path, "w", encoding="utf-8") as stream:
            stream.write('{"context": {}, "benchmarks": [')
        self.assert_rejected(run_plot(path, "--out-dir", self.out), "not valid JSON")

    def test_json_that_is_not_a_result_is_rejected(self):
        path = write_json(os.path.join(self.work, "other.json"), {"hello": [1, 2, 3]})
        self.assert_rejected(run_plot(path, "--out-dir", self.out),
                             "not a vrambench/Google Benchmark result")

    def test_claims_file_is_rejected(self):
        path = write_json(os.path.join(self.work, "claims.json"), {"context": {}, "claims": []})
        self.assert_rejected(run_plot(path, "--out-dir", self.out), "claims file")

    def test_result_without_timelines_is_rejected(self):
        document = plot_fixture.sim_result(scenarios=["views"])
        for entry in document["benchmarks"]:
            entry.pop("timeline", None)
        path = write_json(os.path.join(self.work, "bare.json"), document)
        self.assert_rejected(run_plot(path, "--out-dir", self.out), "timeline")

    def test_malformed_timeline_is_rejected(self):
        document = plot_fixture.sim_result(scenarios=["views"])
        document["benchmarks"][0]["timeline"][1]["reserved"] = "lots"
        path = write_json(os.path.join(self.work, "bad.json"), document)
        self.assert_rejected(run_plot(path, "--out-dir", self.out), "reserved")

    def test_microbench_file_as_results_is_rejected(self):
        path = write_json(os.path.join(self.work, "micro.json"), plot_fixture.microbench_result())
        self.assert_rejected(run_plot(path, "--out-dir", self.out), "--microbench")

    def test_unknown_segments_entry_is_rejected(self):
        path = write_results(os.path.join(self.work, "sim.json"), scenarios=["views"])
        self.assert_rejected(run_plot(path, "--segments", "views/nope", "--out-dir", self.out),
                             "views/nope")

    def test_aggregate_entries_are_not_plotted_as_runs(self):
        # plot_fixture gives views two repetitions and so views/cuda_mean
        # etc. aggregates; asking for one's segment map must find no entry.
        path = write_results(os.path.join(self.work, "sim.json"), scenarios=["views"])
        self.assert_rejected(run_plot(path, "--segments", "views/cuda_mean",
                                      "--out-dir", self.out), "no entry 'views/cuda_mean'")

    def test_bad_second_file_leaves_no_png(self):
        good = write_results(os.path.join(self.work, "sim.json"), scenarios=["views"])
        bad = write_json(os.path.join(self.work, "bad.json"), [])
        run = run_plot(good, bad, "--out-dir", self.out)
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertFalse(os.path.exists(self.out) and pngs_in(self.out))


if __name__ == "__main__":
    unittest.main()
