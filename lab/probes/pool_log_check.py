#!/usr/bin/env python3
"""vrambench — checks the facts F11 and F12 (docs/sim-models.md) on logs
written by lab/probes/pool_trace.c (where the driver's pool placed each block of a
trace), and prints one line per log.

  lab/probes/pool_log_check.py LOG...

F11: after every event, the pool's reserved bytes (`r` lines, and the final
     reserved_high) equal 32 MiB x the most 32 MiB granules that live blocks
     covered at any one time so far.
F12: every block starts where an earlier freed block started, where an earlier
     block ended, or at the end of the addresses handed out so far (the
     high-water mark); a block goes past that mark only when no free range
     below it (the one reaching the mark included) holds it.
Blocks take their size rounded up to 512 B (every offset in the logs is a
512-B multiple). Exit status 1 when a fact fails for a log, 2 on bad input.
"""
import bisect
import sys

GRANULE = 32 << 20
ROUNDING = 512


class BadLog(Exception):
    """A log line that lab/probes/pool_trace.c does not write."""


def rounded(size):
    return (size + ROUNDING - 1) // ROUNDING * ROUNDING


def granules(offset, size):
    return range(offset // GRANULE, (offset + size - 1) // GRANULE + 1)


def largest_gap_below(live_offsets, live_size, high):
    """The largest free range between live blocks (and after them) below `high`."""
    largest, previous_end = 0, 0
    for offset in live_offsets:
        largest = max(largest, offset - previous_end)
        previous_end = max(previous_end, offset + live_size[offset])
    return max(largest, high - previous_end)


def check(path):
    live = {}                 # id -> (offset, size)
    live_size = {}            # offset -> size
    live_offsets = []         # sorted
    blocks_in = {}            # granule -> live blocks covering it
    covered = most_covered = 0
    freed_starts, block_ends = set(), set()
    high = 0
    counts = dict(blocks=0, start_ok=0, past_high=0, past_high_ok=0, reserved_lines=0, reserved_ok=0)
    with open(path) as log:
        for number, line in enumerate(log, 1):
            fields = line.split()
            if not fields or fields[0] == "base":
                continue
            try:
                if fields[0] == "a":
                    ident, size, offset = int(fields[1]), rounded(int(fields[2])), int(fields[4])
                    counts["blocks"] += 1
                    if offset in freed_starts or offset in block_ends or offset == high or offset == 0:
                        counts["start_ok"] += 1
                    if offset + size > high:
                        counts["past_high"] += 1
                        if largest_gap_below(live_offsets, live_size, high) < size:
                            counts["past_high_ok"] += 1
                    live[ident] = (offset, size)
                    live_size[offset] = size
                    bisect.insort(live_offsets, offset)
                    for g in granules(offset, size):
                        blocks_in[g] = blocks_in.get(g, 0) + 1
                        covered += blocks_in[g] == 1
                    most_covered = max(most_covered, covered)
                    block_ends.add(offset + size)
                    high = max(high, offset + size)
                elif fields[0] == "f":
                    offset, size = live.pop(int(fields[1]))
                    del live_size[offset]
                    live_offsets.pop(bisect.bisect_left(live_offsets, offset))
                    for g in granules(offset, size):
                        blocks_in[g] -= 1
                        covered -= blocks_in[g] == 0
                    freed_starts.add(offset)
                elif fields[0] == "end":
                    counts["reserved_lines"] += 1
                    high_mark = int(fields[1].split("=")[1])
                    counts["reserved_ok"] += high_mark == most_covered * GRANULE
                elif fields[0] == "r":
                    counts["reserved_lines"] += 1
                    counts["reserved_ok"] += int(fields[1]) == most_covered * GRANULE
                else:
                    raise ValueError("unknown line")
            except (ValueError, IndexError, KeyError) as error:
                raise BadLog(f"{path}:{number}: not a pool_trace log line ({error})") from error
    return counts


def main():
    if len(sys.argv) < 2:
        print("vrambench: error: usage: lab/probes/pool_log_check.py LOG...", file=sys.stderr)
        sys.exit(2)
    failed = False
    for path in sys.argv[1:]:
        try:
            c = check(path)
        except OSError as error:
            print(f"vrambench: error: {path}: {error.strerror}", file=sys.stderr)
            sys.exit(2)
        except BadLog as error:
            print(f"vrambench: error: {error}", file=sys.stderr)
            sys.exit(2)
        ok = (c["reserved_ok"] == c["reserved_lines"] and c["start_ok"] == c["blocks"]
              and c["past_high_ok"] == c["past_high"])
        failed |= not ok
        print(f"{path}: F11 {c['reserved_ok']}/{c['reserved_lines']} reserved changes and high marks; "
              f"F12 {c['start_ok']}/{c['blocks']} block starts, "
              f"{c['past_high_ok']}/{c['past_high']} past the high-water mark{'' if ok else '  FAILS'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
