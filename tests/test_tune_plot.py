"""python/vrambench/plots/tune.py: the figure of a `vrambench tune` result (needs matplotlib;
skipped without it). Run by `make test` (VRAMBENCH names the binary)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VRAMBENCH = os.path.abspath(os.environ.get("VRAMBENCH", "build/vrambench"))
SCRIPT = os.path.join(REPO, "python", "vrambench", "plots", "tune.py")

try:
    import matplotlib  # noqa: F401  (only whether it is there)
    HAVE_MATPLOTLIB = True
except ImportError:
    HAVE_MATPLOTLIB = False


@unittest.skipUnless(HAVE_MATPLOTLIB, "matplotlib is not installed for this python")
class TunePlot(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.dir = self.directory.name

    def tearDown(self):
        self.directory.cleanup()

    def test_a_tune_result_becomes_a_png_with_every_candidate(self):
        trace = os.path.join(self.dir, "r.trace")
        subprocess.run([VRAMBENCH, "gen-trace", "random", "--seed", "2", "--events", "1000", "--max-size", "32M",
                        "--max-live", "300M", "-o", trace], check=True, capture_output=True)
        result = os.path.join(self.dir, "tune.json")
        subprocess.run([VRAMBENCH, "tune", trace, "--quiet", "--out", result], check=True, capture_output=True)
        sys.path.insert(0, os.path.dirname(SCRIPT))
        import tune  # python/vrambench/plots/tune.py

        with open(result) as file:
            document = json.load(file)
        fig = tune.figure(document)
        points = sum(len(collection.get_offsets()) for collection in fig.axes[0].collections)
        self.assertEqual(points, len(document["benchmarks"]))
        png = os.path.join(self.dir, "tune.png")
        done = subprocess.run([sys.executable, SCRIPT, result, "--out", png], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(png, "rb") as file:
            self.assertEqual(file.read(8), b"\x89PNG\r\n\x1a\n")

    def test_a_file_that_is_not_a_tune_result_is_one_error_line(self):
        bad = os.path.join(self.dir, "bad.json")
        with open(bad, "w") as file:
            json.dump({"context": {}, "benchmarks": []}, file)
        done = subprocess.run([sys.executable, SCRIPT, bad, "--out", os.path.join(self.dir, "x.png")],
                              capture_output=True, text=True)
        self.assertEqual(done.returncode, 2)
        self.assertEqual(len(done.stderr.strip().splitlines()), 1, done.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "x.png")))


if __name__ == "__main__":
    unittest.main()
