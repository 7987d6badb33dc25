"""docs/sim-differences.md is rendered from docs/data/sim-differences.json
(python/vrambench/sim_differences_page.py): this fails when the committed page is out
of step with the data file, or when the data file breaks the format
check-sim reads. Standard library only; run by `make test`."""
import copy
import importlib.util
import json
import os
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "docs", "data", "sim-differences.json")
PAGE = os.path.join(ROOT, "docs", "sim-differences.md")


def load_generator():
    spec = importlib.util.spec_from_file_location(
        "sim_differences_page", os.path.join(ROOT, "python", "vrambench", "sim_differences_page.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class SimDifferencesDoc(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.generator = load_generator()
        with open(DATA, encoding="utf-8") as file:
            cls.data = json.load(file)

    def test_the_committed_page_is_what_the_data_renders(self):
        with open(PAGE, encoding="utf-8") as file:
            committed = file.read()
        self.assertEqual(committed, self.generator.render(self.data),
                         "docs/sim-differences.md is out of step with docs/data/sim-differences.json: "
                         "run python3 -m vrambench.sim_differences_page")

    def test_every_difference_and_pattern_is_on_the_page(self):
        page = self.generator.render(self.data)
        for difference in self.data["differences"]:
            self.assertIn(f"## {difference['id']}\n", page)
            for match in difference["matches"]:
                self.assertIn(f"`{match['case']}`, `{match['figure']}`", page)

    def test_malformed_data_is_refused(self):
        def broken(change):
            data = copy.deepcopy(self.data)
            change(data)
            return data
        cases = {
            "no differences": lambda d: d.pop("differences"),
            "unknown top-level key": lambda d: d.update(extra=1),
            "version 2": lambda d: d.update(version=2),
            "reason missing": lambda d: d["differences"][0].pop("reason"),
            "empty matches": lambda d: d["differences"][0].update(matches=[]),
            "match without figure": lambda d: d["differences"][0]["matches"][0].pop("figure"),
            "evidence a string": lambda d: d["differences"][0].update(evidence="x"),
            "repeated id": lambda d: d["differences"][1].update(id=d["differences"][0]["id"]),
            "misspelt key": lambda d: d["differences"][0].update(figures=["*"]),
        }
        for name, change in cases.items():
            with self.subTest(name):
                with self.assertRaises(self.generator.DataError):
                    self.generator.render(broken(change))


if __name__ == "__main__":
    unittest.main()
