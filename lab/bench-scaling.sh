#!/bin/sh
# Scaling benchmark: how replay and tune time grow with a trace's length
# when its live blocks keep growing too (events x live blocks). For each
# event count it writes a random trace (vrambench gen-trace: sizes up to
# MAX_SIZE, live bytes never capped, so the reserved peak keeps rising and
# the live blocks at peak grow with the trace), replays it with each
# allocator of ALLOCATORS on the simulated device, and, with TUNE=1, times
# `vrambench tune` on it. Per row: the blocks of the segment map at peak,
# the command's wall seconds (every pass: memory pass, segment map, REPS
# timed repetitions, each on a fresh allocator, JSON), and events per
# second by CPU time (the allocator calls and the drive: reading the trace
# is not timed, docs/trace-format.md "Replaying a trace") of the first
# timed repetition, and the median, least and most of all REPS (the first
# is the slowest as a rule: docs/bench.md, "Long traces"). Host CPU timings
# on the simulated device: a benchmark to read, never a test to pass (the
# machine's load moves them).
#
#   lab/bench-scaling.sh [VRAMBENCH]        (make bench-scaling)
#   EVENTS='50000 100000 200000 400000' ALLOCATORS='caching expandable'
#   MAX_SIZE=256K SEED=1 REPS=5 TUNE=1 lab/bench-scaling.sh
set -eu
vrambench=${1:-build/vrambench}
events=${EVENTS:-50000 100000 200000 400000}
allocators=${ALLOCATORS:-caching}
max_size=${MAX_SIZE:-256K}
seed=${SEED:-1}
tune=${TUNE:-0}
reps=${REPS:-5}
python=${PYTHON:-python3}

[ -x "$vrambench" ] || { echo "bench-scaling: no $vrambench (make it first)" >&2; exit 2; }
case $tune in 0|1) ;; *) echo "bench-scaling: TUNE='$tune': 1 (tune too) or 0" >&2; exit 2 ;; esac
case $reps in ''|*[!0-9]*|0*) echo "bench-scaling: REPS='$reps': a whole number of repetitions from 1" >&2; exit 2 ;; esac
work=$(mktemp -d "${TMPDIR:-/tmp}/vrambench-scaling-XXXXXX")
trap 'rm -rf "$work"' EXIT

now() { date +%s.%N; }
seconds() { echo "$1 $2" | awk '{ printf "%.2f", $2 - $1 }'; }

# Blocks at peak; events/s by CPU time of the first timed repetition, and
# the median, least and most of all of them.
figures() {
    "$python" - "$1" <<'EOF'
import json, statistics, sys
entries = [b for b in json.load(open(sys.argv[1]))["benchmarks"] if b.get("run_type") == "iteration"]
blocks = sum(len(segment["blocks"]) for segment in entries[0].get("segments_at_peak", []))
rates = [e["events"] / (e["cpu_time"] * 1e-9) / 1e6 if e["cpu_time"] else 0.0 for e in entries]
print(f"{blocks:>9} {rates[0]:>9.2f} {statistics.median(rates):>9.2f} {min(rates):>6.2f}-{max(rates):<6.2f}")
EOF
}

echo "bench-scaling: random traces (gen-trace --max-size $max_size --max-live 1000G --seed $seed), sim device," \
    "$reps timed repetitions, M events/s by CPU time"
printf '%-10s %-12s %9s %9s %9s %9s %13s\n' events allocator blocks wall_s first median range
for n in $events; do
    trace="$work/random-$n.trace"
    "$vrambench" gen-trace random --seed "$seed" --events "$n" --max-size "$max_size" --max-live 1000G \
        --quiet -o "$trace" >/dev/null
    for allocator in $allocators; do
        start=$(now)
        "$vrambench" replay "$trace" --allocator "$allocator" --device sim --repetitions "$reps" \
            --out "$work/replay.json" >/dev/null 2>"$work/replay.err" || {
            # its error line, not a bare make error (ALLOCATORS=bogus)
            echo "bench-scaling: replay of $n events with $allocator failed:" >&2
            cat "$work/replay.err" >&2
            exit 1
        }
        wall=$(seconds "$start" "$(now)")
        set -- $(figures "$work/replay.json")
        printf '%-10s %-12s %9s %9s %9s %9s %13s\n' "$n" "$allocator" "$1" "$wall" "$2" "$3" "$4"
    done
    if [ "$tune" = 1 ]; then
        start=$(now)
        "$vrambench" tune "$trace" --quiet --out "$work/tune.json" >/dev/null
        printf '%-10s %-12s %9s %9s\n' "$n" "(tune)" "" "$(seconds "$start" "$(now)")"
    fi
done
