"""Tests of python/vrambench/torch2trace.py (standard library only): small snapshot dicts
shaped like torch.cuda.memory._snapshot()'s are pickled, converted, and the
trace written is checked line by line."""

import collections
import contextlib
import gzip
import importlib.util
import io
import os
import pickle
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = importlib.util.spec_from_file_location("torch2trace", os.path.join(HERE, "..", "python", "vrambench", "torch2trace.py"))
torch2trace = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(torch2trace)

STREAM = 0x55AA00001000  # a side stream's cudaStream_t, as torch records it
MiB = 1 << 20


def entry(action, addr, size, stream=0, time_us=None, **extra):
    """One trace entry as the caching allocator records it."""
    result = {"action": action, "addr": addr, "size": size, "stream": stream, "frames": []}
    if time_us is not None:
        result["time_us"] = time_us
    result.update(extra)
    return result


def snapshot(*traces, annotations=None):
    """A snapshot dict with one trace per device."""
    result = {"segments": [], "device_traces": list(traces), "allocator_settings": {}}
    if annotations is not None:
        result["external_annotations"] = annotations
    return result


def alloc_free(addr, size, stream=0):
    """An allocation freed at once: alloc, free_requested, free_completed."""
    return [entry("alloc", addr, size, stream), entry("free_requested", addr, size, stream),
            entry("free_completed", addr, size, stream)]


class Conversion:
    """The result of running the converter's main() on a pickled snapshot."""

    def __init__(self, status, stderr, lines, out_path):
        self.status, self.stderr, self.lines, self.out_path = status, stderr, lines, out_path

    def events(self):
        """The trace's lines without the header and comments."""
        return [line for line in self.lines[1:] if not line.startswith("#")]


class Torch2TraceTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.addCleanup(self.directory.cleanup)

    def path(self, name):
        return os.path.join(self.directory.name, name)

    def convert(self, data, *options, out_name="out.trace", raw_pickle=None):
        """Pickles `data` (or writes `raw_pickle`), converts it, returns a Conversion."""
        snapshot_path = self.path("snapshot.pickle")
        with open(snapshot_path, "wb") as file:
            file.write(raw_pickle if raw_pickle is not None else pickle.dumps(data))
        out_path = self.path(out_name)
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            try:
                status = torch2trace.main([snapshot_path, out_path, *options])
            except SystemExit as exit:  # argparse's own errors
                status = exit.code
        lines = []
        if os.path.exists(out_path):
            opener = gzip.open if out_name.endswith(".gz") else open
            with opener(out_path, "rt") as file:
                lines = file.read().splitlines()
        return Conversion(status, stderr.getvalue(), lines, out_path)

    # ---- the command line ----

    def test_a_bad_option_is_one_line_with_the_nearest_option(self):
        cases = [(["--quite", "a.pickle", "b.trace"], "did you mean --quiet?"),
                 # a prefix is no option (argparse took it for --quiet, the C commands refuse one)
                 (["--qui", "a.pickle", "b.trace"], "did you mean --quiet?"),
                 (["--free", "free_requested", "a.pickle", "b.trace"], "unrecognized arguments: --free"),
                 ([], "required"),
                 (["a.pickle", "b.trace", "--device", "one"], "--device"),
                 (["a.pickle", "b.trace", "--free-at", "\x1b[31mnever"], "invalid choice"),
                 (["a.pickle", "b.trace", "c"], "unrecognized arguments")]
        for args, words in cases:
            with self.subTest(args=args):
                stderr = io.StringIO()
                with contextlib.redirect_stderr(stderr), self.assertRaises(SystemExit) as exit:
                    torch2trace.main(args)
                self.assertEqual(exit.exception.code, 2)
                self.assertEqual(len(stderr.getvalue().splitlines()), 1, stderr.getvalue())
                self.assertIn(words, stderr.getvalue())
                self.assertNotIn("\x1b[", stderr.getvalue().replace("\\x1b", ""))  # no raw escape
                self.assertEqual(os.listdir(self.directory.name), [])

    # ---- what is converted ----

    def test_header_is_vbtrace_version_1(self):
        result = self.convert(snapshot(alloc_free(0x1000, 512)))
        self.assertEqual(result.lines[0], "vbtrace 1")

    def test_alloc_and_free_completed_become_a_and_f_lines(self):
        result = self.convert(snapshot(alloc_free(0x1000, 512)))
        self.assertEqual(result.events(), ["a 0 512 0", "f 0 0"])

    def test_segment_actions_are_not_replayed(self):
        trace = [entry("segment_alloc", 0x1000, 2 * MiB), *alloc_free(0x1000, 512),
                 entry("segment_free", 0x1000, 2 * MiB), entry("segment_map", 0x9000, 2 * MiB),
                 entry("segment_unmap", 0x9000, 2 * MiB)]
        result = self.convert(snapshot(trace))
        self.assertEqual(result.events(), ["a 0 512 0", "f 0 0"])

    def test_free_completed_is_the_default_free_point(self):
        # b is requested free before c is allocated, but completes after:
        # freeing at free_completed, b is still live when c is allocated.
        trace = [entry("alloc", 0x1000, 100), entry("free_requested", 0x1000, 100),
                 entry("alloc", 0x2000, 200), entry("free_completed", 0x1000, 100),
                 entry("free_requested", 0x2000, 200), entry("free_completed", 0x2000, 200)]
        result = self.convert(snapshot(trace))
        self.assertEqual(result.events(), ["a 0 100 0", "a 1 200 0", "f 0 0", "f 1 0"])

    def test_free_requested_option_frees_at_the_request(self):
        trace = [entry("alloc", 0x1000, 100), entry("free_requested", 0x1000, 100),
                 entry("alloc", 0x2000, 200), entry("free_completed", 0x1000, 100),
                 entry("free_requested", 0x2000, 200), entry("free_completed", 0x2000, 200)]
        result = self.convert(snapshot(trace), "--free-at", "free_requested")
        self.assertEqual(result.events(), ["a 0 100 0", "f 0 0", "a 1 200 0", "f 1 0"])

    def test_free_requested_option_without_such_entries_is_an_error(self):
        trace = [entry("alloc", 0x1000, 100), entry("free_completed", 0x1000, 100)]
        result = self.convert(snapshot(trace), "--free-at", "free_requested")
        self.assertEqual(result.status, 2)
        self.assertIn("--free-at free_completed", result.stderr)

    def test_address_reused_after_free_is_a_new_id(self):
        result = self.convert(snapshot(alloc_free(0x1000, 512) + alloc_free(0x1000, 1024)))
        self.assertEqual(result.events(), ["a 0 512 0", "f 0 0", "a 1 1024 0", "f 1 0"])

    def test_default_stream_stays_zero_and_others_are_numbered(self):
        trace = alloc_free(0x1000, 512, STREAM) + alloc_free(0x2000, 512, 0) + alloc_free(0x3000, 512, STREAM + 1)
        result = self.convert(snapshot(trace))
        self.assertEqual([line.split()[-1] for line in result.events() if line.startswith("a")], ["1", "0", "2"])

    def test_oom_becomes_a_marker_and_the_failed_request(self):
        trace = [entry("alloc", 0x1000, 100), {"action": "oom", "size": 80 << 30, "device_free": 1 << 30,
                                                "stream": 0, "frames": []}]
        result = self.convert(snapshot(trace))
        self.assertEqual(result.events(), ["a 0 100 0", "m oom", f"o {80 << 30} 0"])
        self.assertIn("ran out of memory 1 time", result.stderr)

    def test_oom_on_a_side_stream_names_its_stream(self):
        trace = [entry("alloc", 0x1000, 100, STREAM), {"action": "oom", "size": 4096, "device_free": 0,
                                                       "stream": STREAM, "frames": []}]
        result = self.convert(snapshot(trace))
        self.assertEqual(result.events()[-1], "o 4096 1")

    def test_record_function_scopes_become_markers_in_time_order(self):
        trace = [entry("alloc", 0x1000, 100, time_us=10), entry("alloc", 0x2000, 100, time_us=30)]
        annotations = [{"name": "step 1", "stage": "START", "device": 0, "time_us": 20},
                       {"name": "step 1", "stage": "END", "device": 0, "time_us": 25},
                       {"name": "step 0", "stage": "START", "device": 0, "time_us": 5}]
        result = self.convert(snapshot(trace, annotations=annotations))
        self.assertEqual(result.events(), ["m step 0", "a 0 100 0", "m step 1", "a 1 100 0"])

    def test_marker_names_are_cut_to_63_bytes(self):
        annotations = [{"name": "x" * 100, "stage": "START", "device": 0, "time_us": 1}]
        result = self.convert(snapshot([entry("alloc", 0x1000, 100, time_us=2)], annotations=annotations))
        self.assertEqual(result.events()[0], "m " + "x" * 63)

    def test_device_option_picks_that_devices_trace(self):
        result = self.convert(snapshot(alloc_free(0x1000, 1), alloc_free(0x2000, 2)), "--device", "1")
        self.assertEqual(result.events()[0], "a 0 2 0")

    def test_gz_output_is_gzip(self):
        result = self.convert(snapshot(alloc_free(0x1000, 512)), out_name="out.trace.gz")
        with open(result.out_path, "rb") as file:
            self.assertEqual(file.read(2), b"\x1f\x8b")
        self.assertEqual(result.events(), ["a 0 512 0", "f 0 0"])

    # ---- what is reported ----

    def test_live_at_end_is_reported_with_count_and_bytes(self):
        trace = [entry("alloc", 0x1000, 300), entry("alloc", 0x2000, 700), entry("free_completed", 0x1000, 300)]
        result = self.convert(snapshot(trace))
        self.assertEqual(result.status, 0)
        self.assertIn("1 allocations (700 bytes) are still live", result.stderr)

    def test_the_summary_names_the_file_written_or_the_snapshot_converted(self):
        # To a file: "wrote OUT"; to stdout, as tune and explain read it:
        # "converted SNAPSHOT" (under --name), never "wrote stdout".
        data = snapshot([entry("alloc", 0x1000, 300), entry("alloc", 0x2000, 700),
                         entry("free_completed", 0x1000, 300)])
        result = self.convert(data)
        self.assertEqual(result.status, 0, result.stderr)
        self.assertTrue(result.stderr.startswith(f"torch2trace: wrote {result.out_path}: 2 allocations, 1 frees"),
                        result.stderr)
        stdout, stderr = io.TextIOWrapper(io.BytesIO()), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            status = torch2trace.main([self.path("snapshot.pickle"), "-", "--name", "job.pickle"])
        self.assertEqual(status, 0, stderr.getvalue())
        self.assertTrue(stderr.getvalue().startswith("torch2trace: converted job.pickle: 2 allocations, 1 frees"),
                        stderr.getvalue())
        self.assertNotIn("stdout", stderr.getvalue())
        stdout.flush()
        self.assertTrue(stdout.buffer.getvalue().startswith(b"vbtrace 1\n"))

    def test_live_at_end_stays_live_in_the_trace(self):
        trace = [entry("alloc", 0x1000, 300), entry("alloc", 0x2000, 700), entry("free_completed", 0x1000, 300)]
        result = self.convert(snapshot(trace))
        self.assertEqual(result.events(), ["a 0 300 0", "a 1 700 0", "f 0 0"])

    def test_free_of_allocation_before_recording_is_skipped_and_reported(self):
        trace = [entry("free_completed", 0x5000, 64), *alloc_free(0x1000, 512)]
        result = self.convert(snapshot(trace))
        self.assertEqual(result.events(), ["a 0 512 0", "f 0 0"])
        self.assertIn("skipped 1 frees", result.stderr)

    def test_unknown_action_is_ignored_with_a_warning(self):
        result = self.convert(snapshot([{"action": "teleport", "addr": 1, "size": 1}] + alloc_free(0x1000, 8)))
        self.assertEqual(result.status, 0)
        self.assertIn("unknown action 'teleport'", result.stderr)

    # ---- bad input ----

    def test_empty_trace_tells_how_to_record(self):
        result = self.convert(snapshot([]))
        self.assertEqual(result.status, 2)
        self.assertIn("torch.cuda.memory._record_memory_history(", result.stderr)

    def test_empty_trace_writes_no_file(self):
        result = self.convert(snapshot([]))
        self.assertFalse(os.path.exists(result.out_path))

    def test_device_without_entries_names_the_ones_that_have_some(self):
        result = self.convert(snapshot([], alloc_free(0x1000, 1)))
        self.assertEqual(result.status, 2)
        self.assertIn("device(s) 1", result.stderr)

    def test_pickle_with_objects_is_refused_without_running_them(self):
        raw = pickle.dumps(collections.OrderedDict(device_traces=[alloc_free(0x1000, 1)]))
        result = self.convert(None, raw_pickle=raw)
        self.assertEqual(result.status, 2)
        self.assertIn("collections.OrderedDict", result.stderr)

    def test_a_gzip_compressed_snapshot_converts_as_the_snapshot_does(self):
        data = snapshot(alloc_free(0x1000, 512) + [entry("alloc", 0x4000, 3 * MiB, STREAM)])
        plain = self.convert(data)
        self.assertEqual(plain.status, 0, plain.stderr)
        raw = pickle.dumps(data)
        # gunzip writes every member of a file, one after the other
        for name, raw in (("one member", gzip.compress(raw)),
                          ("two members", gzip.compress(raw[:40]) + gzip.compress(raw[40:]))):
            with self.subTest(name):
                compressed = self.convert(None, raw_pickle=raw)
                self.assertEqual(compressed.status, 0, compressed.stderr)
                self.assertEqual(compressed.lines, plain.lines)

    def test_a_gzip_that_inflates_past_the_limit_or_is_damaged_is_refused_in_one_line(self):
        bomb = gzip.compress(b"\0" * (4 * MiB))  # a few KiB that inflate to 4 MiB
        packed = gzip.compress(pickle.dumps(snapshot(alloc_free(0x1000, 512))))
        cases = {"inflates past $VB_SPOOL_LIMIT": (bomb, "inflates to more than 1 MiB ($VB_SPOOL_LIMIT): not a memory snapshot"),
                 "cut short": (packed[:-12], "not a valid gzip file (cut short)"),
                 "damaged": (packed[:10] + bytes(b ^ 0xFF for b in packed[10:20]) + packed[20:], "not a valid gzip file (damaged")}
        saved = os.environ.get("VB_SPOOL_LIMIT")
        os.environ["VB_SPOOL_LIMIT"] = "1MiB"
        try:
            for name, (raw, words) in cases.items():
                with self.subTest(name):
                    result = self.convert(None, raw_pickle=raw)
                    self.assertEqual(result.status, 2, result.stderr)
                    self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
                    self.assertIn(words, result.stderr)
                    self.assertFalse(os.path.exists(result.out_path))
        finally:
            if saved is None:
                del os.environ["VB_SPOOL_LIMIT"]
            else:
                os.environ["VB_SPOOL_LIMIT"] = saved

    def test_the_spool_limit_bounds_a_pipe_not_a_regular_file_and_a_refusal_names_the_snapshot(self):
        # A regular file past $VB_SPOOL_LIMIT was refused as "cannot read -"
        # when vrambench handed it over on stdin; docs/cli.md bounds only
        # what is read once from a pipe or a device.
        raw = pickle.dumps(snapshot(alloc_free(0x1000, 512)))
        path = self.path("regular.pickle")
        with open(path, "wb") as file:
            file.write(raw)
        tool = os.path.join(HERE, "..", "python", "vrambench", "torch2trace.py")
        environment = dict(os.environ, VB_SPOOL_LIMIT="16")
        with open(path, "rb") as stdin:
            done = subprocess.run([sys.executable, tool, "-", self.path("a.trace"), "--name=regular.pickle"],
                                  stdin=stdin, capture_output=True, text=True, env=environment, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        done = subprocess.run([sys.executable, tool, "-", self.path("b.trace"), "--name=piped.pickle"], input=raw,
                              capture_output=True, env=environment, timeout=60)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn(b"cannot read piped.pickle: larger than 16 bytes", done.stderr)

    def test_not_a_snapshot_is_an_error(self):
        result = self.convert([1, 2, 3])
        self.assertEqual(result.status, 2)
        self.assertIn("device_traces", result.stderr)

    def test_not_a_pickle_is_an_error(self):
        result = self.convert(None, raw_pickle=b"vbtrace 1\na 0 1\n")
        self.assertEqual(result.status, 2)
        self.assertIn("not a memory snapshot", result.stderr)

    def test_missing_snapshot_is_an_error(self):
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            status = torch2trace.main([self.path("absent.pickle"), self.path("out.trace")])
        self.assertEqual(status, 2)
        self.assertIn("cannot read", stderr.getvalue())

    def test_alloc_without_size_is_an_error(self):
        result = self.convert(snapshot([{"action": "alloc", "addr": 0x1000}]))
        self.assertEqual(result.status, 2)
        self.assertIn("trace entry 0", result.stderr)

    # ---- malformed input: one line, exit 2, no file (temporary or not) ----

    def assert_refused(self, result, why=None):
        self.assertEqual(result.status, 2, result.stderr)
        self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
        self.assertTrue(result.stderr.startswith("torch2trace: error: "), result.stderr)
        if why:
            self.assertIn(why, result.stderr)
        self.assertEqual(sorted(os.listdir(self.directory.name)), ["snapshot.pickle"])

    def test_malformed_pickles_are_refused_in_one_line(self):
        deep = b"\x80\x04" + b"]" * 200000 + b"a" * 199999 + b"."  # a list nested 200000 deep
        cases = {
            "empty": b"",
            "one byte": b"\x80",
            "asks for 2^62 bytes": b"\x80\x04\x8e" + (1 << 62).to_bytes(8, "little") + b".",
            "huge string length": b"\x80\x04\x8d" + (1 << 63).to_bytes(8, "little") + b".",
            "stack underflow": b"\x80\x04s.",
            "bad opcode": b"\x80\x04\xff.",
            "no stop": pickle.dumps({"device_traces": []})[:-1],
            "deep nesting": deep,
            "deep nesting in the traces": pickle.dumps({"device_traces": [[1]]}, protocol=2).replace(
                b"K\x01", b"]" * 50000 + b"a" * 49999),
            "memo out of range": b"\x80\x04h\x05.",
            "text": b"hello world\n",
            # the unpickler stops at the first STOP: the rest was dropped silently
            "two snapshots in one file": pickle.dumps(snapshot(alloc_free(0x1000, 512))) * 2,
            "bytes after the pickle": pickle.dumps(snapshot(alloc_free(0x1000, 512))) + b"junk",
        }
        for name, raw in cases.items():
            with self.subTest(name):
                self.assert_refused(self.convert(None, raw_pickle=raw))

    def test_wrong_types_and_ranges_are_refused(self):
        big = 1 << 64
        cases = {
            "size True": [entry("alloc", 0x1000, True)],
            "size 2^64": [entry("alloc", 0x1000, big)],
            "size negative": [entry("alloc", 0x1000, -1)],
            "size float": [entry("alloc", 0x1000, 1.5)],
            "size string": [entry("alloc", 0x1000, "512\na 9 9")],
            "addr 2^64": [entry("alloc", big, 512)],
            "addr list": [entry("alloc", [1], 512)],
            "stream string": [entry("alloc", 0x1000, 512, stream="0\na 1 1")],
            "stream list": [entry("alloc", 0x1000, 512, stream=[1])],
            "stream negative": [entry("alloc", 0x1000, 512, stream=-3)],
            # An oom's size and stream make its `o` line: checked as an alloc's, never dropped or made 0.
            "oom size negative": [entry("alloc", 0x1000, 512), entry("oom", 0, -5)],
            "oom size missing": [entry("alloc", 0x1000, 512), {"action": "oom", "stream": 0}],
            "oom size float": [entry("alloc", 0x1000, 512), entry("oom", 0, 1.5)],
            "oom size 2^64": [entry("alloc", 0x1000, 512), entry("oom", 0, big)],
            "oom size string": [entry("alloc", 0x1000, 512), entry("oom", 0, "1\na 5 5")],
            "oom stream string": [entry("alloc", 0x1000, 512), entry("oom", 0, 4096, stream="abc")],
            "oom stream negative": [entry("alloc", 0x1000, 512), entry("oom", 0, 4096, stream=-1)],
            "entry a list": [[1, 2]],
            "action not a string": [{"action": 5, "addr": 1, "size": 1}],
            "time_us a string": [entry("alloc", 0x1000, 512, time_us="x")],
            # Nothing to replay: written with exit 0, then refused by replay, tune and explain.
            "segment entries only": [entry("segment_alloc", 0x1000, MiB), entry("segment_free", 0x1000, MiB)],
            "allocations of 0 bytes only": [entry("alloc", 0x1000, 0), entry("free_completed", 0x1000, 0)],
            "unknown actions only": [{"action": "weird"}],
        }
        for name, trace in cases.items():
            with self.subTest(name):
                self.assert_refused(self.convert(snapshot(trace)))
        for name, data in {
            "device trace a dict": {"device_traces": [{"a": 1}]},
            "device trace a string": {"device_traces": ["alloc"]},
            "annotations a dict": dict(snapshot(alloc_free(0x1000, 8)), external_annotations={"x": 1}),
            "settings with a newline": dict(snapshot(alloc_free(0x1000, 8)),
                                            allocator_settings={"PYTORCH_CUDA_ALLOC_CONF": "a:1\na 77 1"}),
            "settings with a NUL": dict(snapshot(alloc_free(0x1000, 8)),
                                        allocator_settings={"PYTORCH_CUDA_ALLOC_CONF": "a\x00b"}),
            "settings a list": dict(snapshot(alloc_free(0x1000, 8)), allocator_settings={"PYTORCH_CUDA_ALLOC_CONF": [1]}),
            "settings not an object": dict(snapshot(alloc_free(0x1000, 8)), allocator_settings=["x"]),
            # An annotation of the wrong shape was skipped: its marker went missing, exit 0.
            "annotation time a string": dict(snapshot(alloc_free(0x1000, 8)), external_annotations=[
                {"device": 0, "stage": "START", "name": "bwd", "time_us": "25"}]),
            "annotation without a time": dict(snapshot(alloc_free(0x1000, 8)), external_annotations=[
                {"device": 0, "stage": "START", "name": "opt"}]),
            "annotation a list": dict(snapshot(alloc_free(0x1000, 8)), external_annotations=[["junk"]]),
            "annotation device a string": dict(snapshot(alloc_free(0x1000, 8)), external_annotations=[
                {"device": "0", "stage": "START", "name": "fwd", "time_us": 16}]),
        }.items():
            with self.subTest(name):
                self.assert_refused(self.convert(data))

    def test_names_that_could_inject_a_line_are_refused(self):
        for name in ("scope\na 99 1", "nul\x00here", "cr\rhere", "\x1b[31mred", 42):
            with self.subTest(repr(name)):
                annotations = [{"stage": "START", "name": name, "device": 0, "time_us": 1}]
                self.assert_refused(self.convert(snapshot([entry("alloc", 0x1000, 8, time_us=2)],
                                                          annotations=annotations)))

    def test_no_field_reaches_the_trace_but_numbers_and_checked_names(self):
        # An oom entry's device_free is shown only when it is a number (its size is checked).
        trace = [entry("oom", 0, 4096, device_free="2\nf 5"), entry("alloc", 0x1000, 8)]
        result = self.convert(snapshot(trace))
        self.assertEqual(result.status, 0, result.stderr)
        self.assertEqual(result.events(), ["m oom", "o 4096 0", "a 0 8 0"])

    def test_output_onto_a_symlink_or_fifo_is_refused_and_kept(self):
        target = self.path("kept.txt")
        with open(target, "w") as file:
            file.write("old")
        os.symlink(target, self.path("link.trace"))
        result = self.convert(snapshot(alloc_free(0x1000, 8)), out_name="link.trace")
        self.assertEqual(result.status, 2, result.stderr)
        with open(target) as file:
            self.assertEqual(file.read(), "old")
        self.assertTrue(os.path.islink(self.path("link.trace")))
        os.mkfifo(self.path("fifo.trace"))
        with contextlib.redirect_stderr(io.StringIO()):  # (self.convert would open the FIFO to read it)
            status = torch2trace.main([self.path("snapshot.pickle"), self.path("fifo.trace")])
        self.assertEqual(status, 2)

    def test_a_users_tmp_file_is_never_touched(self):
        with open(self.path("out.trace.tmp"), "w") as file:
            file.write("mine")
        result = self.convert(snapshot(alloc_free(0x1000, 8)))
        self.assertEqual(result.status, 0, result.stderr)
        with open(self.path("out.trace.tmp")) as file:
            self.assertEqual(file.read(), "mine")
        self.assertEqual(sorted(os.listdir(self.directory.name)), ["out.trace", "out.trace.tmp", "snapshot.pickle"])


if __name__ == "__main__":
    unittest.main()
