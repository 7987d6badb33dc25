"""--shard I/N and `vrambench merge` on the simulated device: the shards of
a run are disjoint and cover it, and merged they equal one run case for case
(every memory figure, the order of the entries, the names); a tune's shards
merged give one tune's candidates and recommendation; merge refuses what is
not one run's shards (of another command line or device) with one clear line
and writes nothing; an output named .gz is gzip'd."""

import gzip
import json
import os
import subprocess
import tempfile
import unittest

from cli_support import CLAIMS, GPU_RUN, VRAMBENCH, load, memory_figures, vrambench

SCENARIOS = "views,function_scope,random_mix,dataloader_batches,empty_cache_loop"
ALLOCATORS = "cuda,caching,expandable,bfc,stitch"
TRACE = "vbtrace 1\na 1 31457280\na 2 31457280\na 3 31457280\nf 2\na 4 20000000\nf 1\nf 3\nf 4\n"


def iterations(document):
    return [e for e in document["benchmarks"] if e.get("run_type") == "iteration"]


class ShardMergeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        run = ["run", "--scenario", SCENARIOS, "--allocator", ALLOCATORS, "--device", "sim", "--repetitions", "2",
               "--min-time", "0.01", "--quiet"]
        status, _, err = vrambench(*run, "--out", cls.path("one.json"))
        assert status == 0, err
        cls.shards = []
        for index in (1, 2, 3):
            cls.shards.append(cls.path(f"shard-{index}.json"))
            status, _, err = vrambench(*run, "--shard", f"{index}/3", "--out", cls.shards[-1])
            assert status == 0, err

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.dir, name)

    def test_shards_are_disjoint_and_cover_the_run(self):
        whole = {e["name"] for e in iterations(load(self.path("one.json")))}
        parts = [{e["name"] for e in iterations(load(path))} for path in self.shards]
        self.assertEqual(set().union(*parts), whole)
        self.assertEqual(sum(len(p) for p in parts), len(whole))
        self.assertEqual(load(self.shards[1])["context"]["shard"], {"index": 2, "count": 3, "cases": 25})

    def test_merged_shards_equal_one_run(self):
        merged = self.path("merged.json")
        status, _, err = vrambench("merge", self.shards[2], self.shards[0], self.shards[1], "-o", merged)
        self.assertEqual(status, 0, err)
        one, got = load(self.path("one.json")), load(merged)
        self.assertEqual([e["name"] for e in got["benchmarks"]], [e["name"] for e in one["benchmarks"]])
        for want, have in zip(iterations(one), iterations(got)):
            self.assertEqual(memory_figures(have), memory_figures(want), have["name"])
        self.assertEqual(got["names"], one["names"])
        self.assertEqual(got["context"]["allocator_configs"], one["context"]["allocator_configs"])
        self.assertNotIn("shard", got["context"])
        self.assertEqual(sorted(f["shard"] for f in got["context"]["merged_from"]), ["1/3", "2/3", "3/3"])
        status, out, err = vrambench("compare", self.path("one.json"), merged, "--fail-on", "reserved:+0%",
                                     "--fail-on", "driver_calls:+0%", "--fail-on", "allocated:+0%")
        self.assertEqual(status, 0, out + err)

    def test_a_shard_without_cases_still_writes_its_file(self):
        empty = self.path("empty.json")
        status, _, err = vrambench("run", "--scenario", "views", "--allocator", "cuda,caching", "--device", "sim",
                                   "--min-time", "0", "--quiet", "--shard", "3/3", "--out", empty)
        self.assertEqual(status, 0, err)
        self.assertEqual(load(empty)["benchmarks"], [])

    def test_tune_shards_merge_into_one_tune(self):
        trace = self.path("t.trace")
        with open(trace, "w") as stream:
            stream.write(TRACE)
        status, _, err = vrambench("tune", trace, "--quiet", "--jobs", "2", "--out", self.path("tune.json"))
        self.assertEqual(status, 0, err)
        parts = []
        for index in (1, 2):
            parts.append(self.path(f"tune-{index}.json"))
            status, out, err = vrambench("tune", trace, "--jobs", "2", "--shard", f"{index}/2", "--out", parts[-1])
            self.assertEqual(status, 0, err)
            self.assertIn("the recommendation comes with `vrambench merge`", out)
            self.assertNotIn("recommendation", load(parts[-1]))
            status, out, err = vrambench("tune", trace, "--quiet", "--jobs", "2", "--shard", f"{index}/2", "--out",
                                         parts[-1], "--force")
            self.assertEqual((status, out, err), (0, "", ""), "--quiet: nothing but errors")
        merged = self.path("tune-merged.json")
        status, _, err = vrambench("merge", *parts, "-o", merged)
        self.assertEqual(status, 0, err)
        one, got = load(self.path("tune.json")), load(merged)
        self.assertEqual([e["name"] for e in got["benchmarks"]], [e["name"] for e in one["benchmarks"]])
        for want, have in zip(one["benchmarks"], got["benchmarks"]):
            for key in ("peak_reserved_bytes", "min_capacity_bytes", "ooms_at_capacity", "driver_alloc_calls"):
                self.assertEqual(have.get(key), want.get(key), (have["name"], key))
            self.assertIn("on_pareto_front", have)
        for key in ("peak_reserved_bytes", "min_capacity_bytes", "defaults_peak_reserved_bytes"):
            self.assertEqual(got["recommendation"][key], one["recommendation"][key], key)
        status, _, err = vrambench("merge", parts[0], "-o", self.path("tune-half.json"))
        self.assertEqual(status, 2, err)
        self.assertIn("missing", err)

    def test_merge_refuses_what_is_not_one_run(self):
        claims, gpu = CLAIMS, GPU_RUN
        other = self.path("other-shard.json")
        status, _, err = vrambench("run", "--scenario", "views", "--allocator", "cuda", "--device", "sim",
                                   "--min-time", "0", "--quiet", "--shard", "1/3", "--out", other)
        self.assertEqual(status, 0, err)
        # A shard edited or cut short (a case gone, one added): merged into a
        # run missing a case, or holding one twice, with exit 0.
        short, extra = load(self.shards[1]), load(self.shards[1])
        gone = iterations(short)[0]["name"]
        short["benchmarks"] = [e for e in short["benchmarks"] if e["name"] != gone]
        added = [dict(e, name=e["name"] + "-copy", allocator=e["allocator"] + "-copy") for e in iterations(extra)[:1]]
        extra["benchmarks"] += added
        # Shard fields of the wrong shape were read as 0 ("shard 0/0 of -1 cases ... different command lines").
        null_shard, text_cases, text_command = load(self.shards[1]), load(self.shards[1]), load(self.shards[1])
        null_shard["context"]["shard"] = None
        text_cases["context"]["shard"]["cases"] = "25"
        text_command["context"]["shard_command"] = "run"
        for name, document in (("short-shard.json", short), ("extra-shard.json", extra), ("null-shard.json", null_shard),
                               ("text-cases.json", text_cases), ("text-command.json", text_command)):
            with open(self.path(name), "w") as stream:
                json.dump(document, stream)
        out = self.path("refused.json")
        cases = [
            ((self.shards[0], self.path("short-shard.json"), self.shards[2]), "short-shard.json holds 7 cases, where "
                                                                               "shard 2/3 of 25 cases holds 8"),
            ((self.shards[0], self.path("extra-shard.json"), self.shards[2]), "extra-shard.json holds 9 cases, where "
                                                                               "shard 2/3 of 25 cases holds 8"),
            ((self.shards[0], self.path("null-shard.json"), self.shards[2]), "null-shard.json: its context's shard is "
                                                                              "not {index, count, cases}"),
            ((self.shards[0], self.path("text-cases.json"), self.shards[2]), "text-cases.json: its context's shard is "
                                                                             "not {index, count, cases}"),
            ((self.shards[0], self.path("text-command.json"), self.shards[2]), "text-command.json: its context's "
                                                                               "shard_command is not the list"),
            ((self.shards[0], self.shards[1]), "missing: 3/3"),
            ((self.shards[0], self.shards[0], self.shards[1], self.shards[2]), "both shard 1/3"),
            ((self.shards[1], self.shards[2], other), "different command lines"),
            ((self.path("one.json"), self.shards[0]), "is a shard"),
            ((self.path("one.json"), self.path("one.json")), "is in both"),
            ((claims,), "claims file"),
            ((gpu, self.path("one.json")), "one device"),
            ((self.path("nothing.json"),), "nothing.json"),
        ]
        for files, words in cases:
            with self.subTest(files=files):
                status, stdout, err = vrambench("merge", *files, "-o", out)
                self.assertEqual(status, 2, err)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertIn(words, err)
                self.assertFalse(os.path.exists(out))
        status, _, err = vrambench("merge", *self.shards, "-o", os.path.join(self.dir, "no", "such", "dir.json"))
        self.assertEqual(status, 2, err)

    def shard_pair(self, name, first, second):
        """Shards 1/2 and 2/2 of `first` and `second` (argument lists; the
        shard and the --out are added): their two paths."""
        paths = []
        for index, arguments in ((1, first), (2, second)):
            paths.append(self.path(f"{name}-{index}.json"))
            status, _, err = vrambench(*arguments, "--quiet", "--shard", f"{index}/2", "--out", paths[-1])
            self.assertEqual(status, 0, err)
        return paths

    def test_merge_refuses_shards_of_different_inputs_under_one_name(self):
        # The command lines were equal (the same file name, in two folders),
        # so the shards of two traces merged into one result, exit 0.
        os.makedirs(self.path("other"), exist_ok=True)
        for folder, seed in ((self.dir, "4"), (self.path("other"), "11")):
            status, _, err = vrambench("gen-trace", "random", "--seed", seed, "--events", "600", "--max-size", "64M",
                                       "--max-live", "1G", "-o", os.path.join(folder, "same.trace"), "--quiet")
            self.assertEqual(status, 0, err)
        for command in (["tune", "same.trace", "--jobs", "1"],
                        ["replay", "same.trace", "--device", "sim", "--allocator", "caching,bfc"]):
            with self.subTest(command[0]):
                shards = []
                for index, folder in ((1, self.dir), (2, self.path("other"))):
                    shards.append(self.path(f"{command[0]}-input-{index}.json"))
                    done = subprocess.run([VRAMBENCH, *command, "--quiet", "--shard", f"{index}/2", "--out",
                                           shards[-1]], cwd=folder, capture_output=True, text=True, timeout=300)
                    self.assertEqual(done.returncode, 0, done.stderr)
                out = self.path("mixed.json")
                status, _, err = vrambench("merge", *shards, "-o", out)
                self.assertEqual(status, 2, err)
                self.assertIn("shard_input", err)
                self.assertFalse(os.path.exists(out))

    def test_merge_refuses_shards_of_different_command_lines(self):
        trace, other_trace = self.path("cmd.trace"), self.path("other.trace")
        for path, text in ((trace, TRACE), (other_trace, "vbtrace 1\na 0 1024\nf 0\n")):
            with open(path, "w") as stream:
                stream.write(text)
        replay = ["replay", trace, "--device", "sim", "--allocator", "caching,bfc"]
        run = ["run", "--device", "sim", "--allocator", "caching", "--min-time", "0"]
        tune = ["tune", trace, "--jobs", "2"]
        cases = [
            ("sim-capacity", replay, replay + ["--sim-capacity", "1GiB"], "--sim-capacity=1GiB"),
            ("placement", replay, replay + ["--sim-placement", "rising"], "--sim-placement=rising"),
            ("trace", replay, ["replay", other_trace] + replay[2:], "other.trace"),
            ("scenario", run + ["--scenario", "random_mix"], run + ["--scenario", "views"], "--scenario=views"),
            ("param", run + ["--scenario", "random_mix"], run + ["--scenario", "random_mix", "--param", "seed=2"],
             "--param=seed=2"),
            ("tune-capacity", tune, tune + ["--capacity", "1GiB"], "--capacity=1GiB"),
            ("tune-trace", tune, ["tune", other_trace, "--jobs", "2"], "other.trace"),
        ]
        for name, first, second, words in cases:
            with self.subTest(differ=name):
                out = self.path(f"refused-{name}.json")
                one, two = self.shard_pair(name, first, second)
                status, _, err = vrambench("merge", one, two, "-o", out)
                self.assertEqual(status, 2, err)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                for word in ("different command lines", words, one, two):
                    self.assertIn(word, err)
                self.assertFalse(os.path.exists(out))

    def test_merge_names_each_device_quoted_and_whether_it_was_simulated(self):
        # An empty device name read "is from  and"; a sim and a GPU of one name read "from X and from X".
        for name, simulated in (("", None), (None, False)):
            with self.subTest(name=name, simulated=simulated):
                document = load(self.shards[1])
                first_name = document["context"]["device_name"]
                if name is not None:
                    document["context"]["device_name"] = name
                if simulated is not None:
                    document["context"]["simulated"] = simulated
                changed = self.path("other-device.json")
                with open(changed, "w") as stream:
                    json.dump(document, stream)
                status, _, err = vrambench("merge", self.shards[0], changed, "-o", self.path("refused.json"))
                self.assertEqual(status, 2, err)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                if name is not None:
                    self.assertIn("from ''", err)
                else:
                    self.assertIn(f"'{first_name}' (simulated) and", err)
                    self.assertNotIn(f"'{first_name}' (simulated):", err)

    def test_merge_refuses_shards_of_different_devices(self):
        """Fields of the context a command line does not decide (a GPU's
        driver, its memory) must agree too; the host's own may differ."""
        for field, value in (("driver_version", 12040), ("device_total_bytes", 3 << 30), ("sim_placement", "rising")):
            with self.subTest(field=field):
                document = load(self.shards[2])
                document["context"][field] = value
                changed = self.path(f"device-{field}.json")
                with open(changed, "w") as stream:
                    json.dump(document, stream)
                out = self.path(f"refused-{field}.json")
                status, _, err = vrambench("merge", *self.shards[:2], changed, "-o", out)
                self.assertEqual(status, 2, err)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                for word in ("different command lines or devices", f"context's {field}", changed):
                    self.assertIn(word, err)
                self.assertFalse(os.path.exists(out))
        document = load(self.shards[2])
        document["context"].update(host_name="another-host", date="2026-01-01T00:00:00+00:00", load_avg=[9.0],
                                   num_cpus=128, executable="/opt/vrambench")
        elsewhere = self.path("elsewhere.json")
        with open(elsewhere, "w") as stream:
            json.dump(document, stream)
        status, _, err = vrambench("merge", *self.shards[:2], elsewhere, "-o", self.path("elsewhere-merged.json"))
        self.assertEqual(status, 0, err)

    def test_merge_joins_shards_whose_options_differ_in_order_and_output_only(self):
        trace = self.path("order.trace")
        with open(trace, "w") as stream:
            stream.write(TRACE)
        one, two = self.shard_pair("order", ["replay", trace, "--device", "sim", "--allocator", "caching,bfc"],
                                   ["replay", "--allocator=caching,bfc", trace, "--device=sim", "--fail-on-oom",
                                    "--force"])
        merged = self.path("order-merged.json")
        status, _, err = vrambench("merge", one, two, "-o", merged)
        self.assertEqual(status, 0, err)
        self.assertNotIn("shard_command", load(merged)["context"])

    def test_a_gz_output_is_gzip(self):
        merged = self.path("merged.json.gz")
        status, _, err = vrambench("merge", *self.shards, "-o", merged, "--quiet")
        self.assertEqual(status, 0, err)
        replayed = self.path("replay.json.gz")
        trace = self.path("gz.trace")
        with open(trace, "w") as stream:
            stream.write(TRACE)
        status, _, err = vrambench("replay", trace, "--device", "sim", "--allocator", "caching", "--quiet", "--out",
                                   replayed)
        self.assertEqual(status, 0, err)
        documents = {}
        for path in (merged, replayed):
            with open(path, "rb") as stream:
                self.assertEqual(stream.read(2), b"\x1f\x8b", path)
            with gzip.open(path, "rt") as stream:
                documents[path] = json.load(stream)
        self.assertEqual(len(documents[merged]["benchmarks"]), len(load(self.path("one.json"))["benchmarks"]))
        self.assertEqual(len(documents[replayed]["benchmarks"]), 1)

    def test_bad_shard_values(self):
        for value in ("0/3", "4/3", "x", "1/0", "1/", "/2", "1/2/3", "-1/2", "1/100001"):
            for command in (("run", "--scenario", "views"), ("tune", self.path("t.trace"))):
                with self.subTest(value=value, command=command[0]):
                    status, out, err = vrambench(*command, "--shard", value)
                    self.assertEqual(status, 2, err)
                    self.assertEqual(len(err.strip().splitlines()), 1, err)
                    self.assertIn(f"bad --shard '{value}'", err)


if __name__ == "__main__":
    unittest.main()
