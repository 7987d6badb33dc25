"""Table-driven bad-input test: malformed traces, allocator specs and config
values, --pytorch JSON files and unusable --out paths, each given to the real
binary ($VRAMBENCH, else build/vrambench). Every one must give exit status 2,
exactly one line on stderr ("vrambench: error: ..."), no result file, and
nothing left in the directory (no temporary file) beyond the inputs.

The cases are made here, varied by hand (truncations, huge, negative and
overflowing numbers, binary junk, empty files, byte-order marks, CRLF,
unknown actions, duplicate ids, frees of unknown ids, broken gzip, ...), not
taken from fixtures."""

import gzip
import json
import os
import random
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
VRAMBENCH = os.path.abspath(os.environ.get("VRAMBENCH") or os.path.join(HERE, "..", "build", "vrambench"))

RMM = b"Thread,Time,Action,Pointer,Size,Stream\n"


def rmm_line(action, pointer, size, stream="0x0"):
    return f"1,08:00:00.1,{action},{pointer},{size},{stream}\n".encode()


def gz(data):
    return gzip.compress(data, mtime=0)


def long_trace():
    """A valid trace long enough that its gzip spans many blocks."""
    lines = [b"vbtrace 1\n"]
    for i in range(20000):
        lines.append(b"a %d %d\nf %d\n" % (i, (i * 7919) % 100000 + 1, i))
    return b"".join(lines)


def junk(seed, length):
    generator = random.Random(seed)
    return bytes(generator.randrange(256) for _ in range(length))


def corrupted_gzip():
    data = bytearray(gz(long_trace()))
    for offset in range(len(data) // 2, len(data) // 2 + 16):
        data[offset] ^= 0x5A
    return bytes(data)


V = b"vbtrace 1\n"
# (name, trace bytes): `vrambench replay` must refuse each.
TRACES = [
    ("empty file", b""),
    ("header without newline", b"vbtrace 1"),
    ("unsupported version", b"vbtrace 2\na 1 5\n"),
    ("header without version", b"vbtrace\n"),
    ("header with extra field", b"vbtrace 1 2\n"),
    ("version not a number", b"vbtrace one\n"),
    ("binary junk", junk(1, 4096)),
    ("binary junk after header", V + junk(2, 512)),
    ("BOM then junk header", b"\xef\xbb\xbfvbtrace? 1\n"),
    ("UTF-16 header", "vbtrace 1\n".encode("utf-16")),
    ("CRLF then bad line", b"vbtrace 1\r\na 1\r\n"),
    ("unknown action", V + b"x 1 2\n"),
    ("upper-case action", V + b"A 1 5\n"),
    ("alloc without size", V + b"a 1\n"),
    ("alloc with too many fields", V + b"a 1 2 3 4\n"),
    ("negative id", V + b"a -1 5\n"),
    ("negative size", V + b"a 1 -5\n"),
    ("size 2^64", V + b"a 1 18446744073709551616\n"),
    ("size of 30 digits", V + b"a 1 999999999999999999999999999999\n"),
    ("id 2^64-1 (reserved)", V + b"a 18446744073709551615 1\n"),
    ("size in exponent form", V + b"a 1 1e6\n"),
    ("size in hex", V + b"a 1 0x10\n"),
    ("size with a unit", V + b"a 1 4K\n"),
    ("stream out of range", V + b"a 1 5 1024\n"),
    ("negative stream", V + b"a 1 5 -1\n"),
    ("stream 2^64", V + b"a 1 5 18446744073709551616\n"),
    ("id allocated twice while live", V + b"a 1 5\na 1 6\n"),
    ("free of an unknown id", V + b"a 1 5\nf 7\n"),
    ("double free", V + b"a 1 5\nf 1\nf 1\n"),
    ("free without id", V + b"f\n"),
    ("free with too many fields", V + b"a 1 5\nf 1 2 3\n"),
    ("free with bad stream", V + b"a 1 5\nf 1 x\n"),
    ("marker without name", V + b"m\n"),
    ("marker of blanks", V + b"m    \n"),
    ("marker name of 64 bytes", V + b"m " + b"n" * 64 + b"\n"),
    ("marker name not UTF-8", V + b"m caf\xe9\n"),
    ("marker name overlong UTF-8", V + b"m \xc0\xaf\n"),
    ("marker name with escape", V + b"m red\x1b[31m\n"),
    ("marker name with a surrogate", V + b"m \xed\xa0\x80\n"),
    ("marker name with a C1 control (CSI)", V + b"m red\xc2\x9b31m\n"),
    ("marker named like the replay's end step", V + b"a 1 5\nm end of trace\nf 1\n"),
    ("marker named like the replay's peak step", V + b"m peak reserved\n"),
    ("marker named like the replay's start step", V + b"m  start of trace \n"),
    ("marker named like a regular sample", V + b"a 1 5\nm event 17\n"),
    ("NUL inside a line", V + b"a 1\x005\n"),
    ("last line cut short", V + b"a 1 5\nf 1"),
    ("line longer than 64 KiB", V + b"# " + b"x" * 70000 + b"\n"),
    ("truncated gzip", gz(long_trace())[:30000]),
    ("gzip then plain bytes", gz(V + b"a 1 5\nf 1\n") + b"a 2 5\n"),
    ("gzip then one stray byte", gz(V + b"a 1 5\nf 1\n") + b"\x1f"),
    ("corrupt gzip", corrupted_gzip()),
    ("gzip magic only", b"\x1f\x8b"),
    ("gzip of nothing", gz(b"")),
    ("gzip header cut", gz(V)[:12]),
    ("gzip of junk", gz(junk(3, 2048))),
    ("RMM header, unknown action", RMM + rmm_line("reallocate", "0x10", 5)),
    ("RMM too few fields", RMM + b"1,08:00,allocate,0x10,5\n"),
    ("RMM too many fields", RMM + b"1,08:00,allocate,0x10,5,0x0,extra\n"),
    ("RMM pointer not hex", RMM + rmm_line("allocate", "zz", 5)),
    ("RMM pointer over 64 bits", RMM + rmm_line("allocate", "0x1" + "0" * 16, 5)),
    ("RMM negative size", RMM + rmm_line("allocate", "0x10", -1)),
    ("RMM size 2^64", RMM + rmm_line("allocate", "0x10", 1 << 64)),
    ("RMM stream not hex", RMM + rmm_line("allocate", "0x10", 5, "stream")),
    ("RMM free of unknown pointer", RMM + rmm_line("free", "0x20", 5)),
    ("RMM pointer allocated twice", RMM + rmm_line("allocate", "0x10", 5) + rmm_line("allocate", "0x10", 6)),
    ("RMM 1025 streams", RMM + b"".join(rmm_line("allocate", hex(16 * (i + 1)), 8, hex(i + 1)) for i in range(1025))),
    ("RMM header with BOM then junk", b"\xef\xbb\xbf" + RMM[:-1] + b",Extra\n"),
]


def small_disk():
    """In a child: every write past 1 MiB fails (EFBIG, SIGXFSZ ignored), as
    on a full disk: a gen-trace that writes what it should refuse stops."""
    import resource
    import signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))


class BadInputTest(unittest.TestCase):
    cases_run = 0

    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.addCleanup(self.directory.cleanup)
        self.environment = dict(os.environ, TMPDIR=self.directory.name)

    def path(self, name):
        return os.path.join(self.directory.name, name)

    def write(self, name, data):
        with open(self.path(name), "wb") as file:
            file.write(data)
        return self.path(name)

    def refused(self, arguments, inputs, out="out.json", preexec_fn=None):
        """Runs vrambench; asserts exit 2, one stderr line, and that the
        directory holds only `inputs` (no result, no temporary file)."""
        result = subprocess.run([VRAMBENCH, *arguments], capture_output=True, env=self.environment,
                                cwd=self.directory.name, timeout=60, preexec_fn=preexec_fn)
        lines = result.stderr.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertTrue(lines[0].startswith(b"vrambench: error: "), result.stderr)
        self.assertFalse(os.path.lexists(self.path(out)) and out not in inputs)
        self.assertEqual(sorted(os.listdir(self.directory.name)), sorted(inputs))
        BadInputTest.cases_run += 1
        return lines[0]

    def test_malformed_traces(self):
        self.assertGreaterEqual(len(TRACES), 60)
        for name, data in TRACES:
            with self.subTest(name):
                trace = "t.trace.gz" if data[:2] == b"\x1f\x8b" else "t.trace"
                self.write(trace, data)
                line = self.refused(["replay", trace, "--device", "sim", "--allocator", "caching",
                                     "--quiet", "--out", "out.json"], [trace])
                os.remove(self.path(trace))
                # Input errors name the file (and its line where there is one).
                self.assertIn(trace.encode(), line)

    def test_a_trace_with_nothing_to_replay_is_refused_by_every_command_that_replays_it(self):
        # Every figure of its replay would be 0, which would pass for a
        # measurement: replay, tune and explain say so instead.
        empty = [("header only", V), ("comments and markers only", V + b"# note\nm phase one\nm phase two\n"),
                 ("allocations of 0 bytes only", V + b"a 1 0\na 2 0 3\nf 1\nf 2\n"), ("RMM header only", RMM),
                 ("gzip of a header", gz(V))]
        commands = [["replay", "--device", "sim", "--quiet", "--out", "out.json"],
                    ["tune", "--quiet", "--out", "out.json"], ["explain", "--capacity", "1GiB", "--out", "out.json"]]
        for name, data in empty:
            trace = "t.trace.gz" if data[:2] == b"\x1f\x8b" else "t.trace"
            self.write(trace, data)
            for command in commands:
                with self.subTest(name, command=command[0]):
                    line = self.refused([command[0], trace, *command[1:]], [trace])
                    self.assertIn(b"holds no allocation of a byte or more", line)
            os.remove(self.path(trace))
        # One allocation of a byte, or a recorded failure alone, is something to replay.
        for data in (V + b"a 1 1\nf 1\n", V + b"o 4096 0\n"):
            self.write("t.trace", data)
            result = subprocess.run([VRAMBENCH, "replay", "t.trace", "--device", "sim", "--quiet"], capture_output=True,
                                    env=self.environment, cwd=self.directory.name, timeout=60)
            self.assertEqual(result.returncode, 0, result.stderr)

    def test_malformed_traces_through_a_pipe(self):
        # The same checks when the trace comes on stdin (read once, spooled).
        for name, data in TRACES[::6]:
            with self.subTest(name):
                result = subprocess.run([VRAMBENCH, "replay", "/dev/stdin", "--device", "sim", "--quiet",
                                         "--out", "out.json"], input=data, capture_output=True,
                                        env=self.environment, cwd=self.directory.name, timeout=60)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertEqual(result.stderr.count(b"\n"), 1, result.stderr)
                self.assertEqual(os.listdir(self.directory.name), [])

    def test_missing_and_unreadable_traces(self):
        os.mkdir(self.path("dir.trace"))
        self.refused(["replay", "dir.trace", "--device", "sim", "--out", "out.json"], ["dir.trace"])
        self.refused(["replay", "missing.trace", "--device", "sim", "--out", "out.json"], ["dir.trace"])

    SPECS = [
        "nosuch", "caching[", "caching]", "caching[]]", "caching[max_split_size_mb]", "caching[=5]",
        "caching[bogus=1]", "caching[max_split_size_mb=abc]", "caching[max_split_size_mb=-1]",
        "caching[max_split_size_mb=1e400]", "caching[max_split_size_mb=18446744073709551616]",
        "caching[max_split_size_mb=5]", "caching[memory_fraction=1.5]", "caching[memory_fraction=nan]",
        "caching[memory_fraction=-0.1]", "caching[memory_fraction=inf]", "caching[roundup_power2_divisions=3]",
        "buddy[arena_mb=3]", "bfc[garbage_collection=2]", "binning[min_bin_exponent=99]",
        "stitch[chunk_mb=3]", "stitch[handle_max_mb=3]", "binning[initial_pool_mb=100000]", "stitch[chunk_mb=8,handle_max_mb=4]", "async[release_threshold=-1]", "", ",", "caching,,bfc",
        "caching[max_split_size_mb=256", "caching max_split_size_mb=256", "\xe9", "caching[\x01=1]",
        "caching[garbage_collection_threshold=1]",
    ]

    def test_bad_allocator_specs(self):
        for spec in self.SPECS:
            with self.subTest(spec):
                self.refused(["run", "--scenario", "views", "--allocator", spec, "--device", "sim",
                              "--min-time", "0", "--quiet", "--out", "out.json"], [])

    def test_a_key_given_twice_is_refused_wherever_it_is_given(self):
        # One value each, as for the command's own options; the last one
        # silently won before. PyTorch's own syntax keeps PyTorch's rule
        # (its parser lets a later key replace an earlier one).
        base = ["--device", "sim", "--min-time", "0", "--quiet", "--out", "out.json"]
        cases = [(["run", "--scenario", "views", "--allocator", "caching[max_split_size_mb=20,max_split_size_mb=1024]"],
                  b"max_split_size_mb given twice"),
                 (["run", "--scenario", "views", "--allocator", "stitch[chunk_mb=20,handle_max_mb=64,chunk_mb=20]"],
                  b"chunk_mb given twice"),
                 (["run", "--scenario", "views", "--allocator", "caching,bfc",
                   "--config", "caching.max_split_size_mb=20", "--config", "caching.max_split_size_mb=1024"],
                  b"--config caching.max_split_size_mb given twice"),
                 (["run", "--scenario", "random_mix", "--allocator", "caching",
                   "--param", "allocations=5,seed=2,allocations=6"], b"allocations given twice"),
                 # the brackets' value and --config's: the --config one silently won
                 (["run", "--scenario", "views", "--allocator", "caching[max_split_size_mb=256]",
                   "--config", "caching.max_split_size_mb=512"],
                  b"contradicts --allocator caching[max_split_size_mb=256], which sets max_split_size_mb=256")]
        for command, words in cases:
            with self.subTest(command[3:]):
                self.assertIn(words, self.refused([*command, *base], []))
        for accepted in (["--allocator", "pytorch[max_split_size_mb:20,max_split_size_mb:1024]"],
                         ["--allocator", "caching", "--config", "caching.max_split_size_mb=20",
                          "--config", "caching.max_non_split_rounding_mb=40"],
                         ["--allocator", "caching[max_split_size_mb=20],caching", "--config",
                          "caching.max_split_size_mb=20"]):
            with self.subTest(accepted):
                done = subprocess.run([VRAMBENCH, "run", "--scenario", "views", *accepted, *base], capture_output=True,
                                      env=self.environment, cwd=self.directory.name, timeout=60)
                self.assertEqual(done.returncode, 0, done.stderr)

    CONFIGS = ["caching.bogus=1", "nosuch.x=1", "caching.max_split_size_mb", "caching.max_split_size_mb=",
               "caching.max_split_size_mb=1.5", "bfc.memory_limit_mb=99999999999999", "=1", "caching=1",
               "buddy.arena_mb=16x"]

    def test_bad_config_values(self):
        for config in self.CONFIGS:
            with self.subTest(config):
                self.refused(["run", "--scenario", "views", "--allocator", "caching,bfc,buddy", "--config", config,
                              "--device", "sim", "--min-time", "0", "--quiet", "--out", "out.json"], [])

    RUN_OPTIONS = [["--min-time", "1e400"], ["--min-time", "-1"], ["--min-time", "nan"], ["--min-time", "0x10"],
                   ["--repetitions", "99999999999999999999"], ["--repetitions", "0"], ["--max-iterations", "0"],
                   ["--sim-capacity", "99999999999T"], ["--sim-capacity", "1e30"], ["--sim-capacity", "-5"],
                   ["--scenario", "nosuch"], ["--scenario", "views,,nosuch"], ["--device", "tpu"], ["--bogus", "1"],
                   ["--repetitions", "2", "--min-time"]]

    def test_a_param_for_a_scenario_that_takes_none_is_refused(self):
        # views reads no parameter: a --param for it would be silently ignored.
        line = self.refused(["run", "--scenario", "views", "--param", "seed=1", "--allocator", "caching", "--device",
                             "sim", "--quiet", "--out", "out.json"], [])
        self.assertIn(b"views takes no --param", line)
        self.assertIn(b"random_mix", line)  # the scenario that does

    def test_a_misspelt_config_allocator_is_named_with_the_command_and_the_nearest_name(self):
        self.write("t.trace", V + b"a 1 4096\nf 1\n")
        for command in (["replay", "t.trace"], ["run", "--scenario", "views", "--min-time", "0"]):
            with self.subTest(command[0]):
                line = self.refused([*command, "--device", "sim", "--config", "cachng.max_split_size_mb=256", "--quiet",
                                     "--out", "out.json"], ["t.trace"])
                self.assertTrue(line.startswith(b"vrambench: error: %s: --config" % command[0].encode()), line)
                self.assertIn(b"did you mean caching?", line)

    def test_an_empty_output_name_is_refused_without_naming_another_option(self):
        self.write("t.trace", V + b"a 1 4096\nf 1\n")
        for arguments in (["replay", "t.trace", "--allocator", "caching", "--snapshot", ""],
                          ["explain", "t.trace", "--capacity", "1GiB", "--snapshot", ""],
                          ["run", "--scenario", "views", "--out", ""]):
            with self.subTest(arguments[0]):
                line = self.refused([*arguments, "--device", "sim"] if arguments[0] != "explain" else arguments,
                                    ["t.trace"])
                self.assertNotIn(b"--out", line)
                self.assertIn(b"empty file name", line)

    def test_explain_given_several_allocators_says_it_takes_one(self):
        # The single-spec error said "unknown allocator 'all' (known: ..., or all)".
        self.write("t.trace", V + b"a 1 4096\nf 1\n")
        for spec in ("all", "caching,bfc", "caching[max_split_size_mb=256],bfc"):
            with self.subTest(spec):
                line = self.refused(["explain", "t.trace", "--capacity", "1GiB", "--allocator", spec, "--out",
                                     "out.json"], ["t.trace"])
                self.assertIn(b"names several allocators", line)
                self.assertNotIn(b"unknown allocator", line)
        result = subprocess.run([VRAMBENCH, "explain", "t.trace", "--capacity", "1GiB", "--quiet", "--allocator",
                                 "caching[max_split_size_mb=256,garbage_collection_threshold=0.5]"],
                                capture_output=True, cwd=self.directory.name, env=self.environment, timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)

    RANDOM_MIX_PARAMS = [("seeds=3", b"did you mean seed?"), ("allocation=500", b"did you mean allocations?"),
                         ("seed=abc", b"'abc'"), ("allocations=0", b"'0'"), ("max_size_mb=100000000", b"1 to 1048576"),
                         ("seed=-1", b"'-1'"), ("seed", b"not KEY=VALUE"), ("=3", b"unknown parameter ''"),
                         ("allocations=99999999999999999999", b"allocations"),
                         # a cap one allocation passes: ran, its live peak ten times the cap
                         ("max_size_mb=100,max_usage_mb=10", b"max_size_mb 100 is above max_usage_mb 10"),
                         ("max_size_mb=20000", b"above max_usage_mb 16000 (the default)")]

    def test_a_bad_random_mix_param_is_a_usage_error_before_any_work(self):
        # Checked before the device opens or a case runs: exit 2, one line (with
        # the nearest key for a misspelt one), no banner, no result file.
        for param, words in self.RANDOM_MIX_PARAMS:
            with self.subTest(param):
                line = self.refused(["run", "--scenario", "random_mix", "--param", param, "--allocator", "caching,bfc",
                                     "--device", "sim", "--min-time", "0", "--out", "out.json"], [])
                self.assertIn(b"--param", line)
                self.assertIn(words, line)

    PYTORCH_CONFS = [("roundup_power2_divisions:[256:1", b"roundup_power2_divisions has no closing ']'"),
                     ("expandable_segment:True", b"did you mean expandable_segments?"),
                     ("backend:cudaMallocAsyn", b"backend:cudaMallocAsyn (native or cudaMallocAsync")]

    def test_a_bad_pytorch_alloc_conf_is_named_as_the_option_given(self):
        # It was refused as "allocator list 'pytorch[...]'", which the user never wrote.
        self.write("t.trace", V + b"a 1 4096\nf 1\n")
        for conf, words in self.PYTORCH_CONFS:
            for command in (["run", "--scenario", "views", "--device", "sim"], ["replay", "t.trace", "--device", "sim"],
                            ["explain", "t.trace", "--capacity", "1GiB"]):
                with self.subTest(conf=conf, command=command[0]):
                    line = self.refused([*command, "--pytorch-alloc-conf", conf, "--quiet", "--out", "out.json"],
                                        ["t.trace"])
                    self.assertTrue(line.startswith(b"vrambench: error: %s: --pytorch-alloc-conf '%s': "
                                                    % (command[0].encode(), conf.encode())), line)
                    self.assertIn(words, line)
                    self.assertNotIn(b"allocator list", line)

    def test_bad_run_options(self):
        for option in self.RUN_OPTIONS:
            with self.subTest(option):
                arguments = ["run", "--scenario", "views", "--allocator", "caching", "--device", "sim", "--quiet",
                             "--out", "out.json"]
                if option[0] in ("--scenario", "--device"):
                    arguments[arguments.index(option[0]) + 1] = option[1]
                else:
                    arguments += option
                self.refused(arguments, [])

    def test_a_capacity_under_2_mib_is_refused_by_explain_as_by_tune(self):
        # explain took any capacity from 1 byte and explained an OOM "under 0.0 MiB".
        self.write("t.trace", V + b"a 1 4096\nf 1\n")
        for capacity in ("12", "1.0", "1MiB", "2097151"):
            for command in (["explain", "t.trace", "--allocator", "bfc"], ["explain", "t.trace"], ["tune", "t.trace"]):
                with self.subTest(capacity=capacity, command=command):
                    line = self.refused([*command, "--capacity", capacity, "--quiet", "--out", "out.json"],
                                        ["t.trace"])
                    self.assertIn(b"is below 2 MiB, the driver's smallest allocation", line)

    def test_an_uncompressed_output_named_gz_is_refused(self):
        # A snapshot pickle and a report page are written as they are: a
        # name ending in .gz got plain bytes under a name that says gzip.
        self.write("t.trace", V + b"a 1 4096\nf 1\n")
        self.write("r.json", b"{}")
        for arguments, out in ((["replay", "t.trace", "--allocator", "caching", "--device", "sim", "--quiet",
                                 "--snapshot", "s.pickle.gz"], "s.pickle.gz"),
                               (["explain", "t.trace", "--capacity", "1G", "--quiet", "--snapshot", "s.pickle.gz"],
                                "s.pickle.gz"),
                               (["report", "r.json", "-o", "page.html.gz"], "page.html.gz")):
            with self.subTest(arguments[0]):
                line = self.refused(arguments, ["t.trace", "r.json"], out=out)
                self.assertIn(b"is written uncompressed", line)

    def test_a_misspelt_device_names_the_nearest(self):
        # The device kind was the one name of the command line without a "did you mean".
        self.write("t.trace", V + b"a 1 4096\nf 1\n")
        for command in (["run", "--scenario", "views", "--min-time", "0"], ["replay", "t.trace"], ["tune", "t.trace"],
                        ["claims", "--claim", "view_keeps_storage"], ["microbench"]):
            with self.subTest(command[0]):
                line = self.refused([*command, "--device", "simm", "--quiet", "--out", "out.json"], ["t.trace"])
                self.assertIn(b"'simm'", line)
                self.assertIn(b"did you mean sim?", line)

    def test_capacities_past_the_simulated_device_are_refused_naming_its_limit(self):
        # Above 56 TiB the sim cannot hold a reservation of expandable segments,
        # and far above, its pool's tables outgrow host memory: refused before
        # any work, the limit named, whatever the allocator.
        self.write("t.trace", V + b"a 1 1048576\nf 1\n")
        for arguments in (
                ["run", "--scenario", "views", "--allocator", "expandable", "--device", "sim", "--min-time", "0",
                 "--sim-capacity", "57TiB", "--quiet", "--out", "out.json"],
                ["replay", "t.trace", "--device", "sim", "--allocator", "async", "--sim-capacity",
                 str(1 << 60), "--quiet", "--out", "out.json"],
                ["replay", "t.trace", "--device", "sim", "--sim-capacity", "18446744073709551615", "--quiet",
                 "--out", "out.json"],
                ["tune", "t.trace", "--capacity", "64TiB", "--quiet", "--out", "out.json"],
                ["tune", "t.trace", "--capacity", "40TiB", "--quiet", "--out", "out.json"]):
            with self.subTest(arguments[arguments.index("t.trace") if "t.trace" in arguments else 0]):
                line = self.refused(arguments, ["t.trace"])
                # tune replays a limit on a device twice its size: its own most is half the sim's
                self.assertIn(b"more than 28TiB" if arguments[0] == "tune" else b"at most 56TiB", line)

    # --events 1 wrote a trace of no event (its allocation would have no free), exit 0.
    GEN_TRACE_OPTIONS = [["--events", "-1"], ["--events", "1e9"], ["--events", "0"], ["--events", "1"],
                         ["--max-size", "0"], ["--max-size", "1Q"], ["--max-live", "1"],
                         ["--seed", "18446744073709551616"], ["--events"]]

    def test_bad_gen_trace_options(self):
        for option in self.GEN_TRACE_OPTIONS:
            with self.subTest(option):
                base = {"--events": "10", "--max-size": "1K", "--max-live": "1M", "--seed": "1"}
                if len(option) == 2:
                    base[option[0]] = option[1]
                arguments = ["gen-trace", "random"] + [x for pair in base.items() for x in pair] + ["-o", "t.trace"]
                if len(option) == 1:
                    arguments = ["gen-trace", "random", "-o", "t.trace", *option]
                self.refused(arguments, [], out="t.trace")

    def test_an_odd_event_count_is_said_with_the_count_written(self):
        with tempfile.TemporaryDirectory() as directory:
            out = os.path.join(directory, "t.trace")
            done = subprocess.run([VRAMBENCH, "gen-trace", "random", "--events", "11", "--max-size", "1K",
                                   "--max-live", "1M", "-o", out], capture_output=True, text=True, timeout=60)
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(out) as f:
                events = [line for line in f if line[:1] in ("a", "f")]
            self.assertEqual(len(events), 10)
            self.assertIn("10 events, one fewer than --events", done.stderr)

    def test_a_gen_trace_too_big_for_its_disk_is_refused_before_writing(self):
        # 1e12 events are ~17 TiB of text (~2 TiB gzip'd at the least): more
        # than the test's disk has free, so refused up front, both sizes named.
        # A 1 MiB file-size limit stops a gen-trace that would write it anyway.
        free = os.statvfs(self.directory.name)
        if free.f_bavail * free.f_frsize > 1 << 40:
            self.skipTest("over 1 TiB free: a 1e12-event trace might fit")
        for out in ("t.trace", "t.trace.gz"):
            with self.subTest(out):
                line = self.refused(["gen-trace", "random", "--events", "1000000000000", "--max-size", "64M",
                                     "--max-live", "8G", "-o", out], [], out=out, preexec_fn=small_disk)
                self.assertIn(b"1000000000000 events need about ", line)
                self.assertIn(b"TiB", line)
                self.assertIn(b"of '%s' has " % out.encode(), line)

    def test_gen_trace_events_past_1e12_are_refused_naming_the_most(self):
        for events in ("1000000000001", "99999999999999", "18446744073709551615"):
            with self.subTest(events):
                line = self.refused(["gen-trace", "random", "--events", events, "--max-size", "1K",
                                     "--max-live", "1M", "-o", "t.trace"], [], out="t.trace", preexec_fn=small_disk)
                self.assertIn(b"bad --events '%s' (a whole number, 2 to 1e12)" % events.encode(), line)

    def measurements(self, timeline=None, counters=None, **entry):
        step = {"step": "start", "requested": 0, "allocated": 0, "reserved": 0, "driver_used": 0}
        measurement = {"scenario": "release_specific", "allocator": "pytorch",
                       "timeline": [step] if timeline is None else timeline,
                       "counters": {} if counters is None else counters}
        measurement.update(entry)
        return ('{"context": {"device_name": "NVIDIA H200"}, "measurements": [%s]}' % (
            __import__("json").dumps(measurement))).encode()

    def json_cases(self):
        step = lambda **fields: [dict({"step": "s", "requested": 0, "allocated": 0, "reserved": 0,
                                       "driver_used": 0}, **fields)]
        return [
            ("empty", b""),
            ("truncated", b'{"context": {"device_name": "x"}, "measurements": ['),
            ("an array", b"[]"),
            ("no device name", b'{"context": {}, "measurements": []}'),
            ("measurements an object", b'{"context": {"device_name": "x"}, "measurements": {}}'),
            ("measurement without scenario", b'{"context": {"device_name": "x"}, "measurements": [{}]}'),
            ("timeline not an array", self.measurements(timeline={})),
            ("step without a name", self.measurements(timeline=[{"requested": 0}])),
            ("negative bytes", self.measurements(timeline=step(requested=-1))),
            ("bytes 1e30", self.measurements(timeline=step(reserved=1e30))),
            ("bytes 2^64", self.measurements(timeline=step(allocated=18446744073709551616.0))),
            ("bytes a string", self.measurements(timeline=step(driver_used="5"))),
            ("counters an array", self.measurements(counters=[])),
            ("counter a string", self.measurements(counters={"x": "1"})),
            ("BOM", b"\xef\xbb\xbf{}"),
            ("invalid UTF-8", b'{"context": {"device_name": "\xff"}, "measurements": []}'),
            ("NaN", b'{"context": {"device_name": "x"}, "measurements": [NaN]}'),
            ("deep nesting", b"[" * 100000 + b"]" * 100000),
            ("number 1e999", b'{"context": {"device_name": "x"}, "measurements": [1e999]}'),
            ("binary junk", junk(4, 300)),
            ("NUL inside", b'{"context": {"device_name": "a\x00b"}}'),
        ]

    def test_bad_pytorch_measurement_files(self):
        for name, data in self.json_cases():
            with self.subTest(name):
                self.write("m.json", data)
                self.refused(["claims", "--pytorch", "m.json", "--allocator", "caching", "--device", "sim",
                              "--quiet", "--out", "out.json"], ["m.json"])

    def test_unusable_outputs_are_refused_before_any_work(self):
        self.write("kept.json", b"old")
        os.symlink("kept.json", self.path("link.json"))
        os.mkfifo(self.path("fifo.json"))
        os.mkdir(self.path("dir.json"))
        existing = ["kept.json", "link.json", "fifo.json", "dir.json"]
        for out in ["link.json", "fifo.json", "dir.json", "/dev/null", "/dev/full", "missing/out.json", "x" * 256,
                    ""]:
            with self.subTest(out):
                for command in (["run", "--scenario", "views", "--allocator", "caching", "--min-time", "0"],
                                ["claims", "--allocator", "caching"], ["microbench", "--allocator", "cuda"]):
                    self.refused([*command, "--device", "sim", "--quiet", "--out", out], existing, out="kept.json")
                self.refused(["gen-trace", "random", "--events", "10", "--max-size", "1K", "--max-live", "1M",
                              "-o", out], existing, out="kept.json")
        with open(self.path("kept.json"), "rb") as file:
            self.assertEqual(file.read(), b"old")

    def test_extra_words_after_version_or_help_are_refused(self):
        for arguments in (["--version", "extra"], ["--help", "x"], ["-h", "x"], ["help", "replay", "x"]):
            with self.subTest(arguments):
                self.assertIn(b"'x" if arguments[-1] == "x" else b"'extra'", self.refused(arguments, []))

    def test_a_misspelt_top_level_option_is_offered_the_nearest(self):
        self.assertIn(b"unknown option '--verison'; did you mean --version?", self.refused(["--verison"], []))
        self.assertIn(b"did you mean --help?", self.refused(["--hepl"], []))

    def test_a_second_value_for_a_single_value_option_is_refused(self):
        trace = self.write("t.trace", V + b"a 1 4096\nf 1\n")
        self.write("r.json", b"{}")
        inputs = ["t.trace", "r.json"]
        for arguments, option in (
                (["replay", trace, "--out", "a.json", "--out", "b.json"], b"--out given twice"),
                (["replay", trace, "--snapshot", "a.pickle", "--snapshot=b.pickle"], b"--snapshot given twice"),
                (["run", "--allocator", "caching", "--allocator", "bfc"], b"--allocator given twice"),
                (["run", "--param", "1", "--param", "2"], b"--param given twice"),
                (["tune", trace, "--out", "a.json", "--out=b.json"], b"--out given twice"),
                (["explain", trace, "--capacity", "4M", "--capacity", "8M"], b"--capacity given twice"),
                (["gen-trace", "random", "--seed", "1", "--seed", "2"], b"--seed given twice"),
                (["merge", "r.json", "-o", "a.json", "-o", "b.json"], b"-o/--out given twice"),
                (["report", "r.json", "--out", "a.html", "-o", "b.html"], b"-o/--out given twice"),
                (["check-sim", "--differences", "a", "--differences", "b", "r.json"], b"--differences given twice")):
            with self.subTest(arguments):
                self.assertIn(option, self.refused(arguments, inputs, out="a.json"))

    @classmethod
    def tearDownClass(cls):
        print(f"\nbad inputs: {cls.cases_run} refused as they should be", end=" ")


class EdgeInputTest(unittest.TestCase):
    """Inputs that are unusual but valid: they must work."""

    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.addCleanup(self.directory.cleanup)
        self.environment = dict(os.environ, TMPDIR=self.directory.name)

    def replay(self, trace, data=None):
        return subprocess.run([VRAMBENCH, "replay", trace, "--device", "sim", "--allocator", "caching,bfc",
                               "--quiet", "--out", b"out.json"], input=data, capture_output=True,
                              env=self.environment, cwd=self.directory.name, timeout=120)

    def test_a_gzip_trace_on_stdin_replays_for_every_allocator(self):
        result = self.replay("/dev/stdin", gz(V + b"a 1 4096\nm step\nf 1\n"))
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(os.path.join(self.directory.name, "out.json")) as file:
            document = __import__("json").load(file)
        iterations = [b for b in document["benchmarks"] if b["run_type"] == "iteration"]
        self.assertEqual(len(iterations), 2)
        for benchmark in iterations:
            self.assertEqual(benchmark["events"], 2)
        self.assertEqual(sorted(os.listdir(self.directory.name)), ["out.json"])

    def test_a_trace_name_that_is_not_utf8_is_escaped_in_the_results(self):
        name = b"t\xff\x01.trace"
        with open(os.path.join(self.directory.name.encode(), name), "wb") as file:
            file.write(V + b"a 1 4096\nf 1\n")
        result = self.replay(name)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(os.path.join(self.directory.name, "out.json"), encoding="utf-8") as file:
            document = __import__("json").load(file)
        self.assertEqual(document["benchmarks"][0]["scenario"], "replay:t??.trace")

    def test_a_vb_git_commit_with_a_newline_gives_a_results_file_vrambench_can_read(self):
        environment = dict(self.environment, VB_GIT_COMMIT="0123abcd\nsecond line\r")
        made = subprocess.run([VRAMBENCH, "run", "--device", "sim", "--scenario", "views", "--allocator", "caching",
                               "--quiet", "--out", "run.json"], capture_output=True, env=environment,
                              cwd=self.directory.name, timeout=120)
        self.assertEqual(made.returncode, 0, made.stderr)
        with open(os.path.join(self.directory.name, "run.json")) as file:
            self.assertEqual(__import__("json").load(file)["context"]["git_commit"], "0123abcd")
        page = subprocess.run([VRAMBENCH, "report", "run.json", "--out", "page.html", "--no-plots"],
                              capture_output=True, env=environment, cwd=self.directory.name, timeout=120)
        self.assertEqual(page.returncode, 0, page.stderr)

    def test_the_commit_a_result_names_is_the_binarys_not_the_current_folders(self):
        # Run from inside another git repository, a result named that
        # repository's HEAD; from a folder outside git, "unknown".
        environment = {k: v for k, v in self.environment.items() if k != "VB_GIT_COMMIT"}
        version = subprocess.run([VRAMBENCH, "--version"], capture_output=True, text=True, env=environment, timeout=60)
        built = [line.split(": ", 1)[1] for line in version.stdout.splitlines() if line.startswith("commit: ")][0]
        other = os.path.join(self.directory.name, "other")
        os.mkdir(other)
        made = subprocess.run(["git", "init", "-q", other], capture_output=True, timeout=60)
        if made.returncode == 0:  # a HEAD of its own, which the old code named
            made = subprocess.run(["git", "-C", other, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                                   "--allow-empty", "-m", "other"], capture_output=True, timeout=60)
        if made.returncode != 0:
            self.skipTest("no git to make another repository with")
        for folder in (other, self.directory.name):
            with self.subTest(folder=folder):
                made = subprocess.run([VRAMBENCH, "run", "--device", "sim", "--scenario", "views", "--allocator", "cuda",
                                       "--quiet", "--out", "run.json", "--force"], capture_output=True,
                                      env=environment, cwd=folder, timeout=120)
                self.assertEqual(made.returncode, 0, made.stderr)
                with open(os.path.join(folder, "run.json")) as file:
                    self.assertEqual(__import__("json").load(file)["context"]["git_commit"], built)

    def test_a_repeatable_option_adds_each_value(self):
        result = subprocess.run([VRAMBENCH, "run", "--device", "sim", "--scenario", "views", "--allocator", "caching",
                                 "--config", "caching.max_split_size_mb=256", "--config",
                                 "caching.roundup_power2_divisions=4", "--min-time", "0", "--quiet", "--out",
                                 "run.json"], capture_output=True, env=self.environment, cwd=self.directory.name,
                                timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(os.path.join(self.directory.name, "run.json")) as file:
            text = file.read()
        self.assertIn("max_split_size_mb", text)
        self.assertIn("roundup_power2_divisions", text)

    def test_after_a_double_dash_a_file_named_like_an_option_is_read(self):
        with open(os.path.join(self.directory.name, "-x"), "wb") as file:
            file.write(V + b"a 1 4096\nf 1\n")
        # Output names that start with '-' are refused (an option that lost its value): ./-r.json is written.
        for command in (["replay", "--device", "sim", "--allocator", "caching", "--quiet", "--out", "./-r.json", "--",
                         "-x"], ["merge", "--quiet", "-o", "m.json", "--", "-r.json"],
                        ["compare", "--pair", "caching=caching", "--", "-r.json"]):
            with self.subTest(command[0]):
                result = subprocess.run([VRAMBENCH, *command], capture_output=True, env=self.environment,
                                        cwd=self.directory.name, timeout=120)
                self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(sorted(os.listdir(self.directory.name)), ["-r.json", "-x", "m.json"])

    def test_a_command_whose_stdout_cannot_be_written_fails_with_one_error_line(self):
        # /dev/full fails every write (ENOSPC); a closed stdout fails them too (EBADF).
        def closed_stdout():
            os.close(1)

        trace = os.path.join(self.directory.name, "t.trace")
        with open(trace, "wb") as file:
            file.write(V + b"a 1 4096\nm step\nf 1\n")
        made = subprocess.run([VRAMBENCH, "run", "--device", "sim", "--scenario", "views", "--allocator", "caching",
                               "--min-time", "0", "--quiet", "--out", "r.json"], capture_output=True,
                              env=self.environment, cwd=self.directory.name, timeout=120)
        self.assertEqual(made.returncode, 0, made.stderr)
        with open(os.path.join(self.directory.name, "r.json")) as file:
            gpu = json.load(file)
        gpu["context"]["simulated"] = False  # check-sim re-runs a GPU's result (a sim's alone: nothing checked, exit 2)
        with open(os.path.join(self.directory.name, "gpu.json"), "w") as file:
            json.dump(gpu, file)
        commands = [["compare", "r.json", "--pair", "caching=caching", "--json"],
                    ["compare", "r.json", "--pair", "caching=caching"],
                    ["replay", trace, "--device", "sim", "--allocator", "caching"],
                    ["tune", trace, "--device", "sim"], ["explain", trace, "--capacity", "4M"],
                    ["check-sim", "gpu.json"], ["list", "allocators"], ["list", "scenarios"],
                    ["list", "names", "--json"], ["--help"], ["--version"], ["help", "replay"],
                    ["replay", "--help"], ["compare", "--help"], ["merge", "--help"]]
        for command in commands:
            for name, stdout, preexec_fn in (("/dev/full", open(os.devnull.replace("null", "full"), "wb"), None),
                                              ("closed", None, closed_stdout)):
                with self.subTest(command=command, stdout=name):
                    result = subprocess.run([VRAMBENCH, *command], stdout=stdout, stderr=subprocess.PIPE,
                                            env=self.environment, cwd=self.directory.name, timeout=120,
                                            preexec_fn=preexec_fn)
                    if stdout:
                        stdout.close()
                    self.assertEqual(result.returncode, 1, result.stderr)
                    self.assertEqual(result.stderr.count(b"vrambench: error: "), 1, result.stderr)
                    # The reason is kept, whatever flushed last (a command's own flush mid-way, or main's).
                    reason = b"No space left on device" if name == "/dev/full" else b"Bad file descriptor"
                    self.assertIn(b"cannot write to standard output: " + reason, result.stderr)
        self.assertEqual(sorted(os.listdir(self.directory.name)), ["gpu.json", "r.json", "t.trace"])

    def test_a_full_disk_fails_with_exit_1_and_keeps_the_old_file(self):
        # RLIMIT_FSIZE makes every write past 512 bytes fail (EFBIG, SIGXFSZ
        # ignored) as a full disk would (ENOSPC): the same failed write().
        import resource
        import signal

        def small_disk():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))

        old = os.path.join(self.directory.name, "old.json")
        for command in (["run", "--scenario", "views", "--allocator", "caching", "--min-time", "0", "--out", old],
                        ["gen-trace", "random", "--events", "100000", "--max-size", "1K", "--max-live", "1M", "-o",
                         old]):
            with self.subTest(command[0]):
                with open(old, "w") as file:
                    file.write("old")
                result = subprocess.run([VRAMBENCH, *command, "--device" if command[0] == "run" else "--seed",
                                         "sim" if command[0] == "run" else "1"], capture_output=True,
                                        env=self.environment, cwd=self.directory.name, timeout=120,
                                        preexec_fn=small_disk)
                self.assertEqual(result.returncode, 1, result.stderr)
                self.assertEqual(result.stderr.count(b"vrambench: error: "), 1, result.stderr)
                with open(old) as file:
                    self.assertEqual(file.read(), "old")
                self.assertEqual(os.listdir(self.directory.name), ["old.json"])


if __name__ == "__main__":
    unittest.main()
