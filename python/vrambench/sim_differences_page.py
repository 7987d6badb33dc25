#!/usr/bin/env python3
"""vrambench — renders docs/sim-differences.md from docs/data/sim-differences.json.

The data file lists the differences between a GPU's memory figures and the
simulated device's that `vrambench check-sim` accepts (app/sim_differences.h
reads it); this page is its rendering, for people. Edit the data file, then:

    python3 -m vrambench.sim_differences_page            # rewrites docs/sim-differences.md
    python3 -m vrambench.sim_differences_page --check    # exit 1 if the page is out of step

tests/test_sim_differences_doc.py fails when the committed page is not what
this renders. Standard library only (and the vrambench package's JSON parser and run_main)."""

import argparse
import os
import sys

if __package__ in (None, ""):  # loaded from its file: the package vrambench is one folder up
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from vrambench.output import run_main  # noqa: E402
from vrambench.results import parse_json  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "docs", "data", "sim-differences.json")
PAGE = os.path.join(ROOT, "docs", "sim-differences.md")

DIFFERENCE_KEYS = {"id", "title", "matches", "measured", "reason", "evidence"}


class DataError(ValueError):
    """The data file breaks the format check-sim reads."""


def _text(value, where):
    if not isinstance(value, str) or not value:
        raise DataError(f"{where}: missing or not a non-empty string")
    return value


def check(data):
    """Raises DataError unless `data` has the format app/sim_differences.h
    describes (the same checks as check-sim's)."""
    if not isinstance(data, dict):
        raise DataError("the file: not an object")
    unknown = set(data) - {"about", "version", "differences"}
    if unknown:
        raise DataError(f"the file: unknown key {sorted(unknown)[0]!r}")
    if data.get("version") != 1 or isinstance(data.get("version"), bool):
        raise DataError("version: not 1")
    differences = data.get("differences")
    if not isinstance(differences, list):
        raise DataError('"differences" is missing or not an array')
    ids = set()
    for index, difference in enumerate(differences):
        where = f"differences[{index}]"
        if not isinstance(difference, dict):
            raise DataError(f"{where}: not an object")
        unknown = set(difference) - DIFFERENCE_KEYS
        if unknown:
            raise DataError(f"{where}: unknown key {sorted(unknown)[0]!r}")
        for key in ("id", "title", "measured", "reason"):
            _text(difference.get(key), f"{where}.{key}")
        if difference["id"] in ids:
            raise DataError(f"{where}: id {difference['id']!r} is used twice")
        ids.add(difference["id"])
        evidence = difference.get("evidence")
        if not isinstance(evidence, list) or not evidence:
            raise DataError(f"{where}.evidence: not a non-empty array of strings")
        for i, item in enumerate(evidence):
            _text(item, f"{where}.evidence[{i}]")
        matches = difference.get("matches")
        if not isinstance(matches, list) or not matches:
            raise DataError(f"{where}.matches: not a non-empty array")
        for i, match in enumerate(matches):
            if not isinstance(match, dict) or set(match) != {"case", "figure"}:
                raise DataError(f"{where}.matches[{i}]: not an object of exactly \"case\" and \"figure\"")
            _text(match["case"], f"{where}.matches[{i}].case")
            _text(match["figure"], f"{where}.matches[{i}].figure")


def _cell(text):
    """Text for a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def render(data):
    """The page for `data` (checked first)."""
    check(data)
    lines = [
        "# Sim vs GPU: the documented differences",
        "",
        "<!-- Generated from docs/data/sim-differences.json by python/vrambench/sim_differences_page.py: edit those,",
        "     not this page (tests/test_sim_differences_doc.py checks that it is in step). -->",
        "",
        "`vrambench check-sim` (`make check-sim`, in CI) re-runs every case of GPU result files on the",
        "simulated device and lists each memory figure that differs. A difference passes only when one of",
        "the differences below names it: it is documented by the first (case, figure) pair, in the data",
        "file's order, whose patterns (shell wildcards, `fnmatch`) match its case and its figure. A case is",
        "`SCENARIO/ALLOCATOR`, `replay:TRACE/ALLOCATOR` or `claims:ID/ALLOCATOR`; a figure is a counter",
        "(`peak_reserved_bytes`), a timeline value (`timeline.reserved[INDEX 'STEP']`) or a claim's number.",
        "check-sim also names each pair that no given file showed, so a difference that is fixed leaves the",
        "list. check-sim reads the data file next to the binary's repository, or the one `--differences",
        "FILE` or `VRAMBENCH_SIM_DIFFERENCES` names. It runs from any directory: a replay's relative",
        "`trace_path` (as `replay` was given it: the committed results name traces from the repository's",
        "root) is looked for from the current directory, then from the results file's folder up to the",
        "repository root. The cases of an `external:` allocator are skipped (a results file never loads a",
        "library); an unknown allocator is an error (exit 2), and so is a check in which every case of the",
        "files given was skipped: nothing checked is not a pass. The facts the sim's models follow, and",
        "how they were measured: [sim-models.md](sim-models.md).",
        "",
        "| what differs | by how much (GPU vs sim) | why |",
        "|---|---|---|",
    ]
    for difference in data["differences"]:
        lines.append(f"| {_cell(difference['title'])} | {_cell(difference['measured'])} | "
                     f"{_cell(difference['reason'])} |")
    for difference in data["differences"]:
        lines += ["", f"## {difference['id']}", "", difference["title"], "", "Documents (case, figure):", ""]
        lines += [f"- `{match['case']}`, `{match['figure']}`" for match in difference["matches"]]
        lines += ["", f"Measured: {difference['measured']}.", "", "Evidence:", ""]
        lines += [f"- {item}" for item in difference["evidence"]]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DATA, help="the data file (default: %(default)s)")
    parser.add_argument("--out", default=PAGE, help="the page (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is not what the data renders")
    args = parser.parse_args(argv)
    try:
        with open(args.data, encoding="utf-8") as file:
            page = render(parse_json(file.read()))
    except (OSError, ValueError) as error:  # DataError, json's errors and a duplicated key are ValueErrors
        print(f"gen_sim_differences_md: {args.data}: {error}", file=sys.stderr)
        return 2
    if args.check:
        try:
            with open(args.out, encoding="utf-8") as file:
                current = file.read()
        except OSError:
            current = None
        if current != page:
            print(f"gen_sim_differences_md: {args.out} is out of step with {args.data}; "
                  f"run python3 -m vrambench.sim_differences_page", file=sys.stderr)
            return 1
        return 0
    with open(args.out, "w", encoding="utf-8") as file:
        file.write(page)
    return 0


if __name__ == "__main__":
    run_main(main, "gen_sim_differences_md")
