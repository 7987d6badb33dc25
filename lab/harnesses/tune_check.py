#!/usr/bin/env python3
"""`vrambench tune`'s predictions against real PyTorch (issue 12, item 5).

    lab/harnesses/tune_check.py plan TUNE.json [--settings N]
        the settings to run for real, one per line: INDEX|CONF|FRACTION
        (the recommendation, then N-1 others from the grid (default N=3): the
        first of the defaults, max_split_size_mb:512, expandable segments,
        roundup_power2_divisions:4 and max_split_size_mb:256 that are not the
        recommendation, then the settings with the lowest predictions that
        differ from those chosen); FRACTION is empty when none is needed
    lab/harnesses/tune_check.py table DIR [--settings N] [--out FILE.json]
        for every DIR/tune-NAME.json, the real runs DIR/real-NAME-INDEX/NAME.json
        (lab/harnesses/record_torch_traces.py --no-history under PYTORCH_ALLOC_CONF):
        a Markdown table of predicted against real peak reserved bytes on stdout,
        and the same as JSON in FILE.json

Standard library only. lab/gpu-session.sh stage tune-check runs both.
"""

import argparse
import json
import os
import sys

# The defaults, a max_split_size_mb (whose reserved memory grows on a large
# device, a prediction worth checking), expandable segments, a rounding and a
# smaller split limit (both change which equal-sized block best fit takes), in
# this order.
OTHERS = ("", "max_split_size_mb:512", "expandable_segments:True", "roundup_power2_divisions:4",
          "max_split_size_mb:256")
DEFAULT_SETTINGS = 3


def load(path):
    with open(path) as file:
        return json.load(file)


def pytorch_entries(tune):
    """conf -> entry, for the PyTorch settings of a tune result."""
    return {e["pytorch_alloc_conf"]: e for e in tune["benchmarks"] if "pytorch_alloc_conf" in e}


def plan(tune, count=DEFAULT_SETTINGS):
    """[(conf, memory_fraction or None)]: the recommendation and count - 1 others."""
    entries = pytorch_entries(tune)
    recommended = tune["recommendation"]["pytorch_alloc_conf"]
    chosen = [recommended]
    # Then the next best settings whose prediction differs from those chosen:
    # a check of more than one figure.
    ranked = sorted(entries, key=lambda conf: entries[conf]["peak_reserved_bytes"])
    for conf in list(OTHERS) + ranked:
        if len(chosen) == count:
            break
        if conf in chosen or conf not in entries or conf.startswith("backend:"):
            continue
        peaks = {entries[c]["peak_reserved_bytes"] for c in chosen}
        if conf in OTHERS or entries[conf]["peak_reserved_bytes"] not in peaks:  # (ranked: a new figure)
            chosen.append(conf)
    return [(conf, entries[conf].get("memory_fraction")) for conf in chosen]


def table(directory, count=DEFAULT_SETTINGS):
    """Rows of predicted against real peak reserved, per workload and setting."""
    rows = []
    for file in sorted(os.listdir(directory)):
        if not (file.startswith("tune-") and file.endswith(".json")):
            continue
        name = file[len("tune-"):-len(".json")]
        tune = load(os.path.join(directory, file))
        entries = pytorch_entries(tune)
        for index, (conf, fraction) in enumerate(plan(tune, count)):
            real_path = os.path.join(directory, f"real-{name}-{index}", f"{name}.json")
            real = load(real_path) if os.path.exists(real_path) else None
            predicted = entries[conf]["peak_reserved_bytes"]
            measured = real["peaks"]["reserved_bytes.all.peak"] if real else None
            rows.append({
                "workload": name,
                "pytorch_alloc_conf": conf,
                "memory_fraction": fraction,
                "recommended": index == 0,
                "predicted_peak_reserved_bytes": predicted,
                "real_peak_reserved_bytes": measured,
                "real_max_memory_reserved": real.get("max_memory_reserved") if real else None,
                "error_percent": 100.0 * (predicted - measured) / measured if measured else None,
                "predicted_min_capacity_bytes": entries[conf].get("min_capacity_bytes"),
                "real_num_alloc_retries": real["peaks"].get("num_alloc_retries") if real else None,
                "device": real.get("device_name") if real else None,
                "torch_version": real.get("torch_version") if real else None,
            })
    return rows


def markdown(rows):
    mib = lambda b: "-" if b is None else f"{b / 2**20:,.1f}"
    lines = ["| workload | PYTORCH_ALLOC_CONF | predicted peak reserved MiB | real MiB | error |",
             "|---|---|---:|---:|---:|"]
    for row in rows:
        conf = row["pytorch_alloc_conf"] or '""'
        if row["memory_fraction"] is not None:
            conf += f" + set_per_process_memory_fraction({row['memory_fraction']})"
        if row["recommended"]:
            conf += " (recommended)"
        error = "-" if row["error_percent"] is None else f"{row['error_percent']:+.2f}%"
        lines.append(f"| {row['workload']} | `{conf}` | {mib(row['predicted_peak_reserved_bytes'])} | "
                     f"{mib(row['real_peak_reserved_bytes'])} | {error} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tune_check.py", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    plan_parser = commands.add_parser("plan")
    plan_parser.add_argument("tune")
    table_parser = commands.add_parser("table")
    table_parser.add_argument("directory")
    for sub in (plan_parser, table_parser):
        sub.add_argument("--settings", type=int, default=DEFAULT_SETTINGS,
                         help=f"settings per workload, the recommendation included (default {DEFAULT_SETTINGS})")
    table_parser.add_argument("--out")
    args = parser.parse_args(argv)
    try:
        if args.command == "plan":
            if args.settings < 1:
                raise ValueError("--settings must be at least 1")
            for index, (conf, fraction) in enumerate(plan(load(args.tune), args.settings)):
                print(f"{index}|{conf}|{'' if fraction is None else fraction}")
            return 0
        rows = table(args.directory, args.settings)
    except (OSError, ValueError, KeyError) as error:
        print(f"tune_check: error: {error}", file=sys.stderr)
        return 2
    print(markdown(rows))
    if args.out:
        with open(args.out, "w") as file:
            json.dump({"rows": rows}, file, indent=2)
            file.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
