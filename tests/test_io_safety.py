"""Files in and out under hostile use (issue 26, "Reliability, round three"),
table-driven, against the real binary ($VRAMBENCH, else build/vrambench) and
the Python tools:

- an output that is one of the command's inputs (or another of its outputs)
  is refused, by identity, with one line naming both, and every file is kept;
- every command reads a pipe or FIFO the same way (once, spooled), bounded by
  VB_SPOOL_LIMIT, and a directory scan never opens a FIFO;
- --snapshot goes through the one safe writer (no fixed F.tmp);
- a signal mid-write leaves no temporary file ($TMPDIR included), and every
  Python command ends by SIGINT without a traceback;
- what torch2trace writes, the reader reads (over-long comments, marker names
  that are the replay's own step names);
- plots/tune.py writes through a temporary file (a full disk keeps the old
  picture, a symlink is refused);
- option-looking --out values, control characters in echoed names, --config
  of an external: path with dots."""

import gzip
import json
import os
import pickle
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import signal_defaults

signal_defaults.restore()

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PYTHON_DIR = os.path.join(REPO, "python")
VRAMBENCH = os.path.abspath(os.environ.get("VRAMBENCH") or os.path.join(REPO, "build", "vrambench"))
TORCH2TRACE = os.path.join(PYTHON_DIR, "vrambench", "torch2trace.py")
TUNE_PLOT = os.path.join(PYTHON_DIR, "vrambench", "plots", "tune.py")

try:
    import matplotlib  # noqa: F401
    HAVE_MATPLOTLIB = True
except ImportError:
    HAVE_MATPLOTLIB = False

TRACE = b"vbtrace 1\n" + b"".join(b"a %d %d\nf %d\n" % (i, 4096 * (i % 5 + 1), i) for i in range(50))


def snapshot_bytes(conf=None, names=(), entries=5):
    trace = [{"action": "alloc", "addr": 4096 * (i + 1), "size": 512, "stream": 0, "time_us": 2 * i}
             for i in range(entries)]
    trace += [{"action": "free_completed", "addr": 4096 * (i + 1), "size": 512, "stream": 0,
               "time_us": 2 * entries + i} for i in range(entries)]
    snapshot = {"device_traces": [trace], "segments": []}
    if conf is not None:
        snapshot["allocator_settings"] = {"PYTORCH_CUDA_ALLOC_CONF": conf}
    if names:
        snapshot["external_annotations"] = [{"stage": "START", "name": name, "device": 0, "time_us": 1}
                                            for name in names]
    return pickle.dumps(snapshot, protocol=2)


def pyproject_scripts():
    """(name, "module:function") of pyproject.toml's [project.scripts]."""
    scripts, inside = [], False
    with open(os.path.join(REPO, "pyproject.toml"), encoding="utf-8") as file:
        for line in file:
            line = line.split("#", 1)[0].strip()
            if line.startswith("["):
                inside = line == "[project.scripts]"
            elif inside and "=" in line:
                name, target = (part.strip() for part in line.split("=", 1))
                scripts.append((name, target.strip('"')))
    return scripts


class Base(unittest.TestCase):
    def wait_for(self, condition, seconds=120):
        """Polls `condition` until it holds (True) or `seconds` pass (False):
        the tests wait for a state, never for a fixed time."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            if condition():
                return True
            time.sleep(0.02)
        return False

    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.addCleanup(self.directory.cleanup)
        self.dir = self.directory.name
        self.env = dict(os.environ, TMPDIR=self.dir, PYTHONPATH=PYTHON_DIR, VB_TORCH2TRACE=TORCH2TRACE)
        self.env.pop("VB_SPOOL_LIMIT", None)

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, data):
        with open(self.path(name), "wb") as file:
            file.write(data)
        return self.path(name)

    def read(self, name):
        with open(self.path(name), "rb") as file:
            return file.read()

    def run_tool(self, argv, timeout=120, **options):
        env = dict(self.env, **options.pop("env", {}))
        return subprocess.run(argv, cwd=self.dir, env=env, capture_output=True, timeout=timeout, **options)

    def vrambench(self, *args, **options):
        return self.run_tool([VRAMBENCH, *args], **options)

    def assert_one_error_line(self, result, status=2):
        self.assertEqual(result.returncode, status, result.stderr)
        lines = result.stderr.decode("utf-8").splitlines()
        errors = [line for line in lines if "error:" in line]
        self.assertEqual(len(errors), 1, result.stderr)
        return errors[0]

    def listing(self):
        return sorted(os.listdir(self.dir))


class OutputIsInput(Base):
    """Each (command, files it names): refused, exit 2, one line naming both,
    every file as it was, nothing added."""

    def cases(self):
        replay = ["replay", "t.trace", "--device", "sim", "--allocator", "caching", "--quiet"]
        return [
            ("replay T --out T", [VRAMBENCH, *replay, "--out", "t.trace"]),
            ("replay T --out ./T", [VRAMBENCH, *replay, "--out", "./t.trace"]),
            ("replay T --out DIR/../DIR/T", [VRAMBENCH, *replay, "--out",
                                             os.path.join(self.dir, "..", os.path.basename(self.dir), "t.trace")]),
            ("replay symlink-to-T --out T", [VRAMBENCH, "replay", "link.trace", "--device", "sim", "--quiet",
                                             "--allocator", "caching", "--out", "t.trace"]),
            ("replay T --out hard-link-of-T", [VRAMBENCH, *replay, "--out", "hard.trace"]),
            ("replay T --snapshot T", [VRAMBENCH, *replay, "--snapshot", "t.trace"]),
            ("replay --out X --snapshot X", [VRAMBENCH, *replay, "--out", "x.out", "--snapshot", "x.out"]),
            ("replay --out X --snapshot ./X", [VRAMBENCH, *replay, "--out", "x.out", "--snapshot", "./x.out"]),
            ("tune T --out T", [VRAMBENCH, "tune", "t.trace", "--jobs", "2", "--quiet", "--out", "t.trace"]),
            ("tune S.pickle --out S.pickle", [VRAMBENCH, "tune", "s.pickle", "--jobs", "2", "--quiet",
                                              "--out", "s.pickle"]),
            ("claims --pytorch M --out M", [VRAMBENCH, "claims", "--allocator", "caching", "--device", "sim",
                                            "--quiet", "--pytorch", "m.json", "--out", "m.json"]),
            ("torch2trace S S", [sys.executable, TORCH2TRACE, "s.pickle", "s.pickle"]),
            ("torch2trace S ./S", [sys.executable, TORCH2TRACE, "s.pickle", "./s.pickle"]),
        ]

    def test_an_output_that_is_an_input_is_refused_and_every_file_kept(self):
        measurements = os.path.join(REPO, "results", "pytorch-claims-nvidia-h200-20261121.json")
        with open(measurements, "rb") as file:
            files = {"t.trace": TRACE, "s.pickle": snapshot_bytes(), "m.json": file.read()}
        for name, data in files.items():
            self.write(name, data)
        os.symlink("t.trace", self.path("link.trace"))
        os.link(self.path("t.trace"), self.path("hard.trace"))
        before = self.listing()
        for label, argv in self.cases():
            with self.subTest(label):
                result = self.run_tool(argv)
                line = self.assert_one_error_line(result)
                self.assertIn("is the same file as", line)
                for name, data in files.items():
                    self.assertEqual(self.read(name), data, f"{label} changed {name}")
                self.assertEqual(self.listing(), before)

    def test_distinct_outputs_still_work(self):
        self.write("t.trace", TRACE)
        result = self.vrambench("replay", "t.trace", "--device", "sim", "--allocator", "caching", "--quiet",
                                "--out", "r.json", "--snapshot", "s.pickle")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.listing(), ["r.json", "s.pickle", "t.trace"])


class FifosAndPipes(Base):
    """Every command reads a pipe or FIFO the same way: once, to its end."""

    def feed_fifo(self, name, data, delay=0.0):
        fifo = self.path(name)
        os.mkfifo(fifo)

        def writer():
            time.sleep(delay)
            try:
                with open(fifo, "wb") as file:
                    file.write(data)
            except OSError:
                pass
        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        self.addCleanup(self.release, fifo)
        return fifo

    @staticmethod
    def release(fifo):
        # A reader that never came leaves the writer blocked in open(): open it to let it go.
        try:
            fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
            time.sleep(0.05)
            os.close(fd)
        except OSError:
            pass

    def results_file(self):
        self.write("t.trace", TRACE)
        result = self.vrambench("replay", "t.trace", "--device", "sim", "--allocator", "caching", "--quiet",
                                "--out", "r.json")
        self.assertEqual(result.returncode, 0, result.stderr)
        return self.read("r.json")

    def tune_file(self):
        self.write("t.trace", TRACE)
        result = self.vrambench("tune", "t.trace", "--jobs", "2", "--quiet", "--out", "tune.json")
        self.assertEqual(result.returncode, 0, result.stderr)
        return self.read("tune.json")

    def test_a_fifo_is_read_once_by_every_command(self):
        measurements = os.path.join(REPO, "results", "pytorch-claims-nvidia-h200-20261121.json")
        with open(measurements, "rb") as file:
            claims = file.read()
        cases = [
            ("replay", TRACE, [VRAMBENCH, "replay", "f", "--device", "sim", "--allocator", "caching", "--quiet"]),
            ("replay, gzip", gzip.compress(TRACE), [VRAMBENCH, "replay", "f", "--device", "sim", "--quiet",
                                                    "--allocator", "caching"]),
            ("tune", TRACE, [VRAMBENCH, "tune", "f", "--jobs", "2", "--quiet"]),
            ("tune, a pickle", snapshot_bytes(), [VRAMBENCH, "tune", "f", "--jobs", "2", "--quiet"]),
            ("replay, writer 3 s late", TRACE, [VRAMBENCH, "replay", "f", "--device", "sim", "--quiet",
                                                "--allocator", "caching"], 3.0),
            ("claims --pytorch", claims, [VRAMBENCH, "claims", "--allocator", "caching", "--device", "sim",
                                          "--claim", "view_keeps_storage", "--quiet", "--pytorch", "f"]),
            ("torch2trace", snapshot_bytes(), [sys.executable, TORCH2TRACE, "f", "out.trace"]),
        ]
        if HAVE_MATPLOTLIB:
            cases += [("plots", self.results_file(), [sys.executable, "-m", "vrambench.plots", "f", "--out-dir", "p"]),
                      ("plots/tune.py", self.tune_file(), [sys.executable, TUNE_PLOT, "f", "--out", "t.png"])]
        for case in cases:
            label, data, argv = case[:3]
            with self.subTest(label):
                self.feed_fifo("f", data, case[3] if len(case) > 3 else 0.0)
                result = self.run_tool(argv, timeout=180)
                self.assertEqual(result.returncode, 0, result.stderr)
                if len(case) > 3:
                    self.assertIn(b"waiting for something to write to the FIFO", result.stderr)
                os.remove(self.path("f"))
                self.assertFalse([n for n in self.listing() if n.startswith(("vrambench-", ".vrambench-"))])

    def results_readers(self):
        """(label, argv, output file or None) for each command that reads a
        results JSON, given as in/r.json (in/ holds a GPU-looking copy of a
        sim replay, which check-sim re-runs)."""
        os.makedirs(self.path("in"), exist_ok=True)
        document = json.loads(self.results_file())
        document["context"].update(simulated=False, device_name="test GPU")
        self.results_json = json.dumps(document).encode()
        self.write("other.json", self.results_json)
        differences = os.path.join(REPO, "docs", "data", "sim-differences.json")
        with open(differences, "rb") as file:
            self.differences_json = file.read()
        return [("compare", ["compare", "in/r.json", "other.json"], None),
                ("merge", ["merge", "in/r.json", "-o", "merged.json", "--quiet"], "merged.json"),
                ("report", ["report", "in/r.json", "-o", "page.html", "--no-plots"], "page.html"),
                ("check-sim", ["check-sim", "in/r.json"], None),
                ("check-sim --differences", ["check-sim", "other.json", "--differences", "in/r.json"], None)]

    def input_for(self, label):
        return self.differences_json if label == "check-sim --differences" else self.results_json

    def outcome(self, result, out):
        """What a run gave: its status, stdout, and its output file (the
        report's time of making left out)."""
        written = b""
        if out:
            written = self.read(out)
            os.remove(self.path(out))
            written = re.sub(rb" \xc2\xb7 made [^<]*<", b"<", written)
        return result.returncode, result.stdout, written

    def test_a_results_fifo_whose_writer_is_late_reads_as_the_file(self):
        for label, argv, out in self.results_readers():
            with self.subTest(label):
                self.write("in/r.json", self.input_for(label))
                from_file = self.outcome(self.vrambench(*argv, timeout=120), out)
                self.assertEqual(from_file[0], 0, from_file)
                os.remove(self.path("in/r.json"))
                self.feed_fifo("in/r.json", self.input_for(label), delay=1.0)
                try:
                    result = self.vrambench(*argv, timeout=120)
                    self.assertEqual(self.outcome(result, out), from_file, result.stderr)
                finally:  # the next case writes a file here: never into a FIFO left behind
                    self.release(self.path("in/r.json"))
                    os.remove(self.path("in/r.json"))

    def test_a_results_fifo_without_a_writer_gets_the_note_then_is_read(self):
        for label, argv, out in self.results_readers():
            with self.subTest(label):
                fifo = self.path("in/r.json")
                os.mkfifo(fifo)
                self.addCleanup(self.release, fifo)
                with open(self.path("stderr"), "wb") as errors:
                    command = subprocess.Popen([VRAMBENCH, *argv], cwd=self.dir, env=self.env,
                                               stdout=subprocess.DEVNULL, stderr=errors)
                try:
                    noted = self.wait_for(lambda: b"waiting for something to write to the FIFO in/r.json"
                                          in self.read("stderr"), seconds=30)
                    self.assertTrue(noted, f"{label}: no note; stderr: {self.read('stderr')!r}")
                    self.assertIsNone(command.poll(), f"{label} ended before its FIFO had a writer")
                    writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO, not a hang, if it has gone
                    os.set_blocking(writer, True)
                    with open(writer, "wb") as stream:
                        stream.write(self.input_for(label))
                    self.assertEqual(command.wait(timeout=120), 0, self.read("stderr"))
                finally:
                    if command.poll() is None:
                        command.kill()
                        command.wait()
                    os.remove(fifo)
                if out:
                    os.remove(self.path(out))

    def test_a_pipe_on_stdin_is_read_once(self):
        for label, data, argv in [
                ("tune", TRACE, ["tune", "/dev/stdin", "--jobs", "2", "--quiet"]),
                ("tune, a pickle", snapshot_bytes(), ["tune", "/dev/stdin", "--jobs", "2", "--quiet"]),
                ("replay", TRACE, ["replay", "/dev/stdin", "--device", "sim", "--allocator", "caching", "--quiet"])]:
            with self.subTest(label):
                result = self.vrambench(*argv, input=data)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertNotIn(b"empty file", result.stderr)

    def test_a_directory_scan_never_opens_a_fifo(self):
        os.mkdir(self.path("results"))
        result = self.vrambench("run", "--scenario", "views", "--allocator", "caching", "--device", "sim",
                                "--min-time", "0", "--quiet", "--out", "results/r.json")
        self.assertEqual(result.returncode, 0, result.stderr)
        os.mkfifo(self.path("results/waiting.json"))
        sys.path.insert(0, PYTHON_DIR)
        from vrambench import results
        newest, _ = results.find_latest(self.path("results"))
        self.assertEqual(os.path.basename(newest.path), "r.json")

    def test_what_is_spooled_is_bounded(self):
        limit = {"VB_SPOOL_LIMIT": "1M"}
        for label, argv, data in [
                ("replay /dev/zero", ["replay", "/dev/zero", "--device", "sim", "--quiet"], None),
                ("tune /dev/zero", ["tune", "/dev/zero", "--quiet"], None),
                ("replay, a pipe of 2 MiB", ["replay", "/dev/stdin", "--device", "sim", "--quiet"],
                 b"vbtrace 1\n" + b"# x\n" * (1 << 19))]:
            with self.subTest(label):
                result = self.vrambench(*argv, input=data, env=limit, timeout=60)
                line = self.assert_one_error_line(result)
                self.assertIn("VB_SPOOL_LIMIT=1 MiB", line)
                self.assertEqual(self.listing(), [])
        result = self.vrambench("replay", "/dev/stdin", "--device", "sim", "--quiet", input=TRACE,
                                env={"VB_SPOOL_LIMIT": "lots"})
        self.assertIn("VB_SPOOL_LIMIT='lots' is not a byte count", self.assert_one_error_line(result))
        result = self.run_tool([sys.executable, TORCH2TRACE, "-", "o.trace"], input=snapshot_bytes(entries=500),
                               env={"VB_SPOOL_LIMIT": "4K"})
        self.assertIn("larger than", self.assert_one_error_line(result))
        # A JSON input is bounded by the most a JSON input holds (256 MiB),
        # not copied to the spool limit first (4 GiB of /dev/zero for compare).
        for command in (["compare", "/dev/zero", "/dev/zero"], ["report", "/dev/zero", "-o", "p.html"],
                        ["merge", "/dev/zero", "-o", "m.json"]):
            with self.subTest(command[0]):
                result = self.vrambench(*command, env={"VB_SPOOL_LIMIT": "1G"}, timeout=60)
                self.assertIn("/dev/zero: larger than 256 MiB, the most this input may hold",
                              self.assert_one_error_line(result))
                self.assertEqual(self.listing(), [])


    def test_a_malformed_spool_limit_is_refused_by_every_command_that_reads_a_pipe(self):
        # replay refuses VB_SPOOL_LIMIT=lots for a pipe; so must every other command reading one.
        self.write("t.trace", TRACE)
        result = self.vrambench("replay", "t.trace", "--device", "sim", "--allocator", "caching", "--quiet",
                                "--out", "r.json")
        self.assertEqual(result.returncode, 0, result.stderr)
        results = self.read("r.json")
        measurements = os.path.join(REPO, "results", "pytorch-claims-nvidia-h200-20261121.json")
        with open(measurements, "rb") as file:
            pytorch = file.read()
        for label, argv, data in [
                ("replay", ["replay", "/dev/stdin", "--device", "sim", "--quiet"], TRACE),
                ("compare", ["compare", "/dev/stdin", "r.json"], results),
                ("report", ["report", "/dev/stdin", "-o", "page.html", "--no-plots"], results),
                ("merge", ["merge", "/dev/stdin", "-o", "merged.json", "--quiet"], results),
                ("claims --pytorch", ["claims", "--allocator", "caching", "--device", "sim", "--quiet",
                                      "--claim", "view_keeps_storage", "--pytorch", "/dev/stdin"], pytorch)]:
            # '0' too: the C commands took it as 0 bytes (every pipe refused), torch2trace refused it
            for limit in ("lots", "0"):
                with self.subTest(label, limit=limit):
                    result = self.vrambench(*argv, input=data, env={"VB_SPOOL_LIMIT": limit}, timeout=60)
                    self.assertIn(f"VB_SPOOL_LIMIT='{limit}' is not a byte count", self.assert_one_error_line(result))
                    self.assertEqual(self.listing(), ["r.json", "t.trace"])


class SnapshotOutput(Base):
    def replay_snapshot(self, out="s.pickle"):
        self.write("t.trace", TRACE)
        return self.vrambench("replay", "t.trace", "--device", "sim", "--allocator", "caching", "--quiet",
                              "--snapshot", out)

    def test_a_users_snapshot_tmp_file_is_kept(self):
        self.write("s.pickle.tmp", b"mine")
        result = self.replay_snapshot()
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.read("s.pickle.tmp"), b"mine")
        self.assertEqual(self.listing(), ["s.pickle", "s.pickle.tmp", "t.trace"])

    def test_a_symlinked_snapshot_tmp_file_is_not_written_through(self):
        self.write("victim", b"victim")
        os.symlink("victim", self.path("s.pickle.tmp"))
        result = self.replay_snapshot()
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.read("victim"), b"victim")

    def test_a_full_disk_keeps_the_old_snapshot(self):
        self.write("s.pickle", b"old")

        def small_disk():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))
        self.write("t.trace", TRACE)
        result = self.vrambench("replay", "t.trace", "--device", "sim", "--allocator", "caching", "--quiet",
                                "--snapshot", "s.pickle", preexec_fn=small_disk)
        self.assert_one_error_line(result, status=1)
        self.assertEqual(self.read("s.pickle"), b"old")
        self.assertEqual(self.listing(), ["s.pickle", "t.trace"])

    def test_a_failed_snapshot_leaves_no_out_file_behind(self):
        # The results JSON (some 40 KB) fits under the file size limit, the
        # snapshot of 5000 allocations (over 1 MB) does not: the replay fails
        # and --out's file is neither written nor replaced.
        self.write("kept.json", b"old")

        def small_disk():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, 256 << 10))
        self.write("t.trace", b"vbtrace 1\n" + b"".join(b"a %d %d\nf %d\n" % (i, 4096 * (i % 5 + 1), i)
                                                       for i in range(5000)))
        for out in ("new.json", "kept.json"):
            with self.subTest(out):
                result = self.vrambench("replay", "t.trace", "--device", "sim", "--allocator", "caching", "--quiet",
                                        "--out", out, "--snapshot", "s.pickle", preexec_fn=small_disk)
                self.assert_one_error_line(result, status=1)
                self.assertEqual(self.read("kept.json"), b"old")
                self.assertEqual(self.listing(), ["kept.json", "t.trace"])
        result = self.vrambench("replay", "t.trace", "--device", "sim", "--allocator", "caching", "--quiet",
                                "--out", "new.json", "--snapshot", "s.pickle")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.listing(), ["kept.json", "new.json", "s.pickle", "t.trace"])


class Signals(Base):
    """A signal mid-write: the process dies by it and leaves no file."""

    def temporaries(self):
        return [n for n in self.listing() if n.startswith((".vrambench-", "vrambench-"))]

    def size_or_zero(self, name):
        # A temporary listed a moment ago may be gone (the output check's
        # probe file is made and removed before the trace's own).
        try:
            return os.path.getsize(self.path(name))
        except FileNotFoundError:
            return 0

    def test_gen_trace_interrupted_mid_write_leaves_nothing(self):
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            with self.subTest(signal.Signals(signum).name):
                process = subprocess.Popen([VRAMBENCH, "gen-trace", "random", "--events", "50000000", "--max-size",
                                            "1M", "--max-live", "1G", "-o", "big.trace"], cwd=self.dir, env=self.env,
                                           stderr=subprocess.DEVNULL)
                started = self.wait_for(lambda: any(self.size_or_zero(n) > 0 for n in self.temporaries()))
                process.send_signal(signum)
                process.wait(timeout=60)
                self.assertTrue(started, "gen-trace wrote nothing")
                self.assertEqual(process.returncode, -signum)
                self.assertEqual(self.listing(), [])

    def test_tune_interrupted_mid_run_leaves_nothing(self):
        self.write("io-safety-s.pickle", snapshot_bytes(entries=2000))
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            with self.subTest(signal.Signals(signum).name):
                def start():
                    process = subprocess.Popen([VRAMBENCH, "tune", "io-safety-s.pickle", "--jobs", "2", "--out",
                                                "t.json"], cwd=self.dir, env=self.env, stderr=subprocess.PIPE,
                                               stdout=subprocess.DEVNULL)
                    process.stderr.readline()  # the snapshot is converted: the tune is under way
                    return process
                def missed(process, errors):  # the run was over before the signal
                    self.assertEqual(process.returncode, 0)
                    os.remove(self.path("t.json"))
                run = signal_defaults.interrupt_a_run(start, lambda process: True, signum, missed)
                if run is None:
                    self.skipTest("the tune was done before it could be interrupted, 3 times")
                process, _ = run
                self.assertEqual(process.returncode, -signum)
                self.assertEqual(self.listing(), ["io-safety-s.pickle"])
        # Nothing of ours in /tmp either (a converted trace names its snapshot).
        for name in os.listdir("/tmp"):
            folder = os.path.join("/tmp", name)
            if name.startswith("vrambench-pickle-") and os.path.isdir(folder):
                for inner in os.listdir(folder):
                    try:
                        with open(os.path.join(folder, inner), "rb") as file:
                            self.assertNotIn(b"io-safety-s.pickle", file.read(300), folder)
                    except OSError:
                        pass

    def test_a_signal_as_the_temporary_file_is_made_leaves_nothing(self):
        # The signal lands right as mkstemp has made the file, before the
        # writer has its name: held back until the writer can remove it.
        script = (
            "import os, signal, sys, tempfile\n"
            "from vrambench import output\n"
            "real = tempfile.mkstemp\n"
            "def mkstemp_then_signal(*args, **kwargs):\n"
            "    made = real(*args, **kwargs)\n"
            "    os.kill(os.getpid(), int(sys.argv[1]))\n"
            "    return made\n"
            "tempfile.mkstemp = mkstemp_then_signal\n"
            "output.write_file('out.txt', lambda file: file.write(b'x'))\n")
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            with self.subTest(signal.Signals(signum).name):
                result = self.run_tool([sys.executable, "-c", script, str(signum)])
                self.assertNotEqual(result.returncode, 0, result.stderr)
                self.assertEqual(self.listing(), [])

    def test_torch2trace_interrupted_mid_write_leaves_nothing_and_no_traceback(self):
        self.write("s.pickle", snapshot_bytes(entries=400000))
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            with self.subTest(signal.Signals(signum).name):
                def missed(process, errors):  # the run got past its temporary before the signal
                    self.assertEqual(process.returncode, 0, errors)
                    os.remove(self.path("out.trace.gz"))
                run = signal_defaults.interrupt_a_run(
                    lambda: subprocess.Popen([sys.executable, TORCH2TRACE, "s.pickle", "out.trace.gz"], cwd=self.dir,
                                             env=self.env, stderr=subprocess.PIPE),
                    lambda process: bool(self.temporaries()), signum, missed)
                if run is None:
                    self.skipTest("torch2trace was done before it could be interrupted, 3 times")
                process, errors = run
                self.assertEqual(process.returncode, -signum, errors)
                self.assertNotIn(b"Traceback", errors)
                self.assertEqual(self.listing(), ["s.pickle"])

    def python_commands(self, fifo):
        """(name, argv) of every Python command line of the package, each
        reading `fifo` as its input: pyproject.toml's scripts (the function
        each names, called as pip's wrapper calls it) and the modules run
        with -m. docs_pages is left out: it reads a folder, never a FIFO."""
        arguments = {
            "vrambench.torch2trace": [fifo, "out.trace"],
            "vrambench.plots": [fifo, "--out-dir", "plots"],
            "vrambench.plots.cli": [fifo, "--out-dir", "plots"],
            "vrambench.plots.tune": [fifo, "--out", "t.png"],
            "vrambench.plots.torch_ab": [fifo, "--table"],
            "vrambench.results_tables": ["replay", fifo],
            "vrambench.report": [fifo, "--out", "r.html"],
            "vrambench.sim_differences_page": ["--data", fifo, "--out", "page.md"],
        }
        commands = [(f"-m {module}", [sys.executable, "-m", module, *argv])
                    for module, argv in arguments.items() if module != "vrambench.plots.cli"]
        commands.append(("torch2trace.py", [sys.executable, TORCH2TRACE, fifo, "out.trace"]))
        for script, target in pyproject_scripts():
            module, function = target.split(":")
            self.assertIn(module, arguments, f"{script}: add the arguments of {module} here")
            commands.append((script, [sys.executable, "-c", f"import {module}; {module}.{function}()",
                                      *arguments[module]]))
        return commands

    def test_every_python_command_interrupted_while_reading_ends_by_sigint_without_a_traceback(self):
        # The command has opened the FIFO (a writer's non-blocking open succeeds only then) and then
        # sleeps, waiting for its first byte: it is inside its main() when Ctrl-C comes. The writer
        # closes after the signal: a SIGINT that lands after open() returns but before read() blocks
        # is seen by Python only once read() returns (then at once: end of input is not read first),
        # and without the close the command would wait for ever for the byte that never comes.
        fifo = self.path("in.json")
        os.mkfifo(fifo)
        for name, argv in self.python_commands(fifo):
            with self.subTest(name):
                process = subprocess.Popen(argv, cwd=self.dir, env=self.env, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.PIPE)
                writer = None
                def reading():
                    nonlocal writer
                    try:
                        writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                    except OSError:  # ENXIO: no reader yet
                        return process.poll() is not None
                    return True
                try:
                    self.assertTrue(self.wait_for(reading))
                    self.assertIsNotNone(writer, f"{name} ended before it read its input")
                    asleep = lambda: process.poll() is not None or signal_defaults.asleep(process.pid)
                    self.assertTrue(self.wait_for(asleep))
                    process.send_signal(signal.SIGINT)
                    os.close(writer)
                    writer = None
                    _, errors = process.communicate(timeout=60)
                finally:
                    if writer is not None:
                        os.close(writer)
                    if process.poll() is None:
                        process.kill()
                        process.communicate()
                self.assertEqual(process.returncode, -signal.SIGINT, errors)
                self.assertNotIn(b"Traceback", errors)
                self.assertLessEqual(len(errors.splitlines()), 1, errors)
                self.assertEqual(self.listing(), ["in.json"])


class ConverterWritesWhatTheReaderReads(Base):
    def convert_and_replay(self, snapshot):
        self.write("s.pickle", snapshot)
        converted = self.run_tool([sys.executable, TORCH2TRACE, "s.pickle", "s.trace"])
        self.assertEqual(converted.returncode, 0, converted.stderr)
        replayed = self.vrambench("replay", "s.trace", "--device", "sim", "--allocator", "caching", "--quiet",
                                  "--out", "r.json")
        self.assertEqual(replayed.returncode, 0, replayed.stderr)
        with open(self.path("s.trace"), "rb") as file:
            lines = file.read().split(b"\n")
        self.assertLessEqual(max(len(line) for line in lines), 65535)
        return converted, lines

    def test_long_settings_are_cut_to_a_line_the_reader_reads(self):
        for label, conf in [("64 KiB", "x" * 65536), ("100 KiB", "expandable_segments:True," + "y" * 100000),
                            ("just fits", "z" * (65535 - len("# recorded with PYTORCH_CUDA_ALLOC_CONF="))),
                            ("multi-byte", "é" * 40000)]:
            with self.subTest(label):
                converted, lines = self.convert_and_replay(snapshot_bytes(conf=conf))
                cut = any(b"[cut:" in line for line in lines)
                self.assertEqual(cut, len(conf.encode()) > 65535 - 40, label)
                if cut:
                    self.assertIn(b"comment line is cut", converted.stderr)

    def test_scopes_named_like_the_replays_steps_are_renamed(self):
        names = ["end of trace", "peak reserved", "start of trace", "event 12", "event 5" + "9" * 60, "forward"]
        _, lines = self.convert_and_replay(snapshot_bytes(names=names))
        markers = [line[2:].decode() for line in lines if line.startswith(b"m ")]
        self.assertEqual(markers[:3], ["end of trace (marker)", "peak reserved (marker)", "start of trace (marker)"])
        self.assertTrue(all(len(m.encode()) <= 63 for m in markers))
        self.assertIn("forward", markers)

    def test_the_replay_refuses_a_marker_named_like_its_steps(self):
        for name in ("end of trace", "peak reserved", "start of trace", "event 7"):
            with self.subTest(name):
                self.write("t.trace", b"vbtrace 1\na 1 4096\nm " + name.encode() + b"\nf 1\n")
                for command in (["replay", "t.trace", "--device", "sim", "--allocator", "caching"],
                                ["tune", "t.trace"]):
                    line = self.assert_one_error_line(self.vrambench(*command, "--quiet"))
                    self.assertIn("t.trace:3:", line)
                    self.assertIn("the replay's own steps", line)


@unittest.skipUnless(HAVE_MATPLOTLIB, "matplotlib is not installed for this python")
class PlotOutput(Base):
    def tune_result(self):
        self.write("t.trace", TRACE)
        result = self.vrambench("tune", "t.trace", "--jobs", "2", "--quiet", "--out", "tune.json")
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_tune_plot_onto_a_symlink_or_fifo_is_refused(self):
        self.tune_result()
        self.write("victim.png", b"victim")
        os.symlink("victim.png", self.path("link.png"))
        os.mkfifo(self.path("fifo.png"))
        for out, status in (("link.png", 2), ("fifo.png", 2), ("tune.json", 2), ("missing/t.png", 2)):
            with self.subTest(out):
                result = self.run_tool([sys.executable, TUNE_PLOT, "tune.json", "--out", out])
                self.assert_one_error_line(result, status)
                self.assertEqual(self.read("victim.png"), b"victim")
                self.assertTrue(os.path.islink(self.path("link.png")))

    def test_a_full_disk_keeps_the_old_picture(self):
        self.tune_result()
        self.write("old.png", b"old picture")

        def small_disk():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        result = self.run_tool([sys.executable, TUNE_PLOT, "tune.json", "--out", "old.png"], preexec_fn=small_disk)
        self.assert_one_error_line(result, status=1)
        self.assertNotIn(b"Traceback", result.stderr)
        self.assertEqual(self.read("old.png"), b"old picture")
        self.assertEqual(self.listing(), ["old.png", "t.trace", "tune.json"])

    def test_plots_refuse_a_symlinked_png_and_keep_every_old_one(self):
        self.write("t.trace", TRACE)
        result = self.vrambench("replay", "t.trace", "--device", "sim", "--allocator", "caching", "--quiet",
                                "--out", "r.json")
        self.assertEqual(result.returncode, 0, result.stderr)
        os.mkdir(self.path("p"))
        self.write("victim", b"victim")
        os.symlink(self.path("victim"), self.path("p/peaks.png"))
        result = self.run_tool([sys.executable, "-m", "vrambench.plots", "r.json", "--out-dir", "p"])
        line = self.assert_one_error_line(result, status=1)
        self.assertIn("symbolic link", line)
        self.assertEqual(self.read("victim"), b"victim")
        self.assertEqual(os.listdir(self.path("p")), ["peaks.png"])


class CommandLine(Base):
    def test_an_option_in_place_of_an_output_name_is_refused(self):
        self.write("t.trace", TRACE)
        for label, argv in [
                ("replay", ["replay", "t.trace", "--device", "sim", "--allocator", "caching", "--out", "--quiet"]),
                ("replay --snapshot", ["replay", "t.trace", "--device", "sim", "--allocator", "caching",
                                       "--snapshot", "--quiet"]),
                ("run", ["run", "--scenario", "views", "--allocator", "caching", "--device", "sim", "--min-time", "0",
                         "--out", "--fail-on-oom"]),
                ("tune", ["tune", "t.trace", "--out", "--quiet"]),
                ("claims", ["claims", "--allocator", "caching", "--device", "sim", "--out", "--quiet"]),
                ("microbench", ["microbench", "--allocator", "cuda", "--device", "sim", "--out", "--quiet"]),
                ("gen-trace", ["gen-trace", "random", "--events", "10", "--max-size", "1K", "--max-live", "1M",
                               "-o", "-x"]),
                ("stdout", ["replay", "t.trace", "--device", "sim", "--allocator", "caching", "--out", "-"])]:
            with self.subTest(label):
                line = self.assert_one_error_line(self.vrambench(*argv))
                self.assertIn("looks like an option", line)
                self.assertEqual(self.listing(), ["t.trace"])
        result = self.vrambench("replay", "t.trace", "--device", "sim", "--allocator", "caching", "--quiet",
                                "--out", "./--quiet")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("--quiet", self.listing())

    def test_echoed_names_never_carry_control_characters_or_bad_bytes(self):
        hostile = b"x\x1b[31mred\xff\x07\nnext.trace"
        cases = [["replay", hostile, "--device", "sim"], ["tune", hostile],
                 ["run", "--scenario", hostile], ["run", "--allocator", b"caching[" + hostile + b"=1]"],
                 ["claims", "--bogus\x1b"], ["gen-trace", hostile],
                 ["replay", "t.trace", "--device", "sim", "--out", b"missing\x1b/o.json"]]
        self.write("t.trace", TRACE)
        for argv in cases:
            with self.subTest(repr(argv)):
                result = self.vrambench(*argv)
                self.assertEqual(result.returncode, 2, result.stderr)
                error = result.stderr.split(b"\n")[0]
                self.assertTrue(error.startswith(b"vrambench: error: "), result.stderr)
                self.assertFalse(any(byte < 0x20 or byte == 0x7f for byte in error), error)
                error.decode("utf-8")  # valid UTF-8

    def test_a_newline_in_a_file_name_never_makes_a_second_error_line(self):
        # A missing input, an input that is not what it should be, and an
        # output that cannot be written, each named with a newline: one line.
        self.write("t.trace", TRACE)
        made = self.vrambench("replay", "t.trace", "--device", "sim", "--allocator", "caching", "--quiet",
                              "--out", "r.json")
        self.assertEqual(made.returncode, 0, made.stderr)
        missing, unwritable = "missing\nname.trace", "no\nfolder/out.json"
        self.write("bad\nname.json", b"not json")
        self.write("bad\nname.trace", b"vbtrace 1\nzz\n")
        cases = [["replay", missing, "--device", "sim", "--allocator", "caching"], ["tune", missing],
                 ["explain", missing, "--capacity", "1G"], ["compare", "r.json", "missing\nname.json"],
                 ["merge", "missing\nname.json", "-o", "m.json"], ["report", "missing\nname.json", "-o", "p.html"],
                 ["check-sim", "missing\nname.json"], ["replay", "bad\nname.trace", "--device", "sim"],
                 ["compare", "r.json", "bad\nname.json"], ["merge", "bad\nname.json", "-o", "m.json"],
                 ["report", "bad\nname.json", "-o", "p.html", "--no-plots"], ["check-sim", "bad\nname.json"],
                 ["replay", "t.trace", "--device", "sim", "--allocator", "caching", "--out", unwritable],
                 ["replay", "t.trace", "--device", "sim", "--allocator", "caching", "--snapshot", unwritable],
                 ["tune", "t.trace", "--out", unwritable], ["merge", "r.json", "-o", unwritable],
                 ["report", "r.json", "-o", unwritable],
                 ["gen-trace", "random", "--events", "10", "--max-size", "1K", "--max-live", "1M", "-o", unwritable]]
        for argv in cases:
            with self.subTest(repr(argv)):
                result = self.vrambench(*argv)
                self.assertNotEqual(result.returncode, 0, result.stderr)
                self.assertEqual(result.stderr.count(b"\n"), 1, result.stderr)
                self.assertTrue(result.stderr.startswith(b"vrambench: error: "), result.stderr)
                # The name is still shown, its newline as '?'.
                self.assertTrue(b"?name" in result.stderr or b"no?folder" in result.stderr, result.stderr)

    def test_a_newline_in_a_file_name_never_makes_a_second_line_of_a_command_that_succeeds(self):
        # 'wrote FILE', 'merged ... into FILE', check-sim's heading, compare's
        # note and torch2trace's summary: the name is shown with its newline
        # as '?', and no line of stdout or stderr starts inside a name.
        self.write("t.trace", TRACE)
        self.write("s.pickle", snapshot_bytes())
        made = self.vrambench("replay", "t.trace", "--device", "sim", "--allocator", "caching", "--quiet",
                              "--out", "r.json")
        self.assertEqual(made.returncode, 0, made.stderr)
        gpu = json.loads(self.read("r.json"))
        gpu["context"]["simulated"] = False  # check-sim re-runs a GPU's result (a sim's is skipped: nothing checked)
        self.write("w\nname-gpu.json", json.dumps(gpu).encode())
        replay = ["replay", "t.trace", "--device", "sim", "--allocator", "caching"]
        cases = [[*replay, "--out", "w\nname-replay.json"], [*replay, "--snapshot", "w\nname-snapshot.pickle"],
                 ["tune", "t.trace", "--out", "w\nname-tune.json"],
                 ["explain", "t.trace", "--capacity", "1G", "--out", "w\nname-explain.json"],
                 ["gen-trace", "random", "--events", "10", "--max-size", "1K", "--max-live", "1M",
                  "-o", "w\nname-gen.trace"],
                 ["merge", "r.json", "-o", "w\nname-merge.json"],
                 ["report", "r.json", "-o", "w\nname-report.html", "--no-plots"],
                 ["check-sim", "w\nname-gpu.json"],
                 ["compare", "r.json", "w\nname-replay.json", "--fail-on", "time:+1000%"],
                 ["claims", "--allocator", "caching", "--device", "sim", "--out", "w\nname-claims.json"],
                 ["microbench", "--allocator", "cuda", "--device", "sim", "--out", "w\nname-micro.json"],
                 [sys.executable, TORCH2TRACE, "s.pickle", "w\nname-converted.trace"]]
        for argv in cases:
            with self.subTest(repr(argv)):
                result = self.run_tool(argv) if argv[0] == sys.executable else self.vrambench(*argv)
                self.assertEqual(result.returncode, 0, result.stderr)
                said = result.stdout + result.stderr
                self.assertIn(b"w?name", said)
                self.assertNotIn(b"\nname", said)

    def test_config_reaches_an_external_library_whose_path_has_dots(self):
        library = "external:/opt/lib.v2/x.so"
        for config, expected in [(f"{library}.malloc=my_malloc", "cannot load"),
                                 (f"{library}.so.malloc=m", "not among those run"),
                                 ("caching.max_split_size_mb=1.5", "max_split_size_mb")]:
            with self.subTest(config):
                result = self.vrambench("run", "--scenario", "views", "--allocator", f"caching,{library}",
                                        "--device", "sim", "--min-time", "0", "--quiet", "--config", config)
                line = self.assert_one_error_line(result)
                self.assertIn(expected, line)
                self.assertNotIn("unknown allocator", line)
                self.assertNotIn("external:/opt/lib'", line)


def plotting_python():
    """The python `vrambench report` runs (app/cli_python.c: $VB_PYTHON, else
    /usr/bin/python3 when there, else python3)."""
    return os.environ.get("VB_PYTHON") or ("/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK)
                                           else "python3")


class Temporaries(Base):
    """report and explain leave no temporary file or folder, in $TMPDIR or
    /tmp, whatever ends them: a closed pipe under their last line, SIGINT to
    their process group (Ctrl-C), SIGTERM to them alone."""

    def setUp(self):
        super().setUp()
        # A name no other process uses: a temporary of ours found in /tmp holds it.
        self.label = f"io-safety-{os.getpid()}-{id(self)}"

    def tmp_folders(self, prefix):
        return {name for name in os.listdir("/tmp") if name.startswith(prefix)}

    def assert_none_of_ours_in_tmp(self, prefix, before):
        for name in self.tmp_folders(prefix) - before:
            folder = os.path.join("/tmp", name)
            for inner in os.listdir(folder) if os.path.isdir(folder) else []:
                try:
                    with open(os.path.join(folder, inner), "rb") as file:
                        self.assertNotIn(self.label.encode(), file.read(), folder)
                except OSError:
                    pass

    def results_file(self):
        self.write("t.trace", TRACE)
        name = self.label + ".json"
        result = self.vrambench("replay", "t.trace", "--device", "sim", "--allocator", "caching,bfc", "--quiet",
                                "--out", name)
        self.assertEqual(result.returncode, 0, result.stderr)
        return name

    def test_report_leaves_no_temporary_when_its_last_line_meets_a_closed_pipe(self):
        results = self.results_file()
        before = self.tmp_folders("vrambench-report-")
        reader, writer = os.pipe()
        os.close(reader)  # the line "vrambench: wrote" meets a closed pipe
        try:
            process = subprocess.run([VRAMBENCH, "report", results, "-o", "r.html", "--no-plots"], cwd=self.dir,
                                     env=self.env, stderr=writer, timeout=120)
        finally:
            os.close(writer)
        # The page is in place before that line: the command's result stands
        # (app/scratch.h, vb_signals_hold_to_exit), and it ends as done.
        self.assertEqual(process.returncode, 0)
        self.assertEqual(self.listing(), sorted([results, "r.html", "t.trace"]))
        self.assert_none_of_ours_in_tmp("vrambench-report-", before)

    def test_a_signal_once_the_output_is_in_place_ends_nothing_the_status_says_done(self):
        # A signal between the rename and the exit ended the command with
        # 128+signal although the old file had been replaced. Held back from
        # the rename on, it never ends it: a signal that does end the command
        # comes before the rename, and the old file is as it was.
        self.write("t.trace", TRACE)
        for attempt in range(20):
            with open(self.path("r.json"), "w") as file:
                file.write("PRE")
            process = subprocess.Popen([VRAMBENCH, "replay", "t.trace", "--device", "sim", "--allocator", "caching",
                                        "--quiet", "--out", "r.json"], cwd=self.dir, env=self.env,
                                       stderr=subprocess.DEVNULL)
            time.sleep(0.005 * attempt)
            process.send_signal(signal.SIGHUP)
            process.wait(timeout=60)
            with open(self.path("r.json")) as file:
                replaced = file.read() != "PRE"
            self.assertEqual(process.returncode == 0, replaced, (attempt, process.returncode))

    def test_report_interrupted_leaves_no_temporary_and_no_traceback(self):
        results = self.results_file()
        before = self.tmp_folders("vrambench-report-")
        inputs = sorted([results, "t.trace"])
        for signum, whom in ((signal.SIGINT, "group"), (signal.SIGTERM, "group"), (signal.SIGTERM, "vrambench")):
            with self.subTest(f"{signal.Signals(signum).name} to the {whom}"):
                # Signalled while the plots' temporary folder (Python's) is there: the page is under way.
                process, errors = self.interrupt_while_plotting([VRAMBENCH, "report", results, results, "-o", "r.html"],
                                                                signum, group=whom == "group")
                self.assertEqual(process.returncode, -signum, errors)
                self.assertNotIn(b"Traceback", errors)
                # The page's maker goes with vrambench, removing its folder as it goes.
                self.assertTrue(self.wait_for(lambda: self.listing() == inputs), self.listing())
        self.assert_none_of_ours_in_tmp("vrambench-report-", before)

    def test_a_signal_inside_nested_cleanups_runs_every_one_before_the_process_ends(self):
        # A report's plot folder is removed by a block around the plots' own
        # file writes: the inner block must not end the process first.
        program = (
            "import os, signal, sys, time\n"
            "from vrambench.output import signals_raise\n"
            "with signals_raise():\n"
            "    try:\n"
            "        with signals_raise():\n"
            "            try:\n"
            "                os.kill(os.getpid(), signal.SIG{name})\n"
            "                time.sleep(30)\n"
            "            finally:\n"
            "                open('inner', 'w').close()\n"
            "    finally:\n"
            "        open('outer', 'w').close()\n")
        for signum in (signal.SIGTERM, signal.SIGHUP):
            name = signal.Signals(signum).name[3:]
            with self.subTest(name):
                for left in ("inner", "outer"):
                    if os.path.exists(self.path(left)):
                        os.remove(self.path(left))
                done = subprocess.run([sys.executable, "-c", program.format(name=name)], cwd=self.dir, env=self.env,
                                      capture_output=True, timeout=60)
                self.assertEqual(done.returncode, -signum, done.stderr)
                self.assertEqual(done.stderr, b"")
                self.assertTrue(os.path.exists(self.path("inner")))
                self.assertTrue(os.path.exists(self.path("outer")))

    def test_a_second_signal_during_the_cleanup_of_the_first_does_not_cut_it_short(self):
        # A report killed by SIGINT sends its page's maker SIGTERM as it dies,
        # while the maker is already removing its plot folder for the SIGINT
        # it took too: the cleanup must finish, and the process ends by the first.
        program = (
            "import os, signal, time\n"
            "from vrambench.output import run_main\n"
            "def main():\n"
            "    try:\n"
            "        os.kill(os.getpid(), signal.SIG{first})\n"
            "        time.sleep(30)\n"
            "    finally:\n"
            "        os.kill(os.getpid(), signal.SIG{second})\n"
            "        time.sleep(0.2)\n"
            "        open('cleaned', 'w').close()\n"
            "    return 0\n"
            "run_main(main, 'p')\n")
        for first, second in ((signal.SIGINT, signal.SIGTERM), (signal.SIGTERM, signal.SIGINT),
                              (signal.SIGHUP, signal.SIGTERM), (signal.SIGINT, signal.SIGINT)):
            names = {key: signal.Signals(number).name[3:] for key, number in (("first", first), ("second", second))}
            with self.subTest(**names):
                if os.path.exists(self.path("cleaned")):
                    os.remove(self.path("cleaned"))
                done = subprocess.run([sys.executable, "-c", program.format(**names)], cwd=self.dir, env=self.env,
                                      capture_output=True, timeout=60)
                self.assertEqual(done.returncode, -first, done.stderr)
                self.assertEqual(done.stderr, b"")
                self.assertTrue(os.path.exists(self.path("cleaned")))

    def test_report_module_interrupted_removes_its_folder_quietly(self):
        results = self.results_file()
        inputs = sorted([results, "t.trace"])
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            with self.subTest(signal.Signals(signum).name):
                process, errors = self.interrupt_while_plotting(
                    [plotting_python(), "-m", "vrambench.report", results, "--out", "r.html"], signum)
                self.assertEqual(process.returncode, -signum, errors)
                self.assertEqual(errors, b"")
                self.assertEqual(self.listing(), inputs)

    def interrupt_while_plotting(self, argv, signum, group=False):
        """Runs a report command (in a session of its own) and sends it
        `signum` (to its process group, with `group`) while its plots'
        temporary folder is there (signal_defaults.interrupt_a_run: a run
        that got past the folder first is run again, up to 3 times). The
        process and its stderr."""
        seen = False
        def plotting(process):
            nonlocal seen
            there = any(name.startswith("vrambench-report-") for name in self.listing())
            seen = seen or there
            return there
        def missed(process, errors):  # the run got past the folder before the signal
            if not seen:
                self.skipTest(f"no plots: {plotting_python()} has no matplotlib")
            self.assertEqual(process.returncode, 0, errors)
            os.remove(self.path("r.html"))
        run = signal_defaults.interrupt_a_run(
            lambda: subprocess.Popen(argv, cwd=self.dir, env=self.env, stderr=subprocess.PIPE, start_new_session=True),
            plotting, signum, missed, group=group)
        if run is None:
            self.skipTest("the report was done before it could be interrupted, 3 times")
        return run

    def scratch_file_open(self, pid):
        """1 when process `pid` holds an unlinked file of $TMPDIR open (a
        scratch file), or a folder of its own is in /tmp (before the fix)."""
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            return False
        return any(link.startswith(self.dir) and link.endswith(" (deleted)") for link in links)

    def test_explain_interrupted_leaves_no_temporary(self):
        trace = self.label + ".trace"
        made = self.vrambench("gen-trace", "random", "--seed", "3", "--events", "1000000", "--max-size", "1MiB",
                              "--max-live", "4GiB", "-o", trace)
        self.assertEqual(made.returncode, 0, made.stderr)
        with open(self.path(trace), "ab") as file:
            file.write(b"o 1048576\n")  # a recorded out-of-memory: explain cuts a copy of the trace there
        before = self.tmp_folders("vrambench-explain-")
        for signum in (signal.SIGINT, signal.SIGTERM):
            with self.subTest(signal.Signals(signum).name):
                run = signal_defaults.interrupt_a_run(
                    lambda: subprocess.Popen([VRAMBENCH, "explain", trace, "--capacity", "1GiB", "--no-what-if"],
                                             cwd=self.dir, env=self.env, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.PIPE),
                    lambda process: bool(self.scratch_file_open(process.pid)
                                         or self.tmp_folders("vrambench-explain-") - before),
                    signum, lambda process, errors: None)  # a run past its copy first: again
                if run is None:
                    self.fail("explain ended before its copy of the trace was made, 3 times")
                process, errors = run
                self.assertEqual(process.returncode, -signum, errors)
                self.assertEqual(self.listing(), [trace])
                self.assertEqual(self.tmp_folders("vrambench-explain-") - before, set())


class PythonFailuresAreOneLine(Base):
    """A Python tool that cannot do its work says so in one line, never a
    traceback; a converter that fails is one line of vrambench's, never
    silence."""

    def assert_one_line(self, result, status, start):
        self.assertEqual(result.returncode, status, result.stderr)
        self.assertNotIn(b"Traceback", result.stderr)
        lines = result.stderr.decode("utf-8").splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertTrue(lines[0].startswith(start), result.stderr)
        return lines[0]

    def test_a_duplicated_key_is_refused_in_one_line_by_every_other_python_reader_of_json(self):
        # The results readers are checked in test_compare_cli; these read a tune result, a torch
        # A/B result and the sim-differences data through the same parser.
        self.write("dup.json", b'{"context": {}, "benchmarks": [], "context": {"x": 1}}')
        for argv, start in (([sys.executable, TUNE_PLOT, "dup.json", "--out", "t.png"], "tune.py: error: "),
                            ([sys.executable, "-m", "vrambench.plots.torch_ab", "dup.json", "--table"],
                             "torch_ab: error: "),
                            ([sys.executable, "-m", "vrambench.sim_differences_page", "--data", "dup.json",
                              "--out", "page.md"], "gen_sim_differences_md: ")):
            with self.subTest(start):
                line = self.assert_one_line(self.run_tool(argv), 2, start)
                self.assertIn("dup.json", line)
                self.assertIn("duplicate object key 'context'", line)
                self.assertEqual(self.listing(), ["dup.json"])

    def test_report_past_the_file_size_limit_is_one_line_and_no_page(self):
        self.write("t.trace", TRACE)
        made = self.vrambench("replay", "t.trace", "--device", "sim", "--allocator", "caching", "--quiet",
                              "--out", "r.json")
        self.assertEqual(made.returncode, 0, made.stderr)

        def small_files():  # as `ulimit -f 2`: SIGXFSZ as the shell leaves it
            resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))
        result = self.vrambench("report", "r.json", "-o", "p.html", "--no-plots", preexec_fn=small_files)
        line = self.assert_one_line(result, 1, "vrambench: error: ")
        self.assertIn("File too large", line)
        self.assertEqual(self.listing(), ["r.json", "t.trace"])

    def test_tune_plot_without_matplotlib_is_one_line(self):
        self.write("tune.json", b"{}")
        os.makedirs(self.path("no-matplotlib/matplotlib"))
        self.write("no-matplotlib/matplotlib/__init__.py", b"raise ImportError('no matplotlib here')\n")
        env = {"PYTHONPATH": self.path("no-matplotlib") + os.pathsep + PYTHON_DIR}
        for argv in ([sys.executable, "-m", "vrambench.plots.tune", "tune.json"], [sys.executable, TUNE_PLOT,
                                                                                    "tune.json"]):
            with self.subTest(argv[1]):
                line = self.assert_one_line(self.run_tool(argv, env=env), 1, "tune.py: error: ")
                self.assertIn("matplotlib is not available", line)

    def test_results_tables_on_a_full_disk_is_one_line(self):
        self.write("t.trace", TRACE)
        made = self.vrambench("replay", "t.trace", "--device", "sim", "--allocator", "caching", "--quiet",
                              "--out", "r.json")
        self.assertEqual(made.returncode, 0, made.stderr)
        with open("/dev/full", "wb") as full:
            result = subprocess.run([sys.executable, "-m", "vrambench.results_tables", "replay", "r.json"],
                                    cwd=self.dir, env=self.env, stdout=full, stderr=subprocess.PIPE, timeout=120)
        line = self.assert_one_line(result, 1, "results_tables: error: ")
        self.assertIn("No space left", line)

    def test_a_failing_converter_is_one_line_of_ours(self):
        self.write("s.pickle", snapshot_bytes())
        self.write("exits.py", b"import sys\nsys.exit(3)\n")
        self.write("not-python", b"root:x:0:0:root:/root:/bin/bash\n")
        self.write("killed.py", b"import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
        self.write("raises.py", b"raise KeyError('deep inside')\n")
        for tool, said in (("exits.py", "exit status 3"), ("not-python", "SyntaxError"),
                           ("killed.py", "signal 9"), ("raises.py", "KeyError: 'deep inside'")):
            for command in (["tune", "s.pickle", "--out", "t.json"], ["explain", "s.pickle", "--capacity", "1G"]):
                with self.subTest(f"{command[0]} with {tool}"):
                    result = self.vrambench(*command, env={"VB_TORCH2TRACE": self.path(tool)})
                    line = self.assert_one_line(result, 1, "vrambench: error: ")
                    self.assertIn("converting s.pickle", line)
                    self.assertIn(said, line)
                    self.assertNotIn("t.json", self.listing())


if __name__ == "__main__":
    unittest.main()
