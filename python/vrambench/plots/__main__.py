#!/usr/bin/env python3
"""Plots for vrambench results (matplotlib and the standard library only).

    python3 -m vrambench.plots RESULTS.json [MORE.json ...] [--out-dir out/plots]
            [--segments SCENARIO/ALLOCATOR] [--microbench MICRO.json]
    python3 -m vrambench.plots --latest out/results [--out-dir out/plots]

Reads results JSON as described in docs/results-json.md (Google Benchmark's
schema plus vrambench's counters, "timeline" and "segments_at_peak") and
writes PNGs into --out-dir:

  timeline-SCENARIO.png    requested and reserved bytes at each step
  peaks.png                peak reserved and overhead ratio per allocator
  latency.png              malloc/free p50 and p99 (per size with --microbench)
  empty_cache_loop.png     empty_cache every iteration / every N / never
  dataloader_batches.png   peak memory against batch size
  segments-SCEN-ALLOC.png  segment map at the moment of peak reserved
  compare.png              the first file against the second (compare-N.png
                           against the N-th when more are given)

All plots but compare.png come from the first file; a --microbench file
must come from the same device (--latest picks one of the same device, or
none). Bad input (a missing file, a JSON that is not a results file, wrong
types, NaN, numbers out of range, deep nesting, a microbench file of
another device) gets one error line and exit status 2 before any PNG is
written; a plot whose data the file lacks is skipped with a note. PNGs are
rendered into a temporary folder and moved into --out-dir only when all of
them succeeded.

This script is the thin command line of the package plots/: results.py
(the results model and loader, shared with python/vrambench/results_tables.py),
figures.py (one function per figure and their table), draw.py (units and
axes), cli.py (options and output).
"""

import os
import sys

# Run as a script, plots/ is on sys.path but its parent, where the package
# `plots` lives, is not.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from vrambench.plots.cli import run  # noqa: E402

if __name__ == "__main__":
    run()
