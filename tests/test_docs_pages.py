"""The docs: the generated pages of docs/results/ and the README's headline
are in step with the committed results/ (python/vrambench/docs_pages.py
renders them again into a temporary folder), every relative link of
README.md and docs/ leads to a file (and a heading) that exists, and the
README stays a front door of at most 250 lines. Standard library only."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import plot_fixture

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))

from vrambench import docs_pages  # noqa: E402

README_MAX_LINES = 250

# Pages written in parallel work (the sim's models, and the generated table of
# its documented differences): a link to one passes while it is absent and is
# checked as any other once it exists.
PENDING_PAGES = {"docs/sim-models.md", "docs/sim-differences.md"}


def run_pages(*args):
    environment = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    return subprocess.run([sys.executable, "-m", "vrambench.docs_pages", *args], capture_output=True,
                          text=True, timeout=300, check=False, env=environment, cwd=REPO)


def read(path):
    with open(path, encoding="utf-8") as stream:
        return stream.read()


def markdown_files():
    """README.md and every .md under docs/, relative to the repository."""
    found = ["README.md"]
    for folder, _, names in os.walk(os.path.join(REPO, "docs")):
        found += [os.path.relpath(os.path.join(folder, name), REPO) for name in sorted(names)
                  if name.endswith(".md")]
    return found


def prose(text, inline_code=False):
    """text without fenced or indented code blocks and, unless inline_code,
    inline code spans (their brackets are not links)."""
    kept, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    "):
            continue
        kept.append(line if inline_code else re.sub(r"`[^`]*`", "", line))
    return "\n".join(kept)


def links(text):
    """Every link target of Markdown text: [text](target) and <img src="...">."""
    text = prose(text)
    return (re.findall(r"\]\(([^)\s]+)\)", text) +
            re.findall(r"<img [^>]*src=\"([^\"]+)\"", text))


def anchors(text):
    """The heading anchors of a Markdown file, as GitHub makes them."""
    found, seen = set(), {}
    for line in prose(text, inline_code=True).splitlines():
        match = re.match(r"#{1,6} +(.*?) *#* *$", line)
        if match:
            base = docs_pages.anchor(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


class GeneratedPages(unittest.TestCase):

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="vb-docs-")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def test_committed_pages_are_in_step_with_the_results(self):
        out = os.path.join(self.work, "results")
        readme = os.path.join(self.work, "README.md")
        shutil.copyfile(os.path.join(REPO, "README.md"), readme)
        run = run_pages("--out", out, "--readme", readme)
        self.assertEqual(run.returncode, 0, run.stderr)
        committed_dir = os.path.join(REPO, "docs", "results")
        rendered = sorted(os.listdir(out))
        committed = sorted(name for name in os.listdir(committed_dir) if name.endswith(".md"))
        self.assertEqual(committed, rendered,
                         "docs/results/ holds other pages than results/ gives: run `make docs`")
        for name in rendered:
            with self.subTest(page=name):
                self.assertEqual(read(os.path.join(committed_dir, name)), read(os.path.join(out, name)),
                                 f"docs/results/{name} is out of step with results/: run `make docs`")
        self.assertEqual(read(os.path.join(REPO, "README.md")), read(readme),
                         "README.md's generated headline is out of step with results/: run `make docs`")

    def test_every_page_says_it_is_generated_and_names_its_sources(self):
        for name in os.listdir(os.path.join(REPO, "docs", "results")):
            text = read(os.path.join(REPO, "docs", "results", name))
            with self.subTest(page=name):
                self.assertTrue(text.startswith(docs_pages.GENERATED), "no generated header line")
                if name != "README.md":
                    self.assertIn("Source: [results/", text)

    def test_a_simulated_file_gets_no_gpu_page_and_a_gpu_file_names_its_source(self):
        results = os.path.join(self.work, "results")
        os.makedirs(results)
        with open(os.path.join(results, "sim-20250106.json"), "w", encoding="utf-8") as stream:
            json.dump(plot_fixture.sim_result(scenarios=["views"]), stream)
        with open(os.path.join(results, "nvidia-h200-20250106.json"), "w", encoding="utf-8") as stream:
            json.dump(plot_fixture.sim_result(scenarios=["views"], device_name="NVIDIA H200",
                                              simulated=False), stream)
        pages, headline = docs_pages.render(results)
        self.assertEqual(sorted(os.path.basename(path) for path in pages), ["README.md", "nvidia-h200.md"])
        page = pages[os.path.join("docs", "results", "nvidia-h200.md")]
        self.assertIn("nvidia-h200-20250106.json", page)
        self.assertIn("| views |", page)
        self.assertNotIn("sim-20250106.json", page)
        self.assertIsNone(headline)   # no replays of recorded loops: no headline

    def test_the_fit_check_sentence_counts_every_fit_check_file_of_the_device(self):
        def check(point, fits):
            return {"point": point, "real": {"completed": fits, "oom": not fits}}

        def document(workload, fits_at_p):
            return {"device_name": "NVIDIA H100", "rows": [{"workload": workload, "checks": [
                check("P", fits_at_p), check("P + 64 MiB", True), check("L - 2 MiB", False),
                check("L - 64 MiB", False)]}]}

        items = [docs_pages.Item(os.path.join(REPO, "results", name), "fit-check", "NVIDIA H100", doc)
                 for name, doc in (("a/fit-check.json", document("mlp", True)),
                                   ("b/fit-check.json", document("cnn", False)))]
        sentence = docs_pages.fit_check_headline(items)
        self.assertIn("(2 workloads, 2 settings in all)", sentence)
        self.assertIn("the job fit in 3 of 4 runs at the minimum and 64 MiB above", sentence)
        self.assertIn("ran out of memory in 4 of 4 runs", sentence)
        self.assertIn("[results/a/fit-check.json](results/a/fit-check.json)", sentence)
        self.assertIn("[results/b/fit-check.json](results/b/fit-check.json)", sentence)

    def test_bad_results_are_one_line_and_exit_2(self):
        results = os.path.join(self.work, "results")
        os.makedirs(results)
        document = plot_fixture.sim_result(scenarios=["views"], device_name="NVIDIA H200", simulated=False)
        for entry in document["benchmarks"]:
            entry.pop("overhead_ratio", None)
        with open(os.path.join(results, "nvidia-h200-20250106.json"), "w", encoding="utf-8") as stream:
            json.dump(document, stream)
        run = run_pages("--results", results, "--out", os.path.join(self.work, "pages"), "--readme", "")
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertEqual(len(run.stderr.strip().splitlines()), 1, run.stderr)
        self.assertIn("overhead_ratio", run.stderr)

    def test_a_newline_in_a_results_path_is_still_one_note_line(self):
        # A file that is no results file is skipped with a note: one line,
        # the newline shown as '?'.
        results = os.path.join(self.work, "res\nults")
        os.makedirs(results)
        with open(os.path.join(results, "nvidia-h200-20250106.json"), "w", encoding="utf-8") as stream:
            stream.write("{")
        run = run_pages("--results", results, "--out", os.path.join(self.work, "pages"), "--readme", "")
        self.assertEqual(run.returncode, 0, run.stderr)
        notes = [line for line in run.stderr.splitlines() if "skipping" in line]
        self.assertEqual(len(notes), 1, run.stderr)
        self.assertIn("res?ults", notes[0])

    def test_a_newline_in_a_file_name_is_still_one_wrote_or_error_line(self):
        # Every page written is one 'wrote' line, and an unreadable log one
        # error line: each names its file with the newline shown as '?'.
        results = os.path.join(self.work, "res\nults")
        os.makedirs(results)
        document = plot_fixture.sim_result(scenarios=["views"], device_name="NVIDIA H200", simulated=False)
        with open(os.path.join(results, "nvidia-h200-20250106.json"), "w", encoding="utf-8") as stream:
            json.dump(document, stream)
        run = run_pages("--results", results, "--out", os.path.join(self.work, "pa\nges"), "--readme", "")
        self.assertEqual(run.returncode, 0, run.stderr)
        lines = run.stderr.splitlines()
        self.assertTrue(lines, run.stderr)
        for line in lines:
            self.assertTrue(line.startswith(f"{docs_pages.PROG}: wrote "), run.stderr)
            self.assertIn("pa?ges", line)
        os.symlink(os.path.join(self.work, "nowhere"), os.path.join(results, "nvidia-h200-run.log"))
        run = run_pages("--results", results, "--out", os.path.join(self.work, "pa\nges"), "--readme", "")
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertEqual(len(run.stderr.splitlines()), 1, run.stderr)
        self.assertIn("res?ults", run.stderr)


class Links(unittest.TestCase):

    def test_every_relative_link_leads_to_a_file_and_heading(self):
        texts = {path: read(os.path.join(REPO, path)) for path in markdown_files()}
        broken = []
        for path, text in texts.items():
            for target in links(text):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):   # https:, mailto:
                    continue
                file_part, _, fragment = target.partition("#")
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                if not os.path.exists(os.path.join(REPO, resolved)):
                    if resolved not in PENDING_PAGES:
                        broken.append(f"{path}: {target} (no {resolved})")
                    continue
                if fragment and resolved.endswith(".md"):
                    text_there = texts.get(resolved) or read(os.path.join(REPO, resolved))
                    if fragment not in anchors(text_there):
                        broken.append(f"{path}: {target} (no heading #{fragment} in {resolved})")
        self.assertEqual(broken, [], "broken links:\n" + "\n".join(broken))

    def test_the_link_reader_finds_links_and_skips_code(self):
        text = "see [a](docs/a.md) and `[b](b.md)`\n\n    [c](c.md)\n```\n[d](d.md)\n```\n<img src=\"i.png\">"
        self.assertEqual(links(text), ["docs/a.md", "i.png"])


class Readme(unittest.TestCase):

    def test_readme_is_at_most_250_lines(self):
        lines = read(os.path.join(REPO, "README.md")).count("\n")
        self.assertLessEqual(lines, README_MAX_LINES,
                             f"README.md has {lines} lines; topic pages belong in docs/")


if __name__ == "__main__":
    unittest.main()
