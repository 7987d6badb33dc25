"""Malformed input to python/vrambench/plots, table-driven, and devices that must not
mix. Every bad input is one line on stderr, exit status 2, no traceback and
no PNG left behind. Most cases run in-process (plots.cli.main, fast); a
sample runs as a subprocess to see the whole process's behaviour. They need
no matplotlib: the input is checked before it is imported.
"""

import contextlib
import copy
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zlib

import plot_fixture

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))

from vrambench.plots import cli
from vrambench import results  # noqa: E402

PLOT_SCRIPT = os.path.join(REPO, "python", "vrambench", "plots", "__main__.py")

try:
    import matplotlib  # noqa: F401
    HAVE_MATPLOTLIB = True
except ImportError:
    HAVE_MATPLOTLIB = False


def good():
    """A small valid results document (views and dataloader_batches)."""
    return plot_fixture.sim_result(scenarios=["views", "dataloader_batches"])


def with_change(change):
    """good() with change(document) applied."""
    document = good()
    change(document)
    return document


def first_timeline(document):
    return document["benchmarks"][0]["timeline"]


def first_segment(document):
    for entry in document["benchmarks"]:
        if entry.get("segments_at_peak"):
            return entry["segments_at_peak"][0]
    raise AssertionError("the fixture has no segment map")


def set_in(getter, key, value):
    """A change that sets getter(document)[key] = value."""
    def change(document):
        getter(document)[key] = value
    return change


def delete_in(getter, key):
    def change(document):
        del getter(document)[key]
    return change


def entry0(document):
    return document["benchmarks"][0]


def point0(document):
    return first_timeline(document)[0]


def families(document):
    return document["names"]["dataloader_batches"]["counter_families"]


def deep(depth, opener="[", closer="]"):
    return opener * depth + closer * depth


def gzip_bomb(inflated_bytes):
    """A gzip member of `inflated_bytes` zeros: a few hundred KiB on disk."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(1 << 20)
    parts = [packer.compress(zeros) for _ in range(inflated_bytes >> 20)]
    return b"".join(parts) + packer.flush()


GZIPPED = gzip.compress(json.dumps(good()).encode())

# (what, file content as str/bytes, or a document change, words the error must contain)
RAW_CASES = [
    ("empty file", "", "not valid JSON"),
    ("plain text", "hello", "not valid JSON"),
    ("truncated object", '{"context": {}, "benchmarks": [', "not valid JSON"),
    ("binary bytes", b"\x89PNG\r\n\x1a\n\x00\x00", "not UTF-8"),
    ("latin-1 text", '{"context": {"device_name": "caf\xe9"}}'.encode("latin-1"), "not UTF-8"),
    ("a pickle", b"\x80\x04\x95\x0c\x00\x00\x00\x00\x00\x00\x00}\x94.", "not UTF-8"),
    ("JSON list", "[]", "not a vrambench"),
    ("JSON list of results", json.dumps([good()]), "not a vrambench"),
    ("JSON string", '"results"', "not a vrambench"),
    ("JSON number", "42", "not a vrambench"),
    ("JSON null", "null", "not a vrambench"),
    ("JSON true", "true", "not a vrambench"),
    ("deeply nested list", deep(200000), "nested too deeply"),
    ("deeply nested objects", '{"a":' * 100000 + "1" + "}" * 100000, "nested too deeply"),
    ("deep nesting in an entry", json.dumps(good())[:-1] + ', "x": ' + deep(100000) + "}",
     "nested too deeply"),
    ("NaN literal", '{"context": {}, "benchmarks": [], "x": NaN}', "NaN"),
    ("Infinity literal", '{"context": {}, "benchmarks": [], "x": Infinity}', "Infinity"),
    ("-Infinity literal", '{"context": {}, "benchmarks": [], "x": -Infinity}', "Infinity"),
    ("number of 100000 digits", json.dumps(good())[:-1] + ', "x": ' + "9" * 100000 + "}",
     "not valid JSON"),
    ("duplicate-free garbage after JSON", json.dumps(good()) + " trailing", "not valid JSON"),
    ("gzip cut short", GZIPPED[:-12], "not a valid gzip file (cut short)"),
    ("gzip damaged", GZIPPED[:10] + bytes(b ^ 0xFF for b in GZIPPED[10:20]) + GZIPPED[20:],
     "not a valid gzip file (damaged"),
    ("gzip of JSON then garbage", GZIPPED + b"\x1f\x8b garbage", "not a valid gzip file"),
    ("gzip inflating past 256 MiB", gzip_bomb((256 << 20) + (1 << 20)), "inflates to more than 256 MiB"),
]

DOCUMENT_CASES = [
    # context
    ("context a list", set_in(lambda d: d, "context", []), "context"),
    ("context missing", delete_in(lambda d: d, "context"), "context"),
    ("device_name a number", set_in(lambda d: d["context"], "device_name", 5), "device_name"),
    ("device_name with a newline", set_in(lambda d: d["context"], "device_name", "a\nb"),
     "control character"),
    ("device_name of 100000 characters", set_in(lambda d: d["context"], "device_name", "x" * 100000),
     "longer than"),
    ("simulated a string", set_in(lambda d: d["context"], "simulated", "yes"), "simulated"),
    ("date a number", set_in(lambda d: d["context"], "date", 20250101), "date"),
    ("git_commit a list", set_in(lambda d: d["context"], "git_commit", ["x"]), "git_commit"),
    # benchmarks and entries
    ("benchmarks an object", set_in(lambda d: d, "benchmarks", {}), "benchmarks"),
    ("benchmarks missing", delete_in(lambda d: d, "benchmarks"), "benchmarks"),
    ("entry a number", lambda d: d["benchmarks"].insert(0, 7), "benchmarks[0]"),
    ("entry a list", lambda d: d["benchmarks"].insert(0, []), "benchmarks[0]"),
    ("entry without a name", delete_in(entry0, "name"), "name"),
    ("entry name a number", set_in(entry0, "name", 12), "name"),
    ("entry name null", set_in(entry0, "name", None), "name"),
    ("entry name with NUL", set_in(entry0, "name", "views\x00/cuda"), "control character"),
    ("entry name of 5000 characters", set_in(entry0, "name", "v" * 5000), "longer than"),
    ("run_type a number", set_in(entry0, "run_type", 1), "run_type"),
    ("scenario a number", set_in(entry0, "scenario", 5), "scenario"),
    ("allocator null", set_in(entry0, "allocator", None), "allocator"),
    ("repetition_index negative", set_in(entry0, "repetition_index", -1), "repetition_index"),
    ("repetition_index a string", set_in(entry0, "repetition_index", "0"), "repetition_index"),
    ("repetition_index a float", set_in(entry0, "repetition_index", 1.5), "repetition_index"),
    ("repetition_index huge", set_in(entry0, "repetition_index", 1 << 40), "repetition_index"),
    ("repetition_index true", set_in(entry0, "repetition_index", True), "repetition_index"),
    ("time_unit unknown", set_in(entry0, "time_unit", "weeks"), "time_unit"),
    ("time_unit a number", set_in(entry0, "time_unit", 3), "time_unit"),
    ("counter 1e30", set_in(entry0, "peak_reserved_bytes", 1e30), "peak_reserved_bytes"),
    ("counter -1e30", set_in(entry0, "overhead_ratio", -1e30), "overhead_ratio"),
    ("counter 2^70 integer", set_in(entry0, "peak_requested_bytes", 1 << 70), "peak_requested_bytes"),
    ("counter 10^400 integer", set_in(entry0, "driver_alloc_calls", 10 ** 400), "driver_alloc_calls"),
    ("real_time 1e300 huge", set_in(entry0, "real_time", 1e300), "real_time"),
    ("counter negative", set_in(entry0, "peak_reserved_bytes", -5), "negative"),
    ("counter -0.5", set_in(entry0, "overhead_ratio", -0.5), "negative"),
    ("real_time negative", set_in(entry0, "real_time", -1), "real_time"),
    ("counter the string NaN", set_in(entry0, "overhead_ratio", "NaN"), "not a number"),
    ("counter the string inf", set_in(entry0, "peak_reserved_bytes", "inf"), "not a number"),
    ("counter the string 12", set_in(entry0, "driver_alloc_calls", "12"), "not a number"),
    ("byte count a word", set_in(entry0, "peak_reserved_bytes", "big"), "'peak_reserved_bytes' is a string"),
    ("byte count fractional", set_in(entry0, "peak_requested_bytes", 1.5), "not a whole number (a byte count)"),
    ("count fractional", set_in(entry0, "driver_free_calls", 0.5), "not a whole number (a count)"),
    ("count true", set_in(entry0, "ooms", True), "'ooms' is true or false"),
    ("time a word", set_in(entry0, "cpu_time", "slow"), "'cpu_time' is a string"),
    ("ratio a list", set_in(entry0, "overhead_ratio", [1]), "'overhead_ratio' is a list"),
    ("scenario counter a word", set_in(entry0, "kernel_in_flight_at_dispatch", "two"), "is a string"),
    # timelines
    ("timeline an object", set_in(entry0, "timeline", {}), "timeline"),
    ("timeline a string", set_in(entry0, "timeline", "steps"), "timeline"),
    ("timeline point a number", lambda d: first_timeline(d).insert(0, 3), "timeline[0]"),
    ("timeline point without step", delete_in(point0, "step"), "step"),
    ("step a number", set_in(point0, "step", 5), "step"),
    ("step null", set_in(point0, "step", None), "step"),
    ("step with a tab", set_in(point0, "step", "a\tb"), "control character"),
    ("requested a string", set_in(point0, "requested", "lots"), "requested"),
    ("requested negative", set_in(point0, "requested", -1), "requested"),
    ("requested 2^65", set_in(point0, "requested", 1 << 65), "requested"),
    ("requested true", set_in(point0, "requested", True), "requested"),
    ("requested null", set_in(point0, "requested", None), "requested"),
    ("reserved missing", delete_in(point0, "reserved"), "reserved"),
    ("reserved a list", set_in(point0, "reserved", [1]), "reserved"),
    ("allocated a string", set_in(point0, "allocated", "x"), "allocated"),
    ("driver_used negative", set_in(point0, "driver_used", -5), "driver_used"),
    ("driver_used 1e25", set_in(point0, "driver_used", 1e25), "driver_used"),
    # segment maps
    ("segments an object", set_in(entry0, "segments_at_peak", {}), "segments_at_peak"),
    ("segment a number", lambda d: entry0(d).__setitem__("segments_at_peak", [1]), "segments_at_peak[0]"),
    ("segment without address", delete_in(first_segment, "address"), "address"),
    ("segment size negative", set_in(first_segment, "size", -1), "size"),
    ("segment address 2^70", set_in(first_segment, "address", 1 << 70), "address"),
    ("segment address a string", set_in(first_segment, "address", "0x10"), "address"),
    ("segment blocks an object", set_in(first_segment, "blocks", {}), "blocks"),
    ("block allocated a string", lambda d: first_segment(d)["blocks"][0].__setitem__("allocated", "yes"),
     "allocated"),
    ("block size a string", lambda d: first_segment(d)["blocks"][0].__setitem__("size", "1 MiB"),
     "blocks[0]"),
    ("block a number", lambda d: first_segment(d).__setitem__("blocks", [5]), "blocks[0]"),
    ("segment stream a string", set_in(first_segment, "stream", "s1"), "stream"),
    ("segment stream 2^40", set_in(first_segment, "stream", 1 << 40), "stream"),
    # names
    ("names a list", set_in(lambda d: d, "names", []), "names"),
    ("names entry a string", set_in(lambda d: d["names"], "views", "x"), "names"),
    ("names steps a list", set_in(lambda d: d["names"]["views"], "steps", ["x"]), "steps"),
    ("names counters an object", set_in(lambda d: d["names"]["views"], "counters", {}), "counters"),
    ("names step text a number", set_in(lambda d: d["names"]["views"]["steps"], "made", 3), "step"),
    ("names counter a number", lambda d: d["names"]["views"]["counters"].append(4), "counter"),
    ("counter_families a list", set_in(lambda d: d["names"]["dataloader_batches"],
                                       "counter_families", []), "counter_families"),
    ("family members an object", set_in(families, "members", {}), "members"),
    ("family member without parameter", lambda d: families(d)["members"][0].pop("parameter"),
     "parameter"),
    ("family member parameter a string", lambda d: families(d)["members"][0].__setitem__(
        "parameter", "32"), "parameter"),
    ("family member name a number", lambda d: families(d)["members"][0].__setitem__("name", 32),
     "member name"),
    ("families a list", set_in(families, "families", []), "families"),
    ("family counters a list", set_in(lambda d: families(d)["families"], "batch_ns", ["x"]),
     "batch_ns"),
    ("family counter name null", lambda d: families(d)["families"]["batch_ns"].__setitem__("32", None),
     "counter"),
    ("member_parameter a number", set_in(families, "member_parameter", 7), "member_parameter"),
    # not a run result
    ("no timelines", lambda d: [e.pop("timeline", None) for e in d["benchmarks"]], "timeline"),
    ("a claims file", lambda d: (d.clear(), d.update({"context": {}, "claims": []})), "claims file"),
]

MICROBENCH_CASES = [
    ("microbench name without size", lambda d: d["benchmarks"][0].update(
        name="microbench/cuda/abc", bytes=None), "microbench/ALLOCATOR/BYTES"),
    ("microbench bytes 0", lambda d: d["benchmarks"][0].update(bytes=0), "BYTES"),
    ("microbench bytes negative", lambda d: d["benchmarks"][0].update(bytes=-4096), "negative"),
    ("microbench bytes 2^70", lambda d: d["benchmarks"][0].update(bytes=1 << 70), "bytes"),
    ("microbench latency infinite", lambda d: d["benchmarks"][0].update(
        malloc_ns_p50=float("inf")), "Infinity"),
    ("microbench latency 1e300", lambda d: d["benchmarks"][0].update(
        malloc_ns_p50=1e300), "malloc_ns_p50"),
    ("microbench without entries", lambda d: d.update(benchmarks=[]), "microbench"),
    ("microbench of another device", lambda d: d["context"].update(
        device_name="NVIDIA H200", simulated=False), "never mix devices"),
]


def dump(document):
    """JSON text of a document that may hold inf (written as JSON can't)."""
    return json.dumps(document, allow_nan=True)


class MalformedInput(unittest.TestCase):
    """Each malformed file: exit 2, one error line, nothing written."""

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="vb-plot-inputs-")
        self.out = os.path.join(self.work, "out")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def write(self, name, content):
        path = os.path.join(self.work, name)
        with open(path, "wb") as stream:
            stream.write(content if isinstance(content, bytes) else content.encode("utf-8"))
        return path

    def run_main(self, *argv):
        """(exit status, stderr) of plots.cli.main in this process."""
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            try:
                status = cli.main([*argv, "--out-dir", self.out])
            except SystemExit as exit_:
                status = exit_.code
        return status, stderr.getvalue()

    def assert_rejected(self, status, stderr, words):
        self.assertEqual(status, 2, stderr)
        lines = stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, stderr)
        self.assertTrue(lines[0].startswith("vrambench.plots: error: "), lines[0])
        self.assertIn(words, lines[0])
        self.assertNotIn("Traceback", stderr)
        self.assertLess(len(lines[0]), 600)
        self.assertFalse(os.path.exists(self.out) and os.listdir(self.out), "output left behind")

    def test_raw_files(self):
        for what, content, words in RAW_CASES:
            with self.subTest(what):
                path = self.write("raw.json", content)
                self.assert_rejected(*self.run_main(path), words)

    def test_a_gzip_results_file_of_one_or_two_members_loads_as_the_plain_file(self):
        text = json.dumps(good()).encode()
        plain = results.load_result(self.write("plain.json", text))
        for what, content in (("one member", gzip.compress(text)),
                              ("two members", gzip.compress(text[:100]) + gzip.compress(text[100:]))):
            with self.subTest(what):
                loaded = results.load_result(self.write("packed.json.gz", content))
                self.assertEqual([(run.name, run.values) for run in loaded.runs],
                                 [(run.name, run.values) for run in plain.runs])

    def test_malformed_documents(self):
        for what, change, words in DOCUMENT_CASES:
            with self.subTest(what):
                document = good()
                change(document)
                path = self.write("bad.json", dump(document))
                self.assert_rejected(*self.run_main(path), words)

    def test_malformed_microbench_files(self):
        results_path = self.write("sim.json", dump(good()))
        for what, change, words in MICROBENCH_CASES:
            with self.subTest(what):
                document = plot_fixture.microbench_result()
                change(document)
                micro = self.write("micro.json", dump(document))
                self.assert_rejected(*self.run_main(results_path, "--microbench", micro), words)

    def test_a_bad_second_file_is_rejected_before_any_figure(self):
        first = self.write("a.json", dump(good()))
        for what, change, words in DOCUMENT_CASES[:20]:
            with self.subTest(what):
                second = self.write("b.json", dump(with_change(change)))
                self.assert_rejected(*self.run_main(first, second), words)

    def test_a_2_gb_file_is_refused_without_reading_it(self):
        path = os.path.join(self.work, "huge.json")
        with open(path, "wb") as stream:
            stream.write(b'{"context": {}, "benchmarks": [{"name": "x", "n": 1')
            stream.truncate(2 << 30)      # sparse: a 2 GB number string of zeros
        self.assert_rejected(*self.run_main(path), "larger than")

    def test_missing_files_and_folders(self):
        self.assert_rejected(*self.run_main(os.path.join(self.work, "nope.json")), "no such file")
        self.assert_rejected(*self.run_main(self.work), "is a directory")
        self.assert_rejected(*self.run_main("--latest", os.path.join(self.work, "nope")),
                             "no such directory")
        empty = os.path.join(self.work, "empty")
        os.mkdir(empty)
        self.assert_rejected(*self.run_main("--latest", empty), "no run results")

    @unittest.skipUnless(HAVE_MATPLOTLIB, f"matplotlib is not installed for {sys.executable}")
    def test_an_out_dir_that_is_a_regular_file_is_refused_as_not_a_directory(self):
        # makedirs said "File exists", which reads as if the folder were fine.
        path = self.write("sim.json", dump(good()))
        self.write("out", b"keep me")
        status, stderr = self.run_main(path)
        self.assertNotEqual(status, 0, stderr)
        self.assertEqual(len(stderr.strip().splitlines()), 1, stderr)
        self.assertIn(f"{self.out}: not a directory", stderr)
        with open(self.out, "rb") as stream:
            self.assertEqual(stream.read(), b"keep me")

    def test_unknown_segments_entry(self):
        path = self.write("sim.json", dump(good()))
        self.assert_rejected(*self.run_main(path, "--segments", "views/nope"), "views/nope")

    def test_a_misspelt_segments_entry_names_the_nearest(self):
        path = self.write("sim.json", dump(good()))
        status, stderr = self.run_main(path, "--segments", "views/cachng")
        self.assert_rejected(status, stderr, "did you mean views/caching?")

    def test_the_cases_are_many_and_varied(self):
        total = len(RAW_CASES) + len(DOCUMENT_CASES) + len(MICROBENCH_CASES)
        self.assertGreaterEqual(total, 80)

    def test_the_loader_raises_only_input_error(self):
        # The loader itself, on every document case: InputError, nothing else.
        for what, change, _ in DOCUMENT_CASES:
            with self.subTest(what):
                document = with_change(change)
                path = self.write("bad.json", dump(document))
                with self.assertRaises(results.InputError):
                    results.load_run_result(path)


class MalformedInputProcess(unittest.TestCase):
    """A sample of the cases as a whole process: exit 2, one line, no traceback."""

    def test_processes(self):
        work = tempfile.mkdtemp(prefix="vb-plot-inputs-")
        self.addCleanup(shutil.rmtree, work, True)
        out = os.path.join(work, "out")
        samples = [RAW_CASES[12], RAW_CASES[15], RAW_CASES[18], RAW_CASES[6], RAW_CASES[3]]
        for what, content, words in samples:
            with self.subTest(what):
                path = os.path.join(work, "bad.json")
                with open(path, "wb") as stream:
                    stream.write(content if isinstance(content, bytes) else content.encode())
                run = subprocess.run([sys.executable, PLOT_SCRIPT, path, "--out-dir", out],
                                     capture_output=True, text=True, timeout=120, check=False)
                self.assertEqual(run.returncode, 2, run.stderr)
                self.assertEqual(len(run.stderr.strip().splitlines()), 1, run.stderr)
                self.assertIn(words, run.stderr)
                self.assertFalse(os.path.exists(out) and os.listdir(out))


class PlotOptions(unittest.TestCase):
    """A bad option of any plot command is one line, exit 2, the nearest
    option offered for a misspelt one: no usage line first."""

    def test_a_bad_option_is_one_line_with_the_nearest_option(self):
        scripts = {"plots": PLOT_SCRIPT,
                   "tune": os.path.join(REPO, "python", "vrambench", "plots", "tune.py"),
                   "torch_ab": os.path.join(REPO, "python", "vrambench", "plots", "torch_ab.py")}
        cases = [("plots", ["x.json", "--segmnets", "a/b"], "did you mean --segments?"),
                 ("plots", [], "RESULTS.json files or --latest"),
                 ("tune", ["t.json", "--out", "o.png", "--ot", "p.png"], "did you mean --out?"),
                 ("torch_ab", ["t.json", "--bogus"], "unrecognized arguments: --bogus"),
                 # an option of one value given twice: the last one won, without a word
                 ("tune", ["t.json", "--out", "a.png", "--out", "b.png"], "--out given twice"),
                 ("plots", ["x.json", "--microbench", "none.json", "--microbench", "m.json"],
                  "--microbench given twice"),
                 ("plots", ["x.json", "--out-dir=a", "--out-dir", "b"], "--out-dir given twice"),
                 # a PNG was written under any name: x.svg, x.png.gz (not gzip'd)
                 ("tune", ["t.json", "--out", "x.svg"], "the picture is a PNG; name it FILE.png"),
                 ("tune", ["t.json", "--out", "x.png.gz"], "the picture is a PNG; name it FILE.png")]
        for script, args, words in cases:
            with self.subTest(script=script, args=args):
                run = subprocess.run([sys.executable, scripts[script], *args], capture_output=True, text=True,
                                     timeout=120, check=False)
                self.assertEqual(run.returncode, 2, run.stderr)
                self.assertEqual(len(run.stderr.strip().splitlines()), 1, run.stderr)
                self.assertIn(words, run.stderr)
                self.assertEqual(run.stdout, "")


# Values a mutation puts in place of one field of a good file.
ODD_VALUES = [0, -1, 1, 2 ** 63, 2 ** 64 - 1, 1e-300, 0.5, -0.0, "", "x", None, True, [], {}, 1e18,
              -1e18, 3.7, "$\\frac{1}{0}$", "a" * 300]


def paths_of(value, path=()):
    """Every path into a document (the first 3 items of each list)."""
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths_of(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value[:3]):
            yield from paths_of(item, path + (index,))


@unittest.skipUnless(HAVE_MATPLOTLIB, f"matplotlib is not installed for {sys.executable}")
class MutatedInput(unittest.TestCase):
    """Good files with 1 to 3 fields replaced by odd values (a fixed seed):
    each is either drawn (exit 0) or refused (exit 2, one line), never a
    failure while drawing (exit 1) or a traceback."""

    def test_mutations(self):
        import random
        work = tempfile.mkdtemp(prefix="vb-plot-mutations-")
        self.addCleanup(shutil.rmtree, work, True)
        base = plot_fixture.sim_result(scenarios=["views", "dataloader_batches"], allocators=("cuda",))
        paths = [path for path in paths_of(base) if path]
        rng = random.Random(20261122)
        for trial in range(12):
            document = copy.deepcopy(base)
            for _ in range(rng.randint(1, 3)):
                path, target = rng.choice(paths), document
                try:
                    for key in path[:-1]:
                        target = target[key]
                    target[path[-1]] = rng.choice(ODD_VALUES)
                except (KeyError, IndexError, TypeError):
                    pass
            source = os.path.join(work, f"m{trial}.json")
            with open(source, "w", encoding="utf-8") as stream:
                json.dump(document, stream)
            stderr = io.StringIO()
            with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
                status = cli.main([source, "--out-dir", os.path.join(work, f"out{trial}")])
            with self.subTest(trial=trial):
                self.assertIn(status, (0, 2), stderr.getvalue())
                if status == 2:
                    self.assertEqual(len(stderr.getvalue().strip().splitlines()), 1, stderr.getvalue())


@unittest.skipUnless(HAVE_MATPLOTLIB, f"matplotlib is not installed for {sys.executable}")
class DevicesNeverMix(unittest.TestCase):
    """--latest picks a microbench file of the run's device, or none."""

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="vb-plot-devices-")
        self.folder = os.path.join(self.work, "results")
        os.mkdir(self.folder)
        self.out = os.path.join(self.work, "out")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def write(self, name, document):
        with open(os.path.join(self.folder, name), "w", encoding="utf-8") as stream:
            json.dump(document, stream)

    def latest(self):
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            status = cli.main(["--latest", self.folder, "--out-dir", self.out])
        return status, stderr.getvalue()

    def test_a_sim_run_is_not_paired_with_a_gpu_microbench_file(self):
        self.write("sim.json", plot_fixture.sim_result(scenarios=["views"],
                                                       date="2026-01-02T10:00:00+00:00"))
        self.write("microbench-h200.json", plot_fixture.microbench_result(
            device_name="NVIDIA H200", simulated=False, date="2026-01-03T10:00:00+00:00"))
        status, stderr = self.latest()
        self.assertEqual(status, 0, stderr)
        self.assertIn("no microbench file of simulated device", stderr)
        self.assertNotIn("with microbench", stderr)

    def test_the_newest_microbench_file_of_the_same_device_is_taken(self):
        self.write("gpu.json", plot_fixture.sim_result(
            scenarios=["views"], device_name="NVIDIA H200", simulated=False,
            date="2026-01-02T10:00:00+00:00"))
        self.write("microbench-h200.json", plot_fixture.microbench_result(
            device_name="NVIDIA H200", simulated=False, date="2026-01-01T10:00:00+00:00"))
        self.write("microbench-sim.json", plot_fixture.microbench_result(
            date="2026-01-05T10:00:00+00:00"))
        status, stderr = self.latest()
        self.assertEqual(status, 0, stderr)
        self.assertIn("with microbench " + os.path.join(self.folder, "microbench-h200.json"), stderr)



class NotesAreOneLine(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="vb-plot-notes-")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def test_a_newline_in_a_folder_name_is_still_one_note_line(self):
        # --latest's notes (no microbench file of the device in FOLDER,
        # plotting FILE) name the folder with its newline shown as '?'.
        folder = os.path.join(self.work, "res\nults")
        os.mkdir(folder)
        for name, document in (("sim.json", plot_fixture.sim_result(scenarios=["views"])),
                               ("microbench-h200.json", plot_fixture.microbench_result(
                                   device_name="NVIDIA H200", simulated=False))):
            with open(os.path.join(folder, name), "w", encoding="utf-8") as stream:
                json.dump(document, stream)
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            results.find_latest(folder)
        lines = stderr.getvalue().splitlines()
        self.assertEqual(len(lines), 2, stderr.getvalue())
        for line in lines:
            self.assertTrue(line.startswith(f"{results.PROG}: note: "), stderr.getvalue())
            self.assertIn("res?ults", line)
if __name__ == "__main__":
    unittest.main()
