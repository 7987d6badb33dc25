"""Names defined once (scenarios/scenario.h): the committed docs/names.json is
what `vrambench list names --json` prints; a run's and a claims file's JSON
carry the same tables; every step a sim run marks and every counter its
tables list is in them; lab/harnesses/pytorch_claims.py takes steps by key and sets
only counters the tables define."""

import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import shutil
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VRAMBENCH = os.path.abspath(os.environ.get("VRAMBENCH", os.path.join(REPO, "build", "vrambench")))
NAMES_JSON = os.path.join(REPO, "docs", "names.json")
PYTORCH_CLAIMS = os.path.join(REPO, "lab", "harnesses", "pytorch_claims.py")


def committed_names():
    with open(NAMES_JSON, encoding="utf-8") as stream:
        return json.load(stream)


def step_pattern(text):
    """A regex for a step text that may hold one %d or %s."""
    return re.compile("^" + re.sub(r"%[ds]", lambda m: r"\d+" if m.group(0) == "%d" else ".+",
                                   re.escape(text).replace(r"\%", "%")) + "$")


@unittest.skipUnless(os.access(VRAMBENCH, os.X_OK), f"{VRAMBENCH} is not built")
class NamesFromTheBinary(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        listed = subprocess.run([VRAMBENCH, "list", "names", "--json"], capture_output=True, text=True,
                                timeout=60, check=True)
        cls.names = json.loads(listed.stdout)
        cls.work = tempfile.mkdtemp(prefix="vb-names-")
        cls.run_json = os.path.join(cls.work, "run.json")
        subprocess.run([VRAMBENCH, "run", "--device", "sim", "--quiet", "--repetitions", "1", "--min-time", "0",
                        "--allocator", "caching", "--out", cls.run_json], capture_output=True, text=True,
                       timeout=600, check=True)
        with open(cls.run_json, encoding="utf-8") as stream:
            cls.result = json.load(stream)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def test_the_committed_catalogue_is_what_the_binary_prints(self):
        self.assertEqual(committed_names(), self.names,
                         "docs/names.json is stale: build/vrambench list names --json > docs/names.json")

    def test_every_claim_is_listed_with_a_scenario_that_has_names(self):
        for claim in self.names["claims"]:
            self.assertIn(claim["scenario"], self.names["scenarios"], claim["id"])

    def test_the_run_result_carries_each_scenarios_tables(self):
        scenarios = {entry["scenario"] for entry in self.result["benchmarks"]}
        self.assertEqual(set(self.result["names"]), scenarios)
        for scenario in scenarios:
            self.assertEqual(self.result["names"][scenario], self.names["scenarios"][scenario])

    def test_every_step_a_run_marks_is_in_its_table(self):
        for entry in self.result["benchmarks"]:
            patterns = [step_pattern(text) for text in self.result["names"][entry["scenario"]]["steps"].values()]
            for point in entry["timeline"]:
                with self.subTest(scenario=entry["scenario"], step=point["step"]):
                    self.assertTrue(any(p.match(point["step"]) for p in patterns))

    def test_every_counter_a_table_lists_is_set_by_the_run(self):
        for entry in self.result["benchmarks"]:
            names = self.result["names"][entry["scenario"]]
            listed = list(names["counters"])
            for family in names.get("counter_families", {}).get("families", {}).values():
                listed += family.values()
            for counter in listed:
                with self.subTest(scenario=entry["scenario"], counter=counter):
                    self.assertIn(counter, entry)

    def test_families_describe_their_members(self):
        families = self.names["scenarios"]["dataloader_batches"]["counter_families"]
        self.assertEqual([m["parameter"] for m in families["members"]], [32, 256, 2048, 8192])
        self.assertEqual(families["families"]["peak_reserved_bytes"]["256"], "batch256_peak_reserved_bytes")
        every = self.names["scenarios"]["empty_cache_loop"]["counter_families"]
        self.assertEqual({m["name"]: m["parameter"] for m in every["members"]},
                         {"every1": 1, "every10": 10, "never": 0})

    def test_the_claims_file_carries_the_names_of_its_scenarios(self):
        out = os.path.join(self.work, "claims.json")
        subprocess.run([VRAMBENCH, "claims", "--device", "sim", "--allocator", "caching", "--out", out],
                       capture_output=True, text=True, timeout=600, check=True)
        with open(out, encoding="utf-8") as stream:
            claims = json.load(stream)
        for entry in claims["catalogue"]:
            self.assertEqual(claims["names"][entry["scenario"]], self.names["scenarios"][entry["scenario"]])

    def test_list_names_without_json_prints_lines(self):
        listed = subprocess.run([VRAMBENCH, "list", "names"], capture_output=True, text=True, timeout=60)
        self.assertEqual(listed.returncode, 0)
        self.assertIn("z = matmul(x, y) (dispatched)", listed.stdout)
        bad = subprocess.run([VRAMBENCH, "list", "names", "--yaml"], capture_output=True, text=True, timeout=60)
        self.assertEqual(bad.returncode, 2)


class PytorchClaimsUsesTheNames(unittest.TestCase):
    """lab/harnesses/pytorch_claims.py (it needs a GPU to run): its scenario
    functions, read as source, take only steps and counters the tables have."""

    def test_every_step_key_and_counter_is_in_the_tables(self):
        names = committed_names()["scenarios"]
        with open(PYTORCH_CLAIMS, encoding="utf-8") as stream:
            tree = ast.parse(stream.read())
        checked = 0
        for function in tree.body:
            if not isinstance(function, ast.FunctionDef) or function.name not in names:
                continue
            table = names[function.name]
            counters = set(table["counters"]) | {"context_bytes"}
            for call in ast.walk(function):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and isinstance(call.func.value, ast.Name) and call.func.value.id == "r"):
                    continue
                first = call.args[0] if call.args else None
                literal = first.value if isinstance(first, ast.Constant) else None
                if call.func.attr == "step":
                    self.assertIsInstance(literal, str, f"{function.name}: a step by key")
                    self.assertIn(literal, table["steps"], function.name)
                    checked += 1
                elif call.func.attr == "counter" and literal is not None:
                    self.assertIn(literal, counters, function.name)
                    checked += 1
                elif call.func.attr == "family_counter":
                    self.assertIn(literal, table["counter_families"]["families"], function.name)
                    checked += 1
        self.assertGreater(checked, 60)

    def test_the_recorder_names_steps_and_counters_from_the_tables(self):
        sys.path.insert(0, os.path.join(REPO, "lab", "harnesses"))
        import pytorch_claims

        class FakeCuda:
            @staticmethod
            def memory_stats():
                return {"requested_bytes.all.current": 1, "allocated_bytes.all.current": 2,
                        "reserved_bytes.all.current": 3}

            @staticmethod
            def mem_get_info():
                return 10, 14

        class FakeTorch:
            cuda = FakeCuda

        names = committed_names()["scenarios"]
        leak = pytorch_claims.Recorder(FakeTorch, names["leak_loop"])
        leak.step("unreferenced", 10)
        leak.counter("iterations", 100)
        self.assertEqual(leak.timeline, [{"step": "unreferenced 10", "requested": 1, "allocated": 2,
                                          "reserved": 3, "driver_used": 4}])
        with self.assertRaises(KeyError):
            leak.counter("no_such_counter", 1)
        with self.assertRaises(KeyError):
            leak.step("no_such_step")
        batches = pytorch_claims.Recorder(FakeTorch, names["dataloader_batches"])
        self.assertEqual(batches.members(), [("32", 32), ("256", 256), ("2048", 2048), ("8192", 8192)])
        batches.family_counter("peak_reserved_bytes", "256", 5)
        self.assertEqual(batches.counters, {"batch256_peak_reserved_bytes": 5.0})

    def test_the_default_names_file_is_the_committed_one(self):
        sys.path.insert(0, os.path.join(REPO, "lab", "harnesses"))
        import pytorch_claims

        self.assertEqual(os.path.realpath(pytorch_claims.NAMES_JSON),
                         os.path.realpath(os.path.join(REPO, "docs", "names.json")))
        self.assertTrue(os.path.isfile(pytorch_claims.NAMES_JSON))

    def test_numbered_steps_format_as_the_c_scenarios_do(self):
        steps = committed_names()["scenarios"]["leak_loop"]["steps"]
        self.assertEqual(steps["unreferenced"] % (100,), "unreferenced 100")
        batch = committed_names()["scenarios"]["dataloader_batches"]["steps"]["epoch_done"]
        self.assertEqual(batch % ("256",), "batch_size=256: epoch done")


if __name__ == "__main__":
    unittest.main()
