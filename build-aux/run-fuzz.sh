#!/bin/sh
# Runs each libFuzzer target for a fixed time from a copy of its seed corpus.
#   build-aux/run-fuzz.sh BUILD_DIR SECONDS TARGET...
# BUILD_DIR/fuzz/TARGET is the binary, tests/fuzz/corpus/NAME (TARGET without
# "fuzz_") its seeds. New inputs go to BUILD_DIR/corpus/NAME, a crashing one
# to BUILD_DIR/crashes/. Exit 1 when any target found a crash, a leak or UB.
set -u
build=$1 seconds=$2
shift 2
# libFuzzer takes -max_total_time=0 (what it makes of "abc", "0", "-1") as
# no limit: the run never ended. A whole number of seconds from 1, or an error.
case $seconds in
    ''|*[!0-9]*|0*) echo "make fuzz: error: FUZZ_SECONDS='$seconds': a whole number of seconds from 1 (default 20)" >&2
                    exit 2 ;;
esac
failed=""
for target in "$@"; do
    name=${target#fuzz_}
    corpus=$build/corpus/$name
    mkdir -p "$corpus" "$build/crashes"
    cp -n tests/fuzz/corpus/"$name"/* "$corpus"/ 2>/dev/null
    echo "fuzz: $target for ${seconds} s"
    # -rss_limit_mb: the reader must stay small whatever it is fed.
    if ! ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$build/fuzz/$target" -max_total_time="$seconds" -rss_limit_mb=1024 -max_len=65536 -timeout=10 \
        -print_final_stats=1 -artifact_prefix="$build/crashes/$target-" "$corpus" >"$build/$target.log" 2>&1; then
        tail -40 "$build/$target.log"
        failed="$failed $target"
    else
        grep -E '^stat::number_of_executed_units|^#[0-9]+.*DONE' "$build/$target.log" | sed "s/^/fuzz: $target: /"
    fi
done
if [ -n "$failed" ]; then
    echo "fuzz: FAILED:$failed (inputs under $build/crashes/)" >&2
    exit 1
fi
echo "fuzz: every target ran ${seconds} s clean"
