#!/bin/bash
# vrambench on a Slurm cluster: a bench or a tune split over an array job, one
# shard per task (vrambench --shard I/N), then the merge and the report as a
# job that starts once every task succeeded (--dependency=afterok). The
# output folder must be on a filesystem every node sees. docs/fleet.md says
# more, and how the same shards run as a Kubernetes Indexed Job.
#
#   fleet/slurm-bench.sh [--mode bench|tune] [--traces DIR] [--shards N] [--out DIR]
#                        [--device sim|cuda] [--allocator SPEC[,SPEC]] [--scenario S[,S]]
#                        [--repetitions N] [--min-time S] [--no-plots]
#                        [--vrambench PATH] [--sbatch-args "ARGS"] [--dry-run]
#
#   --mode bench: `vrambench run` of the scenarios, or with --traces a `replay` of each
#          trace; tune: `vrambench tune` of each trace (needs --traces). Default bench.
#   --traces DIR: every file in DIR (not hidden) is a trace, e.g. --traces traces/
#   --shards N: array tasks, e.g. --shards 8 (default 4)
#   --out DIR: shards/, merged/, logs/ and report.html go here, e.g. --out /shared/vb (default out/fleet)
#   --device cuda: each task asks for a GPU (--gres=gpu:1); sim (default): no GPU, the
#          simulated device (memory figures exact, times host-side)
#   --allocator, --scenario, --repetitions, --min-time: as `vrambench run` takes them,
#          e.g. --allocator caching,expandable (bench only)
#   --no-plots: the report without plots (faster)
#   --vrambench PATH: the binary every node runs (default: build/vrambench of this checkout)
#   --sbatch-args "ARGS": more sbatch options for both jobs, e.g. "--partition=gpu --time=2:00:00"
#   --dry-run: print the two sbatch commands, submit nothing
#
# Internal: the jobs run this script again as `slurm-bench.sh task CONFIG` and
# `slurm-bench.sh finish CONFIG`; CONFIG (OUT/fleet.conf) holds the settings.
set -euo pipefail

die() { echo "slurm-bench: error: $*" >&2; exit 2; }

# ---- in the jobs ----------------------------------------------------------
if [ "${1:-}" = task ] || [ "${1:-}" = finish ]; then
    step=$1
    [ -r "${2:-}" ] || die "no config file '${2:-}'"
    # shellcheck source=/dev/null
    . "$2"
    cd "$out"
    if [ "$step" = task ]; then
        index=${SLURM_ARRAY_TASK_ID:?not in an array task}
        shard="$index/$shards"
        echo "slurm-bench: shard $shard on $(hostname) ($device)"
        if [ "$mode" = bench ] && [ ! -s traces.list ]; then
            "$vrambench" run --scenario "$scenario" --allocator "$allocator" --device "$device" \
                --repetitions "$repetitions" --min-time "$min_time" --shard "$shard" --quiet \
                --out "shards/run.shard-$index.json" >/dev/null
        fi
        while IFS= read -r trace; do
            [ -n "$trace" ] || continue
            name=$(basename "$trace")
            if [ "$mode" = bench ]; then
                "$vrambench" replay "$trace" --allocator "$allocator" --device "$device" \
                    --repetitions "$repetitions" --min-time "$min_time" --shard "$shard" --quiet \
                    --out "shards/replay-$name.shard-$index.json" >/dev/null
            else
                "$vrambench" tune "$trace" --device "$device" --shard "$shard" --quiet \
                    --out "shards/tune-$name.shard-$index.json" >/dev/null
            fi
        done < traces.list
        exit 0
    fi
    # finish: one merged file per run or trace, then the report of them all.
    mkdir -p merged
    groups=$(ls shards | sed -n 's/\.shard-[0-9]*\.json$//p' | sort -u)
    [ -n "$groups" ] || die "no shard files in $out/shards"
    for group in $groups; do
        "$vrambench" merge shards/"$group".shard-*.json -o "merged/$group.json"
    done
    report_args=()
    [ "$plots" = yes ] || report_args+=(--no-plots)
    "$vrambench" report merged/*.json -o report.html "${report_args[@]}"
    exit 0
fi

# ---- submitting -----------------------------------------------------------
here=$(cd "$(dirname "$0")/.." && pwd)
mode=bench traces="" shards=4 out=out/fleet device=sim allocator=all scenario=all
repetitions=1 min_time=0.1 plots=yes vrambench="$here/build/vrambench" sbatch_args="" dry_run=no
while [ $# -gt 0 ]; do
    case "$1" in
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --no-plots) plots=no; shift; continue ;;
    --dry-run) dry_run=yes; shift; continue ;;
    esac
    [ $# -ge 2 ] || die "unknown option or missing value: '$1' (see --help)"
    case "$1" in
    --mode) mode=$2 ;;
    --traces) traces=$2 ;;
    --shards) shards=$2 ;;
    --out) out=$2 ;;
    --device) device=$2 ;;
    --allocator) allocator=$2 ;;
    --scenario) scenario=$2 ;;
    --repetitions) repetitions=$2 ;;
    --min-time) min_time=$2 ;;
    --vrambench) vrambench=$2 ;;
    --sbatch-args) sbatch_args=$2 ;;
    *) die "unknown option '$1' (see --help)" ;;
    esac
    shift 2
done
case "$mode" in bench|tune) ;; *) die "bad --mode '$mode' (bench or tune)" ;; esac
case "$device" in sim|cuda) ;; *) die "bad --device '$device' (sim or cuda)" ;; esac
[[ "$shards" =~ ^[1-9][0-9]{0,4}$ ]] || die "bad --shards '$shards' (1 to 99999)"
[ -x "$vrambench" ] || die "no vrambench at '$vrambench' (build it with make, or name it with --vrambench)"
[ "$mode" = bench ] || [ -n "$traces" ] || die "--mode tune needs --traces DIR"
command -v sbatch >/dev/null 2>&1 || [ "$dry_run" = yes ] || die "sbatch not found: not on a Slurm submit host"
vrambench=$(cd "$(dirname "$vrambench")" && pwd)/$(basename "$vrambench")
# every check before anything is made: a bad argument leaves no folder behind
trace_list=""
if [ -n "$traces" ]; then
    [ -d "$traces" ] || die "--traces '$traces' is not a folder"
    traces=$(cd "$traces" && pwd)
    trace_list=$(find "$traces" -maxdepth 1 -type f ! -name '.*' | LC_ALL=C sort)
    [ -n "$trace_list" ] || die "no trace in '$traces'"
    dups=$(printf '%s\n' "$trace_list" | sed 's#.*/##' | sort | uniq -d)
    [ -z "$dups" ] || die "two traces named $dups"
fi
[ ! -e "$out" ] || [ -d "$out" ] || die "--out '$out' is not a folder"
mkdir -p "$out/shards" "$out/logs" 2>/dev/null || die "cannot make the folders of --out '$out'"
out=$(cd "$out" && pwd)
if [ -n "$trace_list" ]; then printf '%s\n' "$trace_list"; fi > "$out/traces.list"
rm -f "$out"/shards/*.json
config="$out/fleet.conf"
{
    for name in mode shards out device allocator scenario repetitions min_time plots vrambench; do
        printf '%s=%q\n' "$name" "${!name}"
    done
} > "$config"
gres=()
[ "$device" = cuda ] && gres=(--gres=gpu:1)
read -r -a extra <<< "$sbatch_args"
self="$here/fleet/slurm-bench.sh"
array_cmd=(sbatch --parsable --job-name=vrambench-shards --array="1-$shards" "${gres[@]}" "${extra[@]}"
           --output="$out/logs/shard-%a.log" "$self" task "$config")
if [ "$dry_run" = yes ]; then
    echo "${array_cmd[*]}"
    echo "sbatch --parsable --job-name=vrambench-merge --dependency=afterok:JOBID ${extra[*]} --output=$out/logs/merge.log $self finish $config"
    exit 0
fi
array_job=$("${array_cmd[@]}")
array_job=${array_job%%;*}
merge_job=$(sbatch --parsable --job-name=vrambench-merge --dependency="afterok:$array_job" "${extra[@]}" \
            --output="$out/logs/merge.log" "$self" finish "$config")
merge_job=${merge_job%%;*}
echo "slurm-bench: shards: job $array_job ($shards tasks); merge and report: job $merge_job (after the shards)"
echo "slurm-bench: the report will be $out/report.html; the merged results $out/merged/"
