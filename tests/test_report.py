"""`vrambench report`: one self-contained HTML page. It loads nothing from
the network, escapes every text from the files (a name in a results file
cannot add markup or script: tested with injected HTML), shows the expected
sections and cases, and, opened in a real headless Chromium, renders with
no script or console error and its tables made sortable. Bad input is one
line and no page."""

import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from cli_support import CLAIMS, MICROBENCH, ROOT, load, vrambench

INJECTED = '<script>alert(1)</script><img src=x onerror="alert(2)">'
CHROMIUM = shutil.which("chromium")
# Chromium's own chatter on a machine without D-Bus or a GPU is no page error.
HARMLESS = re.compile(r"dbus|bus\.cc|gpu|GPU|vaapi|sandbox|Fontconfig|crashpad|policy|gcm|ALSA|pulse|"
                      r"extension|component|viz|shared_image|ozone|udev|inotify", re.I)


class ReportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.run_file = cls.path("run.json")
        status, _, err = vrambench("run", "--scenario", "views,function_scope", "--allocator", "cuda,caching,bfc",
                                   "--device", "sim", "--min-time", "0", "--quiet", "--out", cls.run_file)
        assert status == 0, err
        trace = cls.path("t.trace")
        with open(trace, "w") as stream:
            stream.write("vbtrace 1\na 1 31457280\na 2 31457280\nf 1\nf 2\n")
        cls.tune_file = cls.path("tune.json")
        status, _, err = vrambench("tune", trace, "--quiet", "--jobs", "2", "--out", cls.tune_file)
        assert status == 0, err
        document = load(cls.run_file)
        evil = copy.deepcopy(document)
        for entry in evil["benchmarks"]:  # each case stays one (a file holding one twice is refused)
            entry["scenario"] = INJECTED + entry["scenario"]
            entry["name"] = entry["scenario"] + "/" + entry["allocator"]
        evil["context"]["device_name"] = '"><b id="injected">x</b>'
        evil["context"]["host_name"] = INJECTED
        cls.evil_file = cls.path("evil.json")
        with open(cls.evil_file, "w") as stream:
            json.dump(evil, stream)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.tmp.name, name)

    def report(self, *files, plots=False):
        page = self.path("report.html")
        if os.path.exists(page):
            os.unlink(page)
        status, _, err = vrambench("report", *files, "-o", page, *([] if plots else ["--no-plots"]))
        self.assertEqual(status, 0, err)
        with open(page, encoding="utf-8") as stream:
            return page, stream.read()

    def test_sections_and_cases(self):
        _, html = self.report(self.run_file, CLAIMS, MICROBENCH, self.tune_file)
        for text in ("Environment", "Run: run.json", "Claims: claims-nvidia", "Microbench: microbench-nvidia",
                     "Tune: tune.json", "Recommendation", "PYTORCH_CUDA_ALLOC_CONF", "function_scope",
                     "NVIDIA H100 80GB HBM3", "simulated device", "does not hold", "overhead",
                     "Plots: left out (--no-plots)."):
            self.assertIn(text, html)
        self.assertEqual(html.count('<table class="sortable">'), 6)

    def test_nothing_from_the_network(self):
        _, html = self.report(self.run_file, self.tune_file, plots=True)
        self.assertNotRegex(html, r'(src|href)\s*=\s*"(?!data:)')
        self.assertNotIn("url(", html)
        self.assertNotRegex(html, r"https?://")
        self.assertIn("default-src 'none'", html)
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.assertIn("Plots: not included: matplotlib", html)
        else:
            self.assertIn('src="data:image/png;base64,', html)

    def test_text_from_files_is_escaped(self):
        _, html = self.report(self.evil_file)
        self.assertNotIn("<script>alert", html)
        self.assertNotIn("<img src=x", html)
        self.assertNotIn('<b id="injected">', html)
        self.assertIn("&lt;script&gt;alert(1)&lt;/script&gt;", html)
        self.assertEqual(html.count("<script>"), 1)  # the page's own

    @unittest.skipUnless(CHROMIUM, "no chromium (make test installs it as root: build-aux/ensure-deps.sh browser)")
    def test_renders_in_a_browser(self):
        page, _ = self.report(self.run_file, CLAIMS, self.tune_file, self.evil_file)
        profile = tempfile.mkdtemp(prefix="vb-chromium-")
        try:
            completed = subprocess.run(
                [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--enable-logging=stderr", "--v=0", f"--user-data-dir={profile}",
                 "--dump-dom", "file://" + page], capture_output=True, text=True, timeout=120)
        finally:
            shutil.rmtree(profile, ignore_errors=True)
        self.assertEqual(completed.returncode, 0, completed.stderr[-2000:])
        dom = completed.stdout
        ready = re.search(r'data-ready="(\d+)"', dom)
        self.assertIsNotNone(ready, "the page's script did not run to its end")
        self.assertEqual(int(ready.group(1)), dom.count('<table class="sortable">'))
        self.assertRegex(dom, r'<pre id="js-errors"></pre>')
        for case in ("views", "function_scope", "caching", "bfc", "release_specific", "Recommendation"):
            self.assertIn(case, dom)
        # The injected markup is text in the DOM, never an element.
        self.assertFalse('<b id="injected"' in dom, "an injected element is in the DOM")
        self.assertFalse(re.search(r"<img[^>]*src=\"?x", dom), "an injected image is in the DOM")
        self.assertEqual(dom.count("<script"), 1)
        console = [line for line in completed.stderr.splitlines()
                   if ("CONSOLE" in line or "Uncaught" in line or "Refused" in line) and not HARMLESS.search(line)]
        self.assertEqual(console, [], "\n".join(console))

    def test_bad_input_is_one_line_and_no_page(self):
        truncated = self.path("truncated.json")
        with open(self.run_file) as stream, open(truncated, "w") as out:
            out.write(stream.read()[:300])
        page = self.path("never.html")
        for files, words in (((self.path("missing.json"),), "missing.json"), ((truncated,), "not valid JSON"),
                             ((self.run_file, "--bogus"), "--bogus"), ((), "name the files")):
            with self.subTest(files=files):
                status, out, err = vrambench("report", *files, "-o", page)
                self.assertEqual(status, 2, err)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertIn(words, err)
                self.assertFalse(os.path.exists(page))
        status, _, err = vrambench("report", self.run_file, "-o", self.tmp.name)
        self.assertEqual(status, 2, err)

    def test_a_file_read_through_a_copy_is_named_as_given_and_its_own_text_is_kept(self):
        """`vrambench report` reads a pipe or FIFO into a copy and hands the
        copy to the page's module with --named COPY=NAME: an error names the
        user's file, and text of the file that happens to be the copy's path
        (here a case's name) stays as it is."""
        copied = self.path("copy-of-a-fifo.json")
        document = load(self.run_file)
        case = dict(document["benchmarks"][0], name=copied, scenario=copied)
        document["benchmarks"] = [case, dict(case)]  # the same case twice: refused, naming the case
        with open(copied, "w") as stream:
            json.dump(document, stream)
        page = self.path("never.html")
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        result = subprocess.run([sys.executable, "-m", "vrambench.report", copied, f"--named={copied}=the-fifo",
                                 "--out", page], capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
        self.assertTrue(result.stderr.startswith("vrambench: error: the-fifo: benchmarks[0] and benchmarks[1] "
                                                 f"are the same case, '{copied}'"), result.stderr)
        self.assertFalse(os.path.exists(page))

    def test_a_python_that_fails_silently_or_a_folder_without_the_package_is_one_line_and_no_page(self):
        page = self.path("never.html")
        # /bin/true: a "Python" that ends with success and writes nothing, which left an empty page (exit 0)
        for variable, value, words in (("VB_PYTHON", "/bin/false", "exit status 1"),
                                       ("VB_PYTHON", "/bin/true", "wrote no page"),
                                       ("VB_PYTHON_DIR", self.tmp.name, "holds no vrambench/")):
            with self.subTest(variable=variable):
                status, _, err = vrambench("report", self.run_file, "-o", page, "--no-plots",
                                           env=dict(os.environ, **{variable: value}))
                self.assertNotEqual(status, 0, err)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertIn(words, err)
                self.assertTrue(err.startswith("vrambench: error: "), err)
                self.assertFalse(os.path.exists(page))

    def test_a_tune_where_nothing_fits_says_no_recommendation_and_why(self):
        # The page said "Recommendation: PYTORCH_CUDA_ALLOC_CONF=''" above the reason nothing fits.
        tune = load(self.tune_file)
        tune["recommendation"].update(fits=False, why="nothing fits: its largest allocation alone is 32 TiB")
        path = self.path("nothing-fits.json")
        with open(path, "w") as stream:
            json.dump(tune, stream)
        _, html = self.report(path)
        self.assertIn("No recommendation: nothing fits: its largest allocation alone is 32 TiB", html)
        self.assertNotIn("Recommendation: <code>", html)

    def test_a_figure_of_the_wrong_type_is_one_line_naming_the_field_and_no_page(self):
        # What compare refuses, report refuses too (docs/results-json.md, "Readers"):
        # a byte count that is a word or a fraction, a count that is a flag.
        page = self.path("never.html")
        for key, value, words in (("peak_reserved_bytes", "big", "is a string, not a number (a byte count)"),
                                  ("peak_requested_bytes", 1.5, "is 1.5, not a whole number (a byte count)"),
                                  ("ooms", True, "is true or false, not a number (a count)")):
            document = load(self.run_file)
            document["benchmarks"][0][key] = value
            path = self.path("field.json")
            with open(path, "w") as stream:
                json.dump(document, stream)
            with self.subTest(key=key, value=value):
                status, out, err = vrambench("report", path, "-o", page, "--no-plots")
                self.assertEqual(status, 2, err)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertIn(f"field.json: benchmarks[0] ({document['benchmarks'][0]['name']}): '{key}' {words}", err)
                self.assertFalse(os.path.exists(page))

    def test_files_of_the_wrong_shape_inside_are_one_line_and_no_page(self):
        # JSON that parses but that the page could not be made from: a lone
        # UTF-16 surrogate (no UTF-8 text holds it), benchmarks that is not
        # a list, a tune's figure that is not a number.
        with open(self.run_file) as stream:
            run_text = stream.read()
        tune = load(self.tune_file)
        cases = [("surrogate.json", run_text.replace('"views"', '"vi\\ud800ews"', 1), "surrogate"),
                 ("number.json", json.dumps({"context": {}, "benchmarks": 18446744073709551616}), "benchmarks"),
                 ("object.json", json.dumps({"context": {}, "benchmarks": {"a": 1}}), "benchmarks")]
        for key, value in (("peak_reserved_bytes", ""), ("ooms_at_capacity", [1]), ("utilization", "0.5"),
                           ("min_capacity_bytes", {"b": 1})):
            document = copy.deepcopy(tune)
            document["benchmarks"][0][key] = value
            cases.append((f"tune-{key}.json", json.dumps(document), key))
        document = copy.deepcopy(tune)
        document["recommendation"]["saving"] = {"peak_reserved_bytes": "lots"}
        cases.append(("tune-saving.json", json.dumps(document), "saving"))
        # Each made a page, exit 0: of no case (empty tables), of a
        # recommendation with nothing in it ("PYTORCH_CUDA_ALLOC_CONF=''",
        # blank figures) or a minimum below 0.
        empty = load(self.run_file)
        empty["benchmarks"] = []
        cases.append(("no-case.json", json.dumps(empty), "holds no case"))
        document = copy.deepcopy(tune)
        document["recommendation"] = {}
        cases.append(("tune-recommendation-empty.json", json.dumps(document), "'fits' is not true or false"))
        document = copy.deepcopy(tune)
        del document["recommendation"]["why"]
        cases.append(("tune-no-why.json", json.dumps(document), "no 'why' text"))
        document = copy.deepcopy(tune)
        document["recommendation"]["min_capacity_bytes"] = -5
        cases.append(("tune-negative.json", json.dumps(document), "'min_capacity_bytes' is negative"))
        page = self.path("never.html")
        for name, text, words in cases:
            with self.subTest(name):
                with open(self.path(name), "w") as stream:
                    stream.write(text)
                status, out, err = vrambench("report", self.path(name), "-o", page, "--no-plots")
                self.assertEqual(status, 2, err)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertIn(words, err)
                self.assertFalse(os.path.exists(page))


if __name__ == "__main__":
    unittest.main()
