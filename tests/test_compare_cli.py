"""`vrambench compare`: pairing across files and across allocators of one
file, exact memory figures, times only between files of one GPU model,
--fail-on's exit status, --json, and one clear line for bad input. Runs the
real binary ($VRAMBENCH, else build/vrambench) on small sim runs and on the
committed results."""

import copy
import gzip
import json
import os
import subprocess
import sys
import tempfile
import unittest

from cli_support import CLAIMS, MICROBENCH, RESULTS, ROOT, load, vrambench

# Fields of an iteration entry that break the one rule of docs/results-json.md ("Readers"):
# (field, value, words of the error). Every reader refuses each in one line naming the file,
# the entry and the field.
BAD_FIELDS = [
    ("peak_reserved_bytes", "big", "is a string, not a number (a byte count)"),
    ("peak_reserved_bytes", 1.5, "is 1.5, not a whole number (a byte count)"),
    ("peak_allocated_bytes", -4096, "(it is negative)"),
    ("ooms", True, "is true or false, not a number (a count)"),
    ("driver_alloc_calls", 2.5, "not a whole number (a count)"),
    ("events", [3], "is a list, not a number (a count)"),
    ("real_time", -1, "'real_time' is not a number from 0 to below 2^64 (it is negative)"),
    ("cpu_time", "fast", "is a string, not a number"),
    ("overhead_ratio", {"x": 1}, "is an object, not a number"),
    ("malloc_ns_p50", False, "is true or false, not a number"),
    ("kernel_in_flight_at_dispatch", "3", "is a string, not a number"),
]
# Values of the same fields that every reader takes: a whole byte count written as a real, null
# (an absent figure), a flag in a field of no kind.
GOOD_FIELDS = [("peak_reserved_bytes", 4096.0), ("ooms", None), ("real_time", 0), ("some_flag", True)]

GZ_REPLAY = os.path.join(RESULTS, "stitch-ranges-nvidia-h100-80gb-hbm3-20261123",
                         "stitch-replay-random-4m-nvidia-h100-80gb-hbm3-20261123.json.gz")


class CompareTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.a = os.path.join(cls.tmp.name, "a.json")
        status, _, err = vrambench("run", "--scenario", "views,function_scope,random_mix", "--allocator",
                                   "cuda,caching,expandable", "--device", "sim", "--min-time", "0", "--quiet",
                                   "--out", cls.a)
        assert status == 0, err
        cls.doc = load(cls.a)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def write(self, name, document):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as stream:
            json.dump(document, stream)
        return path

    def changed(self, name, case, key, delta, context=None):
        """A copy of a.json with `key` of `case`'s entries changed by delta."""
        document = copy.deepcopy(self.doc)
        for entry in document["benchmarks"]:
            if entry["name"] == case:
                entry[key] += delta
        document["context"].update(context or {})
        return self.write(name, document)

    def assert_one_error(self, status, out, err, *words):
        self.assertEqual(status, 2, err)
        self.assertEqual(out, "")
        lines = err.strip().splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertTrue(lines[0].startswith("vrambench: error: "), err)
        for word in words:
            self.assertIn(word, lines[0])

    def test_a_rise_of_one_byte_is_a_regression_only_when_asked(self):
        b = self.changed("b.json", "random_mix/caching", "peak_reserved_bytes", 1)
        status, out, err = vrambench("compare", self.a, b)
        self.assertEqual(status, 0, err)
        self.assertIn("+1 B", out)  # exact: a byte shows though the MiB do not change
        status, out, err = vrambench("compare", self.a, b, "--fail-on", "reserved:+0%")
        self.assertEqual(status, 1, err)
        self.assertIn("regression", err)
        status, _, err = vrambench("compare", self.a, b, "--fail-on", "reserved:+1%", "--fail-on", "ooms:+0%")
        self.assertEqual(status, 0, err)
        status, out, _ = vrambench("compare", self.a, b, "--json")
        pairs = json.loads(out)[0]["pairs"]
        reserved = {p["a"]: p["metrics"]["reserved"] for p in pairs}
        self.assertTrue(reserved["random_mix/caching"]["differs"])
        self.assertEqual(reserved["random_mix/caching"]["b"] - reserved["random_mix/caching"]["a"], 1)
        self.assertFalse(reserved["views/caching"]["differs"])

    def test_fail_on_does_not_pass_what_it_cannot_compare(self):
        # A figure one side lacks, or a case B lacks, was "no regression", exit 0.
        lacking = copy.deepcopy(self.doc)
        for entry in lacking["benchmarks"]:
            if entry["name"] == "views/caching":
                del entry["peak_reserved_bytes"]
        lacking = self.write("lacking.json", lacking)
        for a, b in ((self.a, lacking), (lacking, self.a)):
            status, out, err = vrambench("compare", a, b, "--fail-on", "reserved:+0%")
            self.assertEqual(status, 1, out + err)
            self.assertIn("(not compared) !", out)
            status, out, _ = vrambench("compare", a, b, "--fail-on", "reserved:+0%", "--json")
            reserved = {p["a"]: p["metrics"]["reserved"] for p in json.loads(out)[0]["pairs"]}
            self.assertTrue(reserved["views/caching"]["regression"])
            self.assertEqual(json.loads(out)[0]["regressions"], 1)
        status, _, err = vrambench("compare", self.a, lacking, "--fail-on", "allocated:+0%")
        self.assertEqual(status, 0, err)  # a metric not asked for gates nothing
        fewer = copy.deepcopy(self.doc)
        fewer["benchmarks"] = [e for e in fewer["benchmarks"] if e["name"] != "random_mix/expandable"]
        fewer = self.write("fewer-gated.json", fewer)
        status, out, err = vrambench("compare", self.a, fewer, "--fail-on", "reserved:+5%")
        self.assertEqual(status, 1, out + err)
        self.assertIn("only in A: random_mix/expandable (not compared: a regression under --fail-on)", out)
        status, _, err = vrambench("compare", fewer, self.a, "--fail-on", "reserved:+5%")
        self.assertEqual(status, 0, err)  # a case B adds is new, not a regression
        status, _, err = vrambench("compare", self.a, fewer)
        self.assertEqual(status, 0, err)  # without --fail-on nothing gates

    def test_a_fall_is_no_regression(self):
        b = self.changed("fall.json", "views/cuda", "driver_alloc_calls", -1)
        status, _, err = vrambench("compare", self.a, b, "--fail-on", "driver_calls:+0%")
        self.assertEqual(status, 0, err)

    def test_times_only_between_files_of_one_gpu_model(self):
        status, out, _ = vrambench("compare", self.a, self.a)
        self.assertEqual(status, 0)
        self.assertNotIn("time/iter", out)
        self.assertIn("times not compared: both sides are from the simulated device", out)
        gpu = {"simulated": False, "device_name": "NVIDIA H100 80GB HBM3", "device_kind": "cuda"}
        g1 = self.changed("g1.json", "views/cuda", "real_time", 0, gpu)
        g2 = self.changed("g2.json", "views/cuda", "real_time", 1e9, gpu)
        status, out, err = vrambench("compare", g1, g2, "--fail-on", "time:+50%")
        self.assertEqual(status, 1, out + err)
        self.assertIn("time/iter", out)
        status, out, err = vrambench("compare", g1, self.a, "--fail-on", "time:+0%")
        self.assertEqual(status, 0, err)
        self.assertNotIn("time/iter", out)
        self.assertIn("a simulated time is never compared with a GPU time", out)
        other = self.changed("g3.json", "views/cuda", "real_time", 1e9, dict(gpu, device_name="NVIDIA A100"))
        status, out, _ = vrambench("compare", g1, other, "--json")
        self.assertEqual(status, 0)
        result = json.loads(out)[0]
        self.assertFalse(result["times_compared"])
        self.assertIn("same GPU model", result["times_note"])

    def test_pair_allocators_of_one_file(self):
        status, out, err = vrambench("compare", self.a, "--pair", "caching=expandable", "--json")
        self.assertEqual(status, 0, err)
        pairs = json.loads(out)[0]["pairs"]
        self.assertEqual([(p["a"], p["b"]) for p in pairs],
                         [(f"{s}/caching", f"{s}/expandable") for s in ("views", "function_scope", "random_mix")])
        status, out, err = vrambench("compare", self.a, "--pair", "caching=expandable")
        self.assertIn("views/caching vs expandable", out)

    def test_unpaired_cases_are_listed(self):
        document = copy.deepcopy(self.doc)
        document["benchmarks"] = [e for e in document["benchmarks"] if e["name"] != "views/bfc" and
                                  e["name"] != "views/expandable"]
        b = self.write("fewer.json", document)
        status, out, _ = vrambench("compare", self.a, b)
        self.assertEqual(status, 0)
        self.assertIn("unpaired, only in A: views/expandable", out)

    def test_other_kinds(self):
        for path in (CLAIMS, MICROBENCH, GZ_REPLAY):
            status, out, err = vrambench("compare", path, path)
            self.assertEqual(status, 0, err)
            self.assertIn("cases paired", out)
        claims = load(CLAIMS)
        claims["claims"][0]["verdict"] = "holds" if claims["claims"][0]["verdict"] != "holds" else "depends"
        changed = self.write("claims.json", claims)
        status, _, err = vrambench("compare", CLAIMS, changed, "--fail-on", "verdict")
        self.assertEqual(status, 1, err)
        status, _, err = vrambench("compare", CLAIMS, changed)
        self.assertEqual(status, 0, err)

    def test_bad_input_is_one_line(self):
        truncated = os.path.join(self.tmp.name, "truncated.json")
        with open(self.a) as stream, open(truncated, "w") as out:
            out.write(stream.read()[:500])
        broken_gz = os.path.join(self.tmp.name, "broken.json.gz")
        with open(broken_gz, "wb") as out:
            out.write(gzip.compress(b'{"context": {}, "benchmarks": [')[:-6])
        not_number = copy.deepcopy(self.doc)
        not_number["benchmarks"][0]["peak_reserved_bytes"] = "lots"
        bad_number = self.write("text.json", not_number)
        cases = [
            ((self.a, CLAIMS), ("compare files of one kind",)),
            ((self.a, truncated), ("truncated.json", "not JSON")),
            ((self.a, broken_gz), ("broken.json.gz",)),
            ((self.a, os.path.join(self.tmp.name, "missing.json")), ("missing.json",)),
            ((self.a, self.tmp.name), ("cannot read",)),
            ((self.a, bad_number), ("peak_reserved_bytes", "not a number")),
            ((self.a,), ("two files",)),
            ((self.a, "--pair", "caching=expandabel"), ("expandabel", "did you mean 'expandable'")),
            ((self.a, "--pair", "caching"), ("--pair",)),
            ((self.a, self.a, "--fail-on", "reservd:+5%"), ("reservd", "did you mean 'reserved'")),
            ((self.a, self.a, "--fail-on", "reserved:lots"), ("reserved:lots",)),
            ((self.a, self.a, "--fail-on", "reserved:0x10%"), ("reserved:0x10%",)),
            ((self.a, self.a, "--fail-on", "reserved:inf%"), ("reserved:inf%",)),
            ((self.a, self.a, "--fail-on", "pair_p50:+5%"), ("pair_p50", "for run files")),
            # two thresholds of one metric: the second silently won
            ((self.a, self.a, "--fail-on", "allocated:+1%", "--fail-on", "allocated:+50%"),
             ("--fail-on allocated given twice",)),
            ((self.a, self.a, "--frobnicate"), ("--frobnicate",)),
        ]
        for args, words in cases:
            with self.subTest(args=args):
                self.assert_one_error(*vrambench("compare", *args), *words)

    def test_every_reader_refuses_a_malformed_timeline_scenario_or_names_with_the_same_line(self):
        # One rule for every reader (docs/results-json.md, "Readers"): compare
        # and merge took these, which report refused; a timeline that was no
        # list was named "not a number" by both.
        def edited(change):
            document = copy.deepcopy(self.doc)
            change(document, [e for e in document["benchmarks"] if e.get("run_type") == "iteration"][0])
            return document
        cases = [("timeline-text.json", edited(lambda d, e: e.update(timeline="x")), "'timeline' is not a list"),
                 ("timeline-step.json", edited(lambda d, e: e.update(timeline=[{"step": 1}])),
                  "timeline[0]: 'step' is not a string"),
                 ("timeline-bytes.json", edited(lambda d, e: e.update(timeline=[{"step": "s", "requested": -1,
                                                                                   "reserved": 0}])),
                  "timeline[0] has no 'requested' byte count"),
                 ("scenario-null.json", edited(lambda d, e: e.update(scenario=None)), "'scenario' is not a string"),
                 ("no-allocator.json", edited(lambda d, e: e.pop("allocator")), "'allocator' is not a string"),
                 ("names-text.json", edited(lambda d, e: d.update(names="x")), "'names' is not an object")]
        out, page = os.path.join(self.tmp.name, "merged.json"), os.path.join(self.tmp.name, "page.html")
        for name, document, words in cases:
            bad = self.write(name, document)
            with self.subTest(name):
                lines = []
                for command in (["compare", bad, self.a], ["merge", bad, "-o", out],
                                ["report", bad, "-o", page, "--no-plots"]):
                    status, stdout, err = vrambench(*command)
                    self.assertEqual(status, 2, (command, err))
                    self.assertEqual(len(err.strip().splitlines()), 1, (command, err))
                    self.assertIn(words, err, command)
                    lines.append(err.strip())
                self.assertEqual(len(set(lines)), 1, lines)
                self.assertFalse(os.path.exists(out) or os.path.exists(page))

    def test_a_file_that_parses_but_is_refused_is_one_line_and_frees_what_it_read(self):
        # JSON that parses, then fails a later check, after a good file: one
        # line, exit 2, and (under SANITIZER=address) no leak report of the
        # half-read file.
        no_name = copy.deepcopy(self.doc)
        del no_name["benchmarks"][-1]["name"]
        bad_unit = copy.deepcopy(self.doc)
        bad_unit["benchmarks"][-1]["time_unit"] = "fortnights"
        cases = [("context.json", {"context": True, "benchmarks": []}, "not a vrambench results file"),
                 ("device.json", {"context": {"device_name": 5}, "benchmarks": []}, "device_name"),
                 ("no_name.json", no_name, "is not an entry with a name"),
                 ("bad_unit.json", bad_unit, "unknown time_unit")]
        out = os.path.join(self.tmp.name, "merged.json")
        for name, document, words in cases:
            bad = self.write(name, document)
            with self.subTest(name):
                self.assert_one_error(*vrambench("compare", self.a, bad), words)
                self.assert_one_error(*vrambench("merge", self.a, bad, "-o", out), words)
                self.assertFalse(os.path.exists(out))

    def test_a_case_found_twice_in_one_file_is_refused_by_every_reader(self):
        # A case is (name, run_type/aggregate_name, repetition_index): one
        # file holding it twice has no one value to compare, merge, check or
        # show. Every reader, the C ones and the report's, refuses it in one
        # line naming the file and the case; repetitions and aggregates (a
        # run with --repetitions) still read.
        repeated = os.path.join(self.tmp.name, "repeated.json")
        status, _, err = vrambench("run", "--scenario", "views", "--allocator", "cuda,caching", "--device", "sim",
                                   "--min-time", "0", "--repetitions", "2", "--quiet", "--out", repeated)
        self.assertEqual(status, 0, err)
        with_aggregates = load(repeated)
        aggregates = [e for e in with_aggregates["benchmarks"] if e.get("run_type") == "aggregate"]
        self.assertTrue(aggregates, "a run with --repetitions 2 wrote no aggregate entry")
        twice = copy.deepcopy(self.doc)
        again = copy.deepcopy(twice["benchmarks"][0])
        again["peak_reserved_bytes"] *= 1000
        twice["benchmarks"].append(again)
        aggregate_twice = copy.deepcopy(with_aggregates)
        aggregate_twice["benchmarks"].append(copy.deepcopy(aggregates[0]))
        other_statistic = copy.deepcopy(with_aggregates)  # the same name, another statistic: another case
        other_statistic["benchmarks"].append(dict(copy.deepcopy(aggregates[0]), aggregate_name="other"))
        out = os.path.join(self.tmp.name, "merged.json")
        for label, document, case in [("iteration", twice, f"'{again['name']}' (repetition 0)"),
                                      ("aggregate", aggregate_twice,
                                       f"'{aggregates[0]['name']}' (aggregate '{aggregates[0]['aggregate_name']}')")]:
            for reader in ("compare", "merge", "check-sim", "report"):
                with self.subTest(label=label, reader=reader):
                    document["context"].update(simulated=False, device_name="test GPU")  # check-sim re-runs it
                    path = self.write("twice.json", document)
                    argv = {"compare": ["compare", self.a, path], "merge": ["merge", path, "-o", out],
                            "check-sim": ["check-sim", path],
                            "report": ["report", path, "-o", out, "--no-plots"]}[reader]
                    status, _, err = vrambench(*argv)
                    self.assertEqual(status, 2, err)
                    lines = err.strip().splitlines()
                    self.assertEqual(len(lines), 1, err)
                    for word in (path, case, "the same case"):
                        self.assertIn(word, lines[0])
                    self.assertFalse(os.path.exists(out))
        for label, document in [("repetitions and aggregates", with_aggregates),
                                ("another statistic", other_statistic)]:
            path = self.write("fine.json", document)
            with self.subTest(label=label):
                status, _, err = vrambench("compare", path, path)
                self.assertEqual(status, 0, err)
                status, _, err = vrambench("merge", path, "-o", out, "--quiet")
                self.assertEqual(status, 0, err)
                os.remove(out)
                status, _, err = vrambench("report", path, "-o", out, "--no-plots")
                self.assertEqual(status, 0, err)
                os.remove(out)

    def readers(self, path):
        """What compare, report, the plots and the tables say about `path`:
        [(reader, exit status, stderr)]."""
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        python = [[sys.executable, "-m", "vrambench.plots", path, "--out-dir", os.path.join(self.tmp.name, "plots")],
                  [sys.executable, os.path.join(ROOT, "python", "vrambench", "results_tables.py"), "bench", path]]
        said = [("compare", *vrambench("compare", self.a, path)[::2]),
                ("report", *vrambench("report", path, "-o", os.path.join(self.tmp.name, "r.html"),
                                      "--no-plots")[::2])]
        for command in python:
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
            said.append((command[2], done.returncode, done.stderr))
        return said

    def test_compare_report_plots_and_tables_refuse_the_same_fields(self):
        # One rule for what a field may hold, applied by every reader: a
        # field compare refuses, report, the plots and the tables refuse too,
        # and the other way round, each in one line naming the file, the
        # entry and the field.
        for key, value, words in BAD_FIELDS:
            document = copy.deepcopy(self.doc)
            document["benchmarks"][1][key] = value
            path = self.write("field.json", document)
            entry = f"benchmarks[1] ({document['benchmarks'][1]['name']})"
            for reader, status, err in self.readers(path):
                with self.subTest(key=key, value=value, reader=reader):
                    self.assertEqual(status, 2, err)
                    lines = err.strip().splitlines()
                    self.assertEqual(len(lines), 1, err)
                    for word in (path, entry, f"'{key}'", words):
                        self.assertIn(word, lines[0])

    def test_a_duplicated_key_is_refused_by_every_reader_in_one_line_naming_the_file_and_the_key(self):
        # A reader that took the last value would show a figure the file also contradicts.
        text = json.dumps(self.doc)
        ratio = f'"overhead_ratio": {json.dumps(self.doc["benchmarks"][1]["overhead_ratio"])}'
        cases = {"overhead_ratio": text.replace(ratio, ratio + ', "overhead_ratio": 99.5', 1),
                 "context": '{"context": {}, ' + text[1:]}
        for key, duplicated in cases.items():
            self.assertNotEqual(duplicated, text)
            path = os.path.join(self.tmp.name, "duplicated.json")
            with open(path, "w") as stream:
                stream.write(duplicated)
            for reader, status, err in self.readers(path):
                with self.subTest(key=key, reader=reader):
                    self.assertEqual(status, 2, err)
                    lines = err.strip().splitlines()
                    self.assertEqual(len(lines), 1, err)
                    for word in (path, "duplicate object key", key):
                        self.assertIn(word, lines[0])

    def test_compare_report_and_tables_take_the_same_good_fields(self):
        for key, value in GOOD_FIELDS:
            document = copy.deepcopy(self.doc)
            for entry in document["benchmarks"]:
                entry[key] = value
            path = self.write("good.json", document)
            for reader, status, err in self.readers(path):
                if reader == "vrambench.plots" and "matplotlib is not available" in err:
                    continue  # the input was checked before matplotlib was looked for
                with self.subTest(key=key, value=value, reader=reader):
                    self.assertEqual(status, 0, err)

    def test_pair_splits_at_the_equals_outside_brackets(self):
        # A configured spec holds '=' in its brackets: --pair X=Y parts X and
        # Y at the '=' outside them, on either side.
        configured = "caching[max_split_size_mb=256]"
        path = os.path.join(self.tmp.name, "configured.json")
        status, _, err = vrambench("run", "--scenario", "views", "--allocator", f"caching,{configured}", "--device",
                                   "sim", "--min-time", "0", "--quiet", "--out", path)
        self.assertEqual(status, 0, err)
        for pair, left, right in ((f"{configured}=caching", configured, "caching"),
                                  (f"caching={configured}", "caching", configured)):
            with self.subTest(pair=pair):
                status, out, err = vrambench("compare", path, "--pair", pair, "--json")
                self.assertEqual(status, 0, err)
                pairs = json.loads(out)[0]["pairs"]
                self.assertEqual([(p["a"], p["b"]) for p in pairs], [(f"views/{left}", f"views/{right}")])
        self.assert_one_error(*vrambench("compare", path, "--pair", f"{configured}=cachin"),
                              "'cachin'", "did you mean 'caching'")
        self.assert_one_error(*vrambench("compare", path, "--pair", configured), "bad --pair")

    def test_names_with_control_characters_are_refused_not_printed(self):
        # compare prints names and the device as they are: an escape
        # sequence (C0 ESC, or C1 CSI U+009B) in a file must not reach the
        # terminal; the file is refused, in one line that shows no control byte.
        for where, text in (("device", "sim\u001b[2J"), ("device", "sim\u009b2J"), ("allocator", "cach\u001b[31ming"),
                            ("name", "views/cach\u009b31ming"), ("scenario", "vi\u0007ews")):
            document = copy.deepcopy(self.doc)
            if where == "device":
                document["context"]["device_name"] = text
            else:
                document["benchmarks"][0][where] = text
            bad = self.write("control.json", document)
            with self.subTest(where=where, text=text):
                status, out, err = vrambench("compare", bad, self.a)
                self.assert_one_error(status, out, err, "control character")
                self.assertFalse(any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f for c in err.strip()), err)

    def test_cases_whose_names_differ_only_past_2_kib_stay_apart(self):
        # A case's group and allocator are kept whole: two long names that
        # share their first 2 KiB are two cases, not one seen twice.
        document = copy.deepcopy(self.doc)
        entries = [entry for entry in document["benchmarks"] if entry["name"] == "views/caching"]
        long_scenario = "s" * 3000
        for allocator, entry in zip(("x", "y"), (entries[0], copy.deepcopy(entries[0]))):
            entry = dict(entry, name=f"{long_scenario}/{allocator}")
            entry.pop("scenario")
            entry.pop("allocator")
            document["benchmarks"].append(entry)
        path = self.write("long.json", document)
        status, out, err = vrambench("compare", path, path, "--json")
        self.assertEqual(status, 0, err)
        pairs = json.loads(out)[0]["pairs"]
        self.assertEqual(sorted(p["allocator"] for p in pairs if p["group"] == long_scenario), ["x", "y"])

    def test_a_misspelt_option_of_the_file_commands_gets_the_nearest_one(self):
        out = os.path.join(self.tmp.name, "never.json")
        for arguments, nearest in ((("compare", self.a, self.a, "--fial-on", "reserved:+1%"), "--fail-on"),
                                   (("compare", self.a, self.a, "--jsn"), "--json"),
                                   (("merge", self.a, "-o", out, "--quite"), "--quiet"),
                                   (("merge", self.a, "--ot", out), "--out"),
                                   (("report", self.a, "-o", out, "--no-plot"), "--no-plots"),
                                   (("check-sim", "--newst", self.a), "--newest")):
            with self.subTest(arguments):
                status, stdout, err = vrambench(*arguments)
                self.assert_one_error(status, stdout, err, f"did you mean {nearest}?")
                self.assertFalse(os.path.exists(out))

    def test_merge_and_report_never_write_over_a_file_they_read(self):
        # `merge a.json b.json -o a.json` would replace a shard with the merge,
        # `report a.json -o a.json` the results with a page: refused, through
        # a symbolic or hard link too, the file left as it was.
        shard = self.write("shard.json", self.doc)
        with open(shard, "rb") as stream:
            before = stream.read()
        link = os.path.join(self.tmp.name, "link.json")
        hard = os.path.join(self.tmp.name, "hard.json")
        for path in (link, hard):
            if os.path.lexists(path):
                os.unlink(path)
        os.symlink(shard, link)
        os.link(shard, hard)
        for arguments in ((("merge", shard, "-o", shard)), ("merge", self.a, link, "-o", shard),
                          ("merge", hard, "--out", os.path.join(self.tmp.name, ".", "shard.json")),
                          ("report", shard, "-o", shard, "--no-plots"), ("report", link, "-o", shard, "--no-plots")):
            with self.subTest(arguments):
                status, stdout, err = vrambench(*arguments)
                self.assert_one_error(status, stdout, err, "same file")
                with open(shard, "rb") as stream:
                    self.assertEqual(stream.read(), before)

    def test_a_first_oom_asking_2_64_minus_1_bytes_is_read_back_by_every_reader(self):
        # first_oom_bytes 2^64-1 (replay, tune) was written as the double 1.8446744073709552e19 (2^64),
        # which compare, merge and the Python loader refuse as "not a whole number".
        trace = os.path.join(self.tmp.name, "huge.trace")
        with open(trace, "w") as stream:
            stream.write("vbtrace 1\na 1 18446744073709551615\na 2 4096\nf 2\n")
        replay, tune = os.path.join(self.tmp.name, "huge.json"), os.path.join(self.tmp.name, "huge-tune.json")
        for arguments in (("replay", trace, "--device", "sim", "--allocator", "caching", "--out", replay),
                          ("tune", trace, "--jobs", "1", "--out", tune)):
            status, _, err = vrambench(*arguments, "--quiet")
            self.assertEqual(status, 0, err)
            self.assertGreater(load(arguments[-1])["benchmarks"][0]["first_oom_bytes"], 2 ** 64 - 4096)
        for arguments in (("compare", replay, replay), ("merge", replay, "-o", replay + ".merged", "--quiet"),
                          ("compare", tune, tune)):
            with self.subTest(arguments):
                status, _, err = vrambench(*arguments)
                self.assertEqual(status, 0, err)
        tables = subprocess.run([sys.executable, "-m", "vrambench.results_tables", "replay", replay],
                                capture_output=True, text=True, timeout=120,
                                env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))
        self.assertEqual(tables.returncode, 0, tables.stderr)

    def test_help(self):
        for command in ("compare", "merge", "report"):
            status, out, _ = vrambench(command, "--help")
            self.assertEqual(status, 0, command)
            self.assertIn("e.g.", out)


if __name__ == "__main__":
    unittest.main()
