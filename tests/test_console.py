"""An honest console, from the command line: every command answers --help,
-h and `help COMMAND` (and the help lists exactly what the parser takes);
--version; "did you mean" for mistyped commands, options and names; one size
syntax for every size option; out-of-memory never silent; no figure of the
simulated device presented as a GPU time; --quiet prints errors only; every
file written is announced, and a result template never replaces an earlier
file. Standard library only; run by `make test` (VRAMBENCH names the binary,
VB_MAKE_ARGS the make arguments of the build)."""
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
VRAMBENCH = os.path.abspath(os.environ.get("VRAMBENCH") or os.path.join(REPO, "build", "vrambench"))
GPT2 = os.path.join(REPO, "tests", "fixtures", "traces", "gpt2.trace.gz")

COMMANDS = ["list", "run", "replay", "tune", "claims", "microbench", "gen-trace", "check-sim"]
# The source file whose option table each command's --help prints.
SOURCES = {"list": "cmd_list.c", "run": "cmd_run.c", "replay": "cmd_run.c", "tune": "cmd_tune.c",
           "claims": "cmd_claims.c", "microbench": "cmd_microbench.c", "gen-trace": "cmd_gen_trace.c"}
SIZE_RULE = ("a size is bytes, or a number with K, M, G or T (powers of 1024, any case, B or iB optional: "
             "64M = 64MiB = 64mb; GB counts as GiB), e.g. 4096, 64MiB, 24g, 1.5G")


def vrambench(*args, cwd=None):
    done = subprocess.run([VRAMBENCH, *args], capture_output=True, text=True, timeout=300, cwd=cwd)
    return done.returncode, done.stdout, done.stderr


def lines(text):
    return text.strip("\n").splitlines() if text.strip() else []


def help_options(text):
    """The options a --help lists: each at the start of an indented line."""
    found = set()
    for line in text.splitlines():
        match = re.match(r"^  (?:(-\w), )?(--[a-z0-9-]+)", line)
        if match:
            found.update(name for name in match.groups() if name)
    return found


def gpu_present():
    status, _, _ = vrambench("run", "--device", "cuda", "--scenario", "views", "--allocator", "cuda",
                             "--min-time", "0", "--quiet")
    return status == 0


class Temporary(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.addCleanup(self.directory.cleanup)
        self.dir = self.directory.name

    def path(self, name):
        return os.path.join(self.dir, name)


class Help(unittest.TestCase):
    def test_every_command_answers_help_and_h_on_stdout_with_exit_0(self):
        for command in COMMANDS:
            for flag in ("--help", "-h"):
                with self.subTest(command=command, flag=flag):
                    status, stdout, stderr = vrambench(command, flag)
                    self.assertEqual(status, 0, stderr)
                    self.assertEqual(stderr, "")
                    self.assertTrue(stdout.startswith(f"usage: vrambench {command}"), stdout[:80])

    def test_help_command_prints_the_commands_own_help(self):
        for command in COMMANDS:
            with self.subTest(command=command):
                self.assertEqual(vrambench("help", command), vrambench(command, "--help"))
        status, stdout, _ = vrambench("help")
        self.assertEqual(status, 0)
        for command in COMMANDS:
            self.assertIn(f"  {command} ", stdout)
        self.assertEqual(vrambench("help", "help"), (0, stdout, ""))  # help's own help is the usage

    def test_no_command_is_one_line_pointing_to_help(self):
        status, stdout, stderr = vrambench()
        self.assertEqual(status, 2)
        self.assertEqual(stdout, "")
        self.assertEqual(len(stderr.splitlines()), 1, stderr)
        self.assertTrue(stderr.startswith("vrambench: error: "), stderr)
        self.assertIn("vrambench --help", stderr)

    def test_a_misspelt_help_is_offered_help(self):
        for args in (["helpp"], ["hlep", "replay"], ["help", "helpp"]):
            with self.subTest(args=args):
                status, stdout, stderr = vrambench(*args)
                self.assertEqual(status, 2)
                self.assertEqual(stdout, "")
                self.assertEqual(len(stderr.splitlines()), 1, stderr)
                self.assertIn("did you mean help?", stderr)

    def test_every_option_has_a_value_unit_or_example_in_help(self):
        for command in SOURCES:
            with self.subTest(command=command):
                _, stdout, _ = vrambench(command, "--help")
                self.assertTrue(re.search(r"^examples?:", stdout, re.M), stdout)
                for option in ("--sim-capacity", "--capacity", "--max-size", "--max-live"):
                    if option in help_options(stdout):
                        self.assertIn(SIZE_RULE, stdout)   # sizes documented where they are taken

    def test_replay_help_lists_its_own_options_and_not_runs(self):
        _, replay, _ = vrambench("replay", "--help")
        _, run, _ = vrambench("run", "--help")
        self.assertTrue({"--snapshot", "--sim-capacity", "--allocator", "--fail-on-oom"} <= help_options(replay))
        self.assertNotIn("--scenario", help_options(replay))
        self.assertNotIn("--snapshot", help_options(run))
        self.assertIn("--param", help_options(run))
        self.assertIn("random_mix", run[run.index("--param"):])   # --param explained: who reads it, how

    def test_every_option_in_help_is_taken_by_the_parser(self):
        # Each option listed, followed by an option that exists nowhere: the
        # parser takes the first (and its value), then stops at the second.
        for command in SOURCES:
            _, stdout, _ = vrambench(command, "--help")
            for option in sorted(help_options(stdout) - {"--help", "-h"}):
                with self.subTest(command=command, option=option):
                    status, _, stderr = vrambench(command, option, "1", "--zz-no-such-option")
                    self.assertEqual(status, 2, stderr)
                    self.assertNotIn(f"unknown option '{option}'", stderr)
                    self.assertNotIn("does not apply", stderr)

    def test_every_option_the_source_names_is_in_help(self):
        # The other way round: an option string in a command's source is in its help.
        for source in sorted(set(SOURCES.values())):
            commands = [c for c, s in SOURCES.items() if s == source]
            listed = set()
            for command in commands:
                listed |= help_options(vrambench(command, "--help")[1])
            with open(os.path.join(REPO, "app", source)) as file:
                named = set(re.findall(r'"(--[a-z][a-z0-9-]*)"', file.read()))
            with self.subTest(source=source):
                self.assertLessEqual(named, listed | {"--help"})


class Version(unittest.TestCase):
    def test_version_names_the_commit_and_the_backends(self):
        status, stdout, stderr = vrambench("--version")
        self.assertEqual(status, 0, stderr)
        version, commit, backends = stdout.splitlines()
        self.assertRegex(version, r"^vrambench \d+\.\d+")
        self.assertRegex(commit, r"^commit: ([0-9a-f]{7,40}(-dirty)?|unknown)$")
        self.assertRegex(backends, r"^backends: (cuda \+ sim|sim only) \(")


class DidYouMean(unittest.TestCase):
    CASES = [
        (["rn"], "unknown command 'rn'; did you mean run?"),
        (["replya", "t"], "did you mean replay?"),
        (["gen_trace"], "did you mean gen-trace?"),
        (["help", "tnue"], "did you mean tune?"),
        (["run", "--alocator", "caching"], "unknown option '--alocator'; did you mean --allocator?"),
        (["run", "--allocator", "cachng", "--device", "sim"], "unknown allocator 'cachng'; did you mean caching?"),
        (["run", "--scenario", "view", "--device", "sim"], "unknown scenario 'view'; did you mean views?"),
        # an empty name was skipped without a word (--allocator refused it)
        (["run", "--scenario", "views,", "--device", "sim"], "empty scenario name in 'views,'"),
        (["claims", "--claim", ",view_keeps_storage", "--device", "sim"], "empty claim name in ',view_keeps_storage'"),
        (["list", "allocator"], "unknown kind 'allocator'; did you mean allocators?"),
        (["claims", "--claim", "view_keeps_storag", "--device", "sim"], "did you mean view_keeps_storage?"),
        (["microbench", "--thread", "2"], "did you mean --threads?"),
        (["gen-trace", "randon"], "did you mean random?"),
        (["tune", "t.trace", "--capacty", "1G"], "did you mean --capacity?"),
        (["replay", GPT2, "--sim-capacty", "1G"], "did you mean --sim-capacity?"),
        (["run", "--scenario", "views", "--allocator", "caching[max_split_size=256]", "--device", "sim"],
         "unknown config key 'max_split_size'; did you mean max_split_size_mb?"),
        (["run", "--scenario", "views", "--pytorch-alloc-conf", "expandable_segment:True", "--device", "sim"],
         "unrecognized key 'expandable_segment'; did you mean expandable_segments?"),
        (["microbench", "--allocator", "driver:cudaMaloc", "--device", "sim"],
         "unknown driver row 'driver:cudaMaloc'; did you mean driver:cudaMalloc?"),
    ]

    def test_a_mistyped_name_is_one_line_naming_the_nearest(self):
        for args, hint in self.CASES:
            with self.subTest(args=args):
                status, stdout, stderr = vrambench(*args)
                self.assertEqual(status, 2, stderr)
                self.assertEqual(stdout, "")
                self.assertEqual(len(lines(stderr)), 1, stderr)
                self.assertTrue(stderr.startswith("vrambench: error: "), stderr)
                self.assertIn(hint, stderr)

    def test_a_name_near_nothing_offers_nothing(self):
        for args in (["xyzzy"], ["run", "--xyzzy"], ["list", "xyzzy"]):
            with self.subTest(args=args):
                status, _, stderr = vrambench(*args)
                self.assertEqual(status, 2)
                self.assertEqual(len(lines(stderr)), 1, stderr)
                self.assertNotIn("did you mean", stderr)


class Sizes(Temporary):
    GOOD = [("4096", 4096), ("4096B", 4096), ("64K", 64 << 10), ("64k", 64 << 10), ("64KiB", 64 << 10),
            ("64M", 64 << 20), ("64m", 64 << 20), ("64mb", 64 << 20), ("64MiB", 64 << 20), ("2G", 2 << 30),
            ("2g", 2 << 30), ("2GB", 2 << 30), ("2gib", 2 << 30), ("1.5G", 3 << 29), ("0.5K", 512)]
    BAD = ["1Q", "64 M", "1.5", "-5", "1e30", "0x10", "M", "64MM", "99999999999T", "1.0001K", ""]

    def test_gen_trace_reads_every_spelling_of_a_size(self):
        for text, expected in self.GOOD:
            with self.subTest(text=text):
                trace = self.path("t.trace")
                status, _, stderr = vrambench("gen-trace", "random", "--events", "2", "--max-size", text,
                                              "--max-live", text, "-o", trace, "--quiet")
                self.assertEqual(status, 0, stderr)
                with open(trace) as file:
                    header = file.read().splitlines()[1]
                self.assertIn(f"--max-size {expected} --max-live {expected}", header)

    def test_sim_capacity_reads_the_same_spellings(self):
        for text, expected in [(t, b) for t, b in self.GOOD if b >= 2 << 20]:
            with self.subTest(text=text):
                out = self.path("r.json")
                status, _, stderr = vrambench("run", "--scenario", "views", "--allocator", "cuda", "--device", "sim",
                                              "--min-time", "0", "--sim-capacity", text, "--quiet", "--out", out)
                self.assertEqual(status, 0, stderr)
                with open(out) as file:
                    self.assertEqual(json.load(file)["context"]["device_total_bytes"], expected)

    def test_a_bad_size_is_the_same_error_for_every_size_option(self):
        commands = [("run", ["run", "--device", "sim", "--sim-capacity"]),
                    ("replay", ["replay", GPT2, "--device", "sim", "--sim-capacity"]),
                    ("tune", ["tune", GPT2, "--capacity"]),
                    ("gen-trace", ["gen-trace", "random", "--events", "2", "--max-live", "1M", "-o",
                                   self.path("t"), "--max-size"])]
        for text in self.BAD:
            for command, args in commands:
                with self.subTest(text=text, command=command):
                    status, _, stderr = vrambench(*args, text)
                    self.assertEqual(status, 2, stderr)
                    self.assertEqual(len(lines(stderr)), 1, stderr)
                    self.assertTrue(stderr.rstrip("\n").endswith(SIZE_RULE), stderr)
                    self.assertIn(f"'{text}': ", stderr)

    def test_a_size_that_is_no_whole_number_of_bytes_says_so(self):
        # 2.0000001M is 2097152.1048576 bytes: well formed, but no byte count.
        for text in ("2.0000001M", "1.0001K", "1.5"):
            with self.subTest(text=text):
                status, _, stderr = vrambench("run", "--device", "sim", "--sim-capacity", text)
                self.assertEqual(status, 2, stderr)
                self.assertIn(f"bad --sim-capacity '{text}': not a whole number of bytes; {SIZE_RULE}", stderr)
        status, _, stderr = vrambench("run", "--device", "sim", "--sim-capacity", "2.5Q")
        self.assertNotIn("whole number", stderr)


class OutOfMemory(Temporary):
    def test_a_replay_that_runs_out_says_so_in_the_table_and_on_stderr(self):
        status, stdout, stderr = vrambench("replay", GPT2, "--allocator", "caching", "--device", "sim",
                                           "--sim-capacity", "10GiB")
        self.assertEqual(status, 0, stderr)
        header = [line for line in stdout.splitlines() if "scenario/allocator" in line][0]
        row = [line for line in stdout.splitlines() if line.startswith("| replay:gpt2")][0]
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        names = [cell.strip() for cell in header.strip("|").split("|")]
        self.assertEqual(cells[names.index("OOMs")], "3")
        self.assertRegex(stdout, r"OUT OF MEMORY replay:gpt2.trace.gz/caching: 3 OOMs, the first at trace line "
                                 r"\d+: \d+ bytes")
        note = [line for line in lines(stderr) if "ran out of memory" in line]
        self.assertEqual(len(note), 1, stderr)
        self.assertRegex(note[0], r"^vrambench: warning: 1 case ran out of memory: replay:gpt2.trace.gz/caching "
                                  r"\(3 OOMs, the first at trace line \d+: \d+ bytes")
        self.assertIn("--fail-on-oom makes this exit 3", note[0])

    def test_a_first_request_past_2_to_the_53_bytes_is_named_exactly(self):
        # The sizes went through a double: 12966619160104079558 showed as ...079360.
        for size in (12966619160104079558, 9007199254740993):
            with self.subTest(size=size):
                trace, out = self.path("big.trace"), self.path("r.json")
                with open(trace, "w") as file:
                    file.write(f"vbtrace 1\na 1 4096\na 2 {size}\n")
                status, stdout, stderr = vrambench("replay", trace, "--allocator", "caching", "--device", "sim",
                                                   "--out", out)
                self.assertEqual(status, 0, stderr)
                self.assertIn(f"the first at trace line 3: {size} bytes", stdout)
                self.assertIn(f"the first at trace line 3: {size} bytes", stderr)
                with open(out) as file:
                    entry = json.load(file)["benchmarks"][0]
                self.assertEqual(entry["first_oom_line"], 3)
                if size < 1 << 63:  # JSON integers as jansson writes them: signed 64 bits
                    self.assertEqual(entry["first_oom_bytes"], size)

    def test_fail_on_oom_exits_3_with_an_error_line_even_when_quiet(self):
        out = self.path("r.json")
        status, stdout, stderr = vrambench("replay", GPT2, "--allocator", "caching", "--device", "sim",
                                           "--sim-capacity", "10GiB", "--fail-on-oom", "--quiet", "--out", out)
        self.assertEqual(status, 3, stderr)
        self.assertEqual(stdout, "")
        self.assertEqual(len(lines(stderr)), 1, stderr)
        self.assertIn("vrambench: error: 1 case ran out of memory", stderr)
        self.assertTrue(os.path.exists(out))

    def test_a_scenario_that_runs_out_names_its_first_request(self):
        out = self.path("r.json")
        status, stdout, stderr = vrambench("run", "--scenario", "views", "--allocator", "caching", "--device",
                                           "sim", "--min-time", "0", "--sim-capacity", "3MiB", "--out", out)
        self.assertEqual(status, 0, stderr)
        with open(out) as file:
            entry = json.load(file)["benchmarks"][0]
        self.assertGreater(entry["ooms"], 0)
        self.assertGreater(entry["first_oom_bytes"], 3 << 20)
        self.assertIn(f"the first a request of {entry['first_oom_bytes']} bytes", stdout)
        self.assertIn("1 case ran out of memory: views/caching", stderr)

    def test_a_capacity_too_small_for_anything_is_refused_up_front(self):
        cases = [(["run", "--scenario", "views", "--sim-capacity", "24"], "below 2 MiB"),
                 (["run", "--scenario", "views", "--sim-capacity", "0"], "below 2 MiB"),
                 (["replay", GPT2, "--sim-capacity", "2MiB"], "too small for"),
                 (["tune", GPT2, "--capacity", "1M"], "below 2 MiB")]
        for args, why in cases:
            with self.subTest(args=args):
                out = self.path("r.json")
                status, stdout, stderr = vrambench(*args, "--device", "sim", "--out", out)
                self.assertEqual(status, 2, stderr)
                self.assertEqual(len(lines(stderr)), 1, stderr)
                self.assertIn(why, stderr)
                self.assertFalse(os.path.exists(out))

    def test_a_capacity_refused_is_named_as_given_not_rounded_to_the_limit(self):
        # Shown rounded, 2047K read "2.00 MiB is below 2 MiB" and 4095K
        # "4.00 MiB is too small" for a first allocation that needs 4 MiB.
        trace = self.path("t.trace")
        with open(trace, "w") as file:
            file.write("vbtrace 1\na 1 2526401\nf 1\n")  # 2.41 MiB: two driver pages, 4 MiB
        for args, named in ((["run", "--scenario", "views", "--sim-capacity", "2047K"], "--sim-capacity 2047K is below"),
                            (["replay", GPT2, "--sim-capacity", "2097151"], "--sim-capacity 2097151 is below"),
                            (["replay", trace, "--sim-capacity", "4095K"], "--sim-capacity 4095K is too small")):
            with self.subTest(args=args):
                status, stdout, stderr = vrambench(*args, "--device", "sim", "--out", self.path("r.json"))
                self.assertEqual(status, 2, stderr)
                self.assertIn(named, stderr)
                self.assertNotIn(".00 MiB is", stderr)

    def test_a_first_allocation_no_device_holds_runs_out_under_any_capacity_given_or_not(self):
        # Under --sim-capacity it was refused as "too small" (even at 28TiB),
        # with the default capacity replayed with its OOM counted; 2^64-1
        # bytes, rounded to driver pages, wrapped to 0 and passed the check.
        for size in (1 << 63, (1 << 64) - 1):
            trace = self.path(f"huge-{size}.trace")
            with open(trace, "w") as file:
                file.write(f"vbtrace 1\na 0 {size}\na 1 1048576\nf 1\n")
            for capacity in ([], ["--sim-capacity", "2MiB"], ["--sim-capacity", "28TiB"]):
                with self.subTest(size=size, capacity=capacity):
                    out = self.path("r.json")
                    status, _, stderr = vrambench("replay", trace, "--device", "sim", "--allocator", "caching",
                                                  "--quiet", "--out", out, *capacity)
                    self.assertEqual(status, 0, stderr)
                    with open(out) as file:
                        entry = [e for e in json.load(file)["benchmarks"] if e.get("run_type") == "iteration"][0]
                    self.assertEqual((entry["ooms"], entry["first_oom_line"]), (1, 2))

    def test_capped_trainings_search_is_not_a_failure(self):
        status, stdout, stderr = vrambench("run", "--scenario", "capped_training", "--allocator", "caching",
                                           "--device", "sim", "--min-time", "0", "--fail-on-oom")
        self.assertEqual(status, 0, stderr)
        self.assertNotIn("ran out of memory", stderr)
        self.assertIn("capped_training: its OOMs are its measurement", stdout)

    def test_no_oom_no_note(self):
        status, stdout, stderr = vrambench("run", "--scenario", "views", "--allocator", "caching", "--device", "sim",
                                           "--min-time", "0")
        self.assertEqual(status, 0, stderr)
        self.assertNotIn("out of memory", stderr)
        self.assertNotIn("OUT OF MEMORY", stdout)


class Simulated(Temporary):
    def test_the_table_shows_no_gpu_time_on_the_simulated_device(self):
        status, stdout, stderr = vrambench("run", "--scenario", "views", "--allocator", "caching", "--device", "sim",
                                           "--min-time", "0")
        self.assertEqual(status, 0, stderr)
        self.assertNotIn("GPU/iter", stdout)
        self.assertIn("host/iter", stdout)
        self.assertIn("not a GPU time", stdout)

    def test_the_footnote_says_how_many_iterations_the_memory_pass_ran(self):
        # A replay's memory pass is one run of its trace; the footnote said
        # "2 iterations" under an iters column of 1.
        status, stdout, stderr = vrambench("replay", GPT2, "--allocator", "caching", "--device", "sim")
        self.assertEqual(status, 0, stderr)
        self.assertIn("memory pass (one run of the trace on a fresh allocator", stdout)
        self.assertNotIn("2 iterations", stdout)
        status, stdout, stderr = vrambench("run", "--scenario", "views", "--allocator", "caching", "--device", "sim",
                                           "--min-time", "0")
        self.assertEqual(status, 0, stderr)
        self.assertIn("memory pass (2 iterations on a fresh allocator, whatever", stdout)

    def test_microbench_says_its_figures_are_host_side_on_sim(self):
        status, stdout, stderr = vrambench("microbench", "--allocator", "cuda", "--device", "sim")
        self.assertEqual(status, 0, stderr)
        self.assertIn("SIMULATED device: every figure is the host-side time", stdout)
        rows = [line for line in stdout.splitlines() if line.startswith("cuda ")]
        self.assertTrue(rows)
        for row in rows:
            self.assertIn("x sim driver model (", row)
            self.assertNotRegex(row, r"x driver \(")

    def test_tune_labels_its_time_host_side_on_sim(self):
        # A short search (--search-events): the labels, not the minimum capacities, are what is checked.
        status, stdout, stderr = vrambench("tune", GPT2, "--capacity", "20GiB", "--jobs", "2",
                                           "--search-events", "100000")
        self.assertEqual(status, 0, stderr)
        self.assertIn("host ms", stdout)
        self.assertNotIn("time ms", stdout)

    @unittest.skipIf(gpu_present(), "a GPU is present: --device auto uses it")
    def test_auto_without_a_gpu_says_first_that_it_runs_on_the_simulated_device(self):
        status, _, stderr = vrambench("run", "--scenario", "views", "--allocator", "cuda", "--min-time", "0")
        self.assertEqual(status, 0, stderr)
        first = lines(stderr)[:4]
        self.assertTrue(first[0].startswith("====="), stderr)
        self.assertIn("running on the SIMULATED device", first[1])
        text = " ".join(" ".join(first).split())
        self.assertIn("Memory figures are exact", text)
        self.assertIn("host-side", text)

    @unittest.skipIf(gpu_present() or not shutil.which("make"), "a GPU is present, or make is not")
    def test_make_bench_without_a_gpu_says_first_that_it_runs_on_the_simulated_device(self):
        args = shlex.split(os.environ.get("VB_MAKE_ARGS", ""))
        done = subprocess.run(["make", "--no-print-directory", "-C", REPO, *args, "bench", "BENCH_VARIANTS=",
                               "BENCH_REPETITIONS=1", "BENCH_MIN_TIME=0", f"BENCH_OUT={self.dir}/{{device}}.json"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
        self.assertEqual(done.returncode, 0, done.stdout)
        output = done.stdout.splitlines()
        banner = [i for i, line in enumerate(output) if "running on the SIMULATED device" in line]
        progress = [i for i, line in enumerate(output) if line.startswith("[1/")]
        self.assertTrue(banner and progress, done.stdout)
        self.assertLess(banner[0], progress[0])
        self.assertTrue(os.path.exists(self.path("sim.json")))


class MakeTargets(Temporary):
    @unittest.skipIf(not shutil.which("make"), "make is not installed")
    def test_make_bench_refuses_bad_variables_and_makes_no_folder_outside_out(self):
        # BENCH_OUT=/nonexistent/x.json made /nonexistent/ (as root) and wrote there,
        # exit 0; an empty BENCH_REPETITIONS read the next option as its value.
        args = shlex.split(os.environ.get("VB_MAKE_ARGS", ""))
        missing = os.path.join(self.dir, "no-such-folder")
        for variables, words in ((["BENCH_REPETITIONS="], "BENCH_REPETITIONS is empty"),
                                 (["BENCH_OUT=out/it's.json"], "cannot hold a quote"),
                                 ([f"BENCH_OUT={missing}/x.json"], "No such file or directory")):
            with self.subTest(variables):
                done = subprocess.run(["make", "--no-print-directory", "-C", REPO, *args, "bench", "BENCH_VARIANTS=",
                                       "BENCH_REPETITIONS=1", "BENCH_MIN_TIME=0", *variables],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
                self.assertNotEqual(done.returncode, 0, done.stdout)
                self.assertIn(words, done.stdout)
                self.assertFalse(os.path.exists(missing))

    def test_fuzz_refuses_a_time_that_libfuzzer_would_read_as_no_limit(self):
        # FUZZ_SECONDS=abc (or 0, -1, empty) ran each target forever.
        for seconds in ("abc", "0", "-1", ""):
            with self.subTest(seconds=seconds):
                done = subprocess.run([os.path.join(REPO, "build-aux", "run-fuzz.sh"), self.dir, seconds, "fuzz_trace"],
                                      capture_output=True, text=True, timeout=60, cwd=REPO)
                self.assertEqual(done.returncode, 2, done.stderr)
                self.assertIn("FUZZ_SECONDS", done.stderr)


class QuietAndWrote(Temporary):
    def commands(self):
        trace = self.path("g.trace")
        return [
            ["run", "--scenario", "views", "--allocator", "caching", "--device", "sim", "--min-time", "0",
             "--out", self.path("run.json")],
            ["replay", GPT2, "--allocator", "caching", "--device", "sim", "--out", self.path("replay.json")],
            ["claims", "--claim", "view_keeps_storage", "--allocator", "caching", "--device", "sim",
             "--out", self.path("claims.json")],
            ["microbench", "--allocator", "cuda", "--device", "sim", "--out", self.path("micro.json")],
            ["tune", GPT2, "--capacity", "20GiB", "--jobs", "2", "--search-events", "100000", "--out",
             self.path("tune.json")],
            ["gen-trace", "random", "--events", "10", "--max-size", "1K", "--max-live", "1M", "-o", trace],
        ]

    def test_quiet_prints_nothing_when_nothing_goes_wrong(self):
        for args in self.commands():
            with self.subTest(command=args[0]):
                status, stdout, stderr = vrambench(*args, "--quiet")
                self.assertEqual(status, 0, stderr)
                self.assertEqual(stdout, "")
                self.assertEqual(stderr, "")

    def test_every_file_written_is_announced(self):
        for args in self.commands():
            with self.subTest(command=args[0]):
                status, _, stderr = vrambench(*args)
                self.assertEqual(status, 0, stderr)
                self.assertIn(f"vrambench: wrote {args[-1]}\n", stderr)


class ResultNames(Temporary):
    def run_to(self, out, *extra):
        status, _, stderr = vrambench("run", "--scenario", "views", "--allocator", "caching", "--device", "sim",
                                      "--min-time", "0", "--out", out, *extra)
        self.assertEqual(status, 0, stderr)
        return re.search(r"vrambench: wrote (.*)", stderr).group(1)

    def test_a_template_never_replaces_an_earlier_result(self):
        template = self.path("{device}-bench.json")
        self.assertEqual(self.run_to(template), self.path("sim-bench.json"))
        with open(self.path("sim-bench.json")) as file:
            first = file.read()
        self.assertEqual(self.run_to(template), self.path("sim-bench-2.json"))
        self.assertEqual(self.run_to(template), self.path("sim-bench-3.json"))
        with open(self.path("sim-bench.json")) as file:
            self.assertEqual(file.read(), first)

    def test_runs_sharing_a_template_at_once_each_keep_their_file(self):
        # Each chose the first free name and renamed over it at the end: of
        # six at once, three results were lost, each saying "wrote".
        template = self.path("{device}-bench.json")
        command = [VRAMBENCH, "run", "--scenario", "views", "--allocator", "cuda", "--device", "sim", "--min-time", "0",
                   "--out", template]
        runs = [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                for _ in range(6)]
        written = []
        for run in runs:
            _, stderr = run.communicate(timeout=120)
            self.assertEqual(run.returncode, 0, stderr)
            written.append(re.search(r"vrambench: wrote (.*)", stderr).group(1))
        self.assertEqual(len(set(written)), 6, written)
        self.assertEqual(sorted(os.listdir(self.dir)), sorted(os.path.basename(w) for w in written))  # no claim left

    def test_a_claim_left_by_a_killed_run_is_taken_back_and_another_hosts_is_kept(self):
        # A run killed with SIGKILL (no handler runs) left its claim, and
        # every later run skipped that name for good.
        dead = subprocess.Popen(["true"])
        dead.wait()
        host = socket.gethostname()
        with open(self.path(".vrambench-claim-sim-bench.json"), "w") as file:
            file.write(f"{dead.pid} {host}\n")
        with open(self.path(".vrambench-claim-sim-bench-2.json"), "w") as file:
            file.write(f"{os.getpid()} another-host\n")  # a run elsewhere, on a shared folder
        template = self.path("{device}-bench.json")
        self.assertEqual(self.run_to(template), self.path("sim-bench.json"))
        self.assertEqual(self.run_to(template), self.path("sim-bench-3.json"))
        self.assertEqual(sorted(os.listdir(self.dir)), [".vrambench-claim-sim-bench-2.json", "sim-bench-3.json",
                                                        "sim-bench.json"])

    def test_a_placeholder_that_is_none_is_refused_not_taken_as_text(self):
        # "{devic}" was a plain name: exit 0, and the next run replaced the file.
        for name, words in (("x-{devic}.json", "did you mean {device}?"), ("x-{DATE}.json", "did you mean {date}?"),
                            ("x-{}.json", "'{}' is no placeholder"), ("x-{device.json", "'{device.json' is no")):
            with self.subTest(name):
                status, _, stderr = vrambench("run", "--scenario", "views", "--allocator", "cuda", "--device", "sim",
                                              "--min-time", "0", "--quiet", "--out", self.path(name))
                self.assertEqual(status, 2, stderr)
                self.assertEqual(len(stderr.splitlines()), 1, stderr)
                self.assertIn(words, stderr)
        self.assertEqual(os.listdir(self.dir), [])

    def test_force_lets_a_template_replace(self):
        template = self.path("{device}-bench.json")
        self.run_to(template)
        self.assertEqual(self.run_to(template, "--force"), self.path("sim-bench.json"))
        self.assertEqual(sorted(os.listdir(self.dir)), ["sim-bench.json"])

    def test_a_plain_name_is_replaced(self):
        plain = self.path("bench.json")
        self.run_to(plain)
        self.assertEqual(self.run_to(plain), plain)
        self.assertEqual(os.listdir(self.dir), ["bench.json"])


if __name__ == "__main__":
    unittest.main()
