"""`vrambench check-sim` on inputs it must refuse, skip or survive: a
results file never loads a library (the cases of an external: allocator are
skipped, the library is never opened; an unknown allocator is bad input); a
replay's relative trace path is found from any directory; files of which
nothing could be checked are not a pass; a FIFO or pipe is read
once and never waited on forever; a file over 256 MiB is refused naming the
limit; bad input is exit 2 with one line on stderr; the documented
differences come from docs/data/sim-differences.json (or --differences /
VRAMBENCH_SIM_DIFFERENCES), and a missing or malformed one is exit 2 with one
line. Standard library only; run by `make test` (VRAMBENCH names the binary,
VB_EXTERNAL_TEST_SO the test allocator)."""
import json
import os
import subprocess
import tempfile
import threading
import unittest

VRAMBENCH = os.path.abspath(os.environ.get("VRAMBENCH", "build/vrambench"))
TEST_SO = os.path.abspath(os.environ.get("VB_EXTERNAL_TEST_SO") or os.path.join(
    os.path.dirname(VRAMBENCH), "tests", "libvb_external_test.so"))
TINY_TRACE = b"vbtrace 1\na 1 4096\na 2 3000000\nm step\nf 1\nf 2\n"


class CheckSimInputs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()
        cls.trace = cls.file_path("tiny.trace")
        with open(cls.trace, "wb") as file:
            file.write(TINY_TRACE)
        run, replay = cls.file_path("sim-run.json"), cls.file_path("sim-replay.json")
        for arguments in (["run", "--scenario", "views", "--allocator", "cuda,bfc", "--min-time", "0",
                           "--out", run],
                          ["replay", cls.trace, "--allocator", "caching", "--out", replay]):
            done = subprocess.run([VRAMBENCH, *arguments, "--device", "sim", "--quiet"], capture_output=True,
                                  timeout=300)
            if done.returncode != 0:
                raise RuntimeError(done.stderr.decode())
        with open(run) as file:
            cls.run_document = cls.from_gpu(json.load(file))
        with open(replay) as file:
            cls.replay_document = cls.from_gpu(json.load(file))

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    @classmethod
    def file_path(cls, name):
        return os.path.join(cls.directory.name, name)

    @staticmethod
    def from_gpu(document):
        """A sim result made to look like a GPU's, which check-sim re-runs."""
        document["context"].update(simulated=False, device_name="test GPU")
        return document

    def write(self, name, document):
        path = self.file_path(name)
        with open(path, "w") as file:
            json.dump(document, file)
        return path

    def check_sim(self, *arguments, timeout=120, **options):
        done = subprocess.run([VRAMBENCH, "check-sim", *arguments], capture_output=True, text=True,
                              timeout=timeout, **options)
        return done.returncode, done.stdout, done.stderr

    def assert_bad_input(self, *arguments, expect=None, **options):
        status, stdout, stderr = self.check_sim(*arguments, **options)
        self.assertEqual(status, 2, stdout + stderr)
        lines = stderr.splitlines()
        self.assertEqual(len(lines), 1, stderr)
        self.assertTrue(lines[0].startswith("vrambench: error: check-sim: "), stderr)
        if expect:
            self.assertIn(expect, lines[0])
        return lines[0]

    # ---- a results file never runs code ----

    def with_allocator(self, allocator):
        """The run document with the cuda cases copied under `allocator`."""
        document = json.loads(json.dumps(self.run_document))
        for entry in list(document["benchmarks"]):
            if entry["allocator"] == "cuda":
                copy = dict(entry, allocator=allocator, name=f"{entry['scenario']}/{allocator}")
                document["benchmarks"].append(copy)
        return document

    def test_an_external_allocator_in_a_results_file_is_skipped_and_never_loaded(self):
        self.assertTrue(os.path.isfile(TEST_SO), f"the external test allocator was not built: {TEST_SO}")
        path = self.write("external.json", self.with_allocator("external:" + TEST_SO))
        environment = dict(os.environ, LD_DEBUG="files")
        status, stdout, stderr = self.check_sim(path, env=environment)
        if "file=" not in stderr:
            self.skipTest("the dynamic loader does not report what it loads (LD_DEBUG)")
        self.assertEqual(status, 0, stdout + stderr)
        self.assertNotIn(f"file={TEST_SO}", stderr, "check-sim loaded a library a results file named")
        self.assertIn(f"skipped: the cases of 'external:{TEST_SO}', not a built-in allocator", stdout)
        self.assertIn("2 cases, 0 differ", stdout)  # views with cuda and bfc; the external case is not one

    def test_an_unknown_allocator_in_a_results_file_is_exit_2_naming_it_with_did_you_mean(self):
        for allocator, name, hint in (("cachng", "cachng", "did you mean caching?"),
                                      ("nosuch[x=1]", "nosuch", None)):
            with self.subTest(allocator):
                path = self.write("unknown.json", self.with_allocator(allocator))
                line = self.assert_bad_input(path, expect=f"unknown allocator '{name}'")
                self.assertIn(path, line)
                if hint:
                    self.assertIn(hint, line)
                self.assertNotIn("skipped", self.check_sim(path)[1])

    # ---- FIFOs, pipes, sizes ----

    def test_a_fifo_whose_writer_sends_nothing_is_one_error_line_not_a_hang(self):
        # check-sim waits for a FIFO's writer (tests/test_io_safety.py); one that sends nothing is an empty input
        fifo = self.file_path("no-data.json")
        os.mkfifo(fifo)

        def hang_up():
            with open(fifo, "wb"):
                pass
        try:
            for arguments in ([fifo], ["--newest", fifo]):
                writer = threading.Thread(target=hang_up, daemon=True)
                writer.start()
                line = self.assert_bad_input(*arguments, timeout=30, expect="empty")
                self.assertIn(fifo, line)
                writer.join(5)
        finally:
            os.remove(fifo)

    def test_a_fifo_is_read_once_with_newest(self):
        fifo = self.file_path("fifo.json")
        os.mkfifo(fifo)
        # Held open read-write, so check-sim's open finds a writer; more than a
        # pipe's buffer, so the write ends only once check-sim reads.
        data = json.dumps(self.run_document).encode() + b" " * (2 << 20)
        holder = os.open(fifo, os.O_RDWR)

        def feed():
            view = memoryview(data)
            while view:
                view = view[os.write(holder, view):]
            os.close(holder)
        writer = threading.Thread(target=feed, daemon=True)
        try:
            writer.start()
            status, stdout, stderr = self.check_sim("--newest", fifo, timeout=60)
            self.assertEqual(status, 0, stdout + stderr)
            self.assertIn("2 cases, 0 differ", stdout)
        finally:
            writer.join(5)
            os.remove(fifo)

    def test_a_pipe_is_read_once_with_newest(self):
        status, stdout, stderr = self.check_sim("--newest", "/dev/stdin", input=json.dumps(self.run_document))
        self.assertEqual(status, 0, stdout + stderr)
        self.assertIn("2 cases, 0 differ", stdout)

    def test_a_file_over_256_mib_is_refused_naming_the_limit(self):
        path = self.file_path("huge.json")
        with open(path, "wb") as file:
            file.truncate((256 << 20) + 1)  # sparse: nothing is written
        try:
            self.assert_bad_input(path, expect="256 MiB")
        finally:
            os.remove(path)

    # ---- gzipped results (the large committed files are stored so) ----

    def test_a_gzipped_results_file_is_checked_as_the_plain_one(self):
        import gzip
        plain = self.write("plain.json", self.run_document)
        zipped = self.file_path("zipped.json.gz")
        with open(plain, "rb") as source, open(zipped, "wb") as target:
            target.write(gzip.compress(source.read()))
        first, second = self.check_sim(plain), self.check_sim(zipped)
        self.assertEqual(first[0], 0, first[1] + first[2])
        self.assertEqual(second[0], 0, second[1] + second[2])
        self.assertEqual(first[1].replace(plain, "FILE"), second[1].replace(zipped, "FILE"))

    def test_a_truncated_gzip_file_is_one_error_line(self):
        import gzip
        data = gzip.compress(json.dumps(self.run_document).encode())
        path = self.file_path("truncated.json.gz")
        with open(path, "wb") as file:
            file.write(data[:len(data) // 2])
        self.assert_bad_input(path, expect="not a valid gzip file")

    def test_a_directory_is_one_error_line(self):
        self.assert_bad_input(self.directory.name, expect=self.directory.name)

    def test_a_replayed_trace_that_is_a_fifo_is_skipped_not_waited_on(self):
        fifo = self.file_path("trace-fifo.trace")
        os.mkfifo(fifo)
        try:
            document = json.loads(json.dumps(self.replay_document))
            document["context"]["trace_path"] = fifo
            status, stdout, stderr = self.check_sim(self.write("fifo-replay.json", document),
                                                    self.write("checked-run.json", self.run_document), timeout=30)
            self.assertEqual(status, 0, stdout + stderr)
            self.assertIn("is not a regular file", stdout)
        finally:
            os.remove(fifo)

    # ---- a replay's trace, from any directory ----

    def replay_in_a_repository(self, root, trace_at):
        """A replay result at ROOT/repo/results/sub/replay.json whose trace_path
        is the relative "traces/tiny.trace", with the trace at ROOT/`trace_at`;
        ROOT/repo holds .git, so it is a repository root."""
        for folder in ("repo/.git", "repo/results/sub", "elsewhere", os.path.dirname(trace_at)):
            os.makedirs(os.path.join(root, folder), exist_ok=True)
        with open(os.path.join(root, trace_at), "wb") as file:
            file.write(TINY_TRACE)
        document = json.loads(json.dumps(self.replay_document))
        document["context"]["trace_path"] = "traces/tiny.trace"
        path = os.path.join(root, "repo", "results", "sub", "replay.json")
        with open(path, "w") as file:
            json.dump(document, file)
        return path

    def test_a_relative_trace_path_is_found_from_the_results_file_in_any_directory(self):
        with tempfile.TemporaryDirectory() as root:
            path = self.replay_in_a_repository(root, "repo/traces/tiny.trace")
            for cwd in (os.path.join(root, "elsewhere"), os.path.join(root, "repo", "results")):
                with self.subTest(cwd=cwd):
                    status, stdout, stderr = self.check_sim(path, cwd=cwd)
                    self.assertEqual(status, 0, stdout + stderr)
                    self.assertIn("1 cases, 0 differ", stdout)
                    self.assertIn(os.path.join(root, "repo", "traces", "tiny.trace"), stdout)
            status, stdout, stderr = self.check_sim(os.path.relpath(path, root), cwd=root)
            self.assertEqual(status, 0, stdout + stderr)
            self.assertIn("1 cases, 0 differ", stdout)

    def test_a_relative_trace_path_is_not_looked_for_above_the_repository_root(self):
        with tempfile.TemporaryDirectory() as root:
            path = self.replay_in_a_repository(root, "traces/tiny.trace")
            status, stdout, stderr = self.check_sim(path, cwd=os.path.join(root, "elsewhere"))
            self.assertEqual(status, 2, stdout + stderr)
            self.assertIn("skipped: the replayed trace 'traces/tiny.trace' is not here", stdout)

    def test_a_trace_path_that_is_not_a_non_empty_string_is_exit_2_with_one_line(self):
        for value in (5, None, "", ["tiny.trace"]):
            for kind, document in (("replay", self.replay_document), ("run", self.run_document)):
                with self.subTest(value=value, kind=kind):
                    document = json.loads(json.dumps(document))
                    document["context"]["trace_path"] = value
                    path = self.write("bad-trace-path.json", document)
                    line = self.assert_bad_input(path, expect="context.trace_path is not a path")
                    self.assertIn(path, line)

    def test_a_context_simulated_or_device_name_of_the_wrong_type_is_exit_2_as_for_compare(self):
        # check-sim read "simulated": "yes" as a GPU file and re-ran it (exit 0),
        # where compare, merge and report refuse the file.
        for key, value in (("simulated", "yes"), ("simulated", 1), ("device_name", 7), ("device_name", "GPU\x1b[2J")):
            with self.subTest(key=key, value=value):
                document = json.loads(json.dumps(self.run_document))
                document["context"][key] = value
                path = self.write("bad-context.json", document)
                line = self.assert_bad_input(path, expect="context's device_name")
                self.assertIn(path, line)

    # ---- nothing checked is not a pass ----

    def test_files_whose_every_case_is_skipped_are_exit_2_not_a_silent_pass(self):
        missing_trace = json.loads(json.dumps(self.replay_document))
        missing_trace["context"]["trace_path"] = self.file_path("absent.trace")
        no_memory_pass = json.loads(json.dumps(self.run_document))
        del no_memory_pass["context"]["memory_pass"]
        only_external = json.loads(json.dumps(self.run_document))
        for entry in only_external["benchmarks"]:
            entry["allocator"] = "external:/nonexistent/allocator.so"
        skipped = {
            "a sim result": self.file_path("sim-run.json"),
            "a replay whose trace is not here": self.write("missing-trace.json", missing_trace),
            "a file before the memory pass": self.write("no-memory-pass.json", no_memory_pass),
            "only external allocators": self.write("only-external.json", only_external),
        }
        checked = self.write("checked-run.json", self.run_document)
        for name, path in skipped.items():
            with self.subTest(name):
                self.assert_bad_input(path, expect="nothing was checked")
                self.assert_bad_input("--newest", path, expect="nothing was checked")
                status, stdout, stderr = self.check_sim(path, checked)
                self.assertEqual(status, 0, stdout + stderr)
                self.assertIn("skipped", stdout)
        self.assert_bad_input(*skipped.values(), expect="nothing was checked")

    def test_nothing_checked_names_no_documented_difference_as_not_seen(self):
        # With no case compared, check-sim listed every documented difference
        # of the data file as "not seen in these files" above its error.
        status, stdout, stderr = self.check_sim(self.file_path("sim-run.json"))
        self.assertEqual(status, 2, stdout + stderr)
        self.assertIn("0 cases checked", stdout)
        self.assertNotIn("documented difference not seen", stdout)

    # ---- bad input: exit 2, one line ----

    def test_bad_cases_in_a_results_file_are_exit_2_with_one_line(self):
        def changed(document, change):
            document = json.loads(json.dumps(document))
            change(document)
            return document

        def set_capacity(value):
            return lambda d: d["context"].update(device_total_bytes=value)

        def set_allocator(value):
            return lambda d: d["benchmarks"][0].update(allocator=value)
        malformed_trace = self.file_path("malformed.trace")
        with open(malformed_trace, "wb") as file:
            file.write(b"vbtrace 1\na 1 5\nf 7\n")
        cases = {
            "no device_total_bytes": (self.run_document, lambda d: d["context"].pop("device_total_bytes")),
            "negative device_total_bytes": (self.run_document, set_capacity(-5)),
            "device_total_bytes a string": (self.run_document, set_capacity("80GiB")),
            "device_total_bytes 1e30": (self.run_document, set_capacity(1e30)),
            "a key the allocator does not know": (self.run_document, set_allocator("caching[bogus=1]")),
            "an unclosed spec": (self.run_document, set_allocator("caching[")),
            "a malformed trace": (self.replay_document, lambda d: d["context"].update(trace_path=malformed_trace)),
        }
        for name, (document, change) in cases.items():
            with self.subTest(name):
                self.assert_bad_input(self.write("bad.json", changed(document, change)))

    # ---- the documented differences ----

    def planted(self):
        """The run document with views/bfc's peak reserved 2 MiB off."""
        document = json.loads(json.dumps(self.run_document))
        for entry in document["benchmarks"]:
            if entry["name"] == "views/bfc":
                entry["peak_reserved_bytes"] += 2 << 20
        return self.write("planted.json", document)

    def differences(self, name, differences):
        return self.write(name, {"about": "test", "version": 1, "differences": differences})

    def test_the_differences_come_from_the_data_file(self):
        planted = self.planted()
        status, stdout, _ = self.check_sim(planted)
        self.assertEqual(status, 1, stdout)  # the repository's file does not document it
        documenting = self.differences("documenting.json", [{
            "id": "planted", "title": "a planted difference", "measured": "2 MiB", "reason": "planted by a test",
            "evidence": ["tests/test_check_sim_inputs.py"],
            "matches": [{"case": "views/bfc", "figure": "peak_reserved_bytes"},
                        {"case": "nothing/*", "figure": "*"}]}])
        for arguments, environment in ((["--differences", documenting], None),
                                       ([], dict(os.environ, VRAMBENCH_SIM_DIFFERENCES=documenting))):
            with self.subTest(arguments=arguments):
                status, stdout, stderr = self.check_sim(*arguments, planted, env=environment)
                self.assertEqual(status, 0, stdout + stderr)
                self.assertIn("[documented: planted by a test]", stdout)
                self.assertIn("documented difference not seen in these files: nothing/* *", stdout)

    def test_a_missing_or_malformed_differences_file_is_exit_2_with_one_line(self):
        good = {"id": "x", "title": "t", "measured": "m", "reason": "r", "evidence": ["e"],
                "matches": [{"case": "*", "figure": "*"}]}
        broken = {
            "missing": None,
            "not json": "{",
            "no differences": {"about": "", "version": 1},
            "version 2": {"version": 2, "differences": []},
            "an unknown key": {"version": 1, "differences": [dict(good, figures=["*"])]},
            "no reason": {"version": 1, "differences": [{k: v for k, v in good.items() if k != "reason"}]},
            "a match without a figure": {"version": 1, "differences": [dict(good, matches=[{"case": "*"}])]},
            "no matches": {"version": 1, "differences": [dict(good, matches=[])]},
            "a repeated id": {"version": 1, "differences": [good, good]},
        }
        run = self.write("good-run.json", self.run_document)
        for name, content in broken.items():
            with self.subTest(name):
                path = self.file_path("differences.json")
                if os.path.exists(path):
                    os.remove(path)
                if content is not None:
                    with open(path, "w") as file:
                        file.write(content if isinstance(content, str) else json.dumps(content))
                line = self.assert_bad_input("--differences", path, run)
                self.assertIn("differences", line)
                self.assertIn(path, line)

    def test_an_option_after_the_files_is_an_option_not_a_file(self):
        run = self.write("good-run.json", self.run_document)
        line = self.assert_bad_input(run, "--newst", expect="unknown option")
        self.assertIn("--newest", line)
        self.assert_bad_input(run, "--differences", self.file_path("absent.json"), expect="absent.json")
        status, stdout, stderr = self.check_sim(run, "--newest")
        self.assertNotIn("--newest", stderr)
        self.assertIn("cases checked", stdout)
        # after -- a word that starts with '-' is a file
        self.assert_bad_input("--", "--newest", expect="--newest: cannot open")

    def test_a_binary_away_from_its_repository_needs_the_file_named(self):
        copy = self.file_path("vrambench")
        with open(VRAMBENCH, "rb") as source, open(copy, "wb") as target:
            target.write(source.read())
        os.chmod(copy, 0o755)
        environment = {k: v for k, v in os.environ.items() if k != "VRAMBENCH_SIM_DIFFERENCES"}
        run = self.write("away-run.json", self.run_document)
        try:
            done = subprocess.run([copy, "check-sim", run], capture_output=True, text=True, timeout=120,
                                  env=environment)
            self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
            self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr)
            self.assertIn("--differences FILE", done.stderr)
        finally:
            os.remove(copy)


if __name__ == "__main__":
    unittest.main()
