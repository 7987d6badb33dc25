#!/bin/sh
# Runs the test binaries given, then the Python tests (one process per
# module, $TEST_JOBS at a time), with each one's output kept in a log under
# $TEST_LOG_DIR (default build/test-logs): the expected error lines of
# negative tests stay there, and a failing binary's or module's log is
# printed whole. Prints one line per part and
# closes with one verdict for the whole run:
#     total: N passed, N failed, N skipped
# (N counts test cases: cmocka's and unittest's). Exits non-zero if any failed.
#   build-aux/run-tests.sh [--python PYTHON] BINARY...
set -u
python=""
if [ "${1:-}" = "--python" ]; then python=$2; shift 2; fi
logs=${TEST_LOG_DIR:-build/test-logs}
mkdir -p "$logs"
passed=0 failed=0 skipped=0 broken=""

# cmocka ends each group with "[  PASSED  ] N test(s)." and, when any
# failed or were skipped, "[  FAILED  ] N test(s), listed below:" or
# "[  SKIPPED ] N test(s), listed below:"; sums them over a log.
count() { # LABEL LOG (the label as cmocka pads it between its brackets)
    sed -n "s/^\[$1\] \([0-9]*\) test.*/\1/p" "$2" | awk '{ n += $1 } END { print n + 0 }'
}

for test in "$@"; do
    log="$logs/$(basename "$test").log"
    "$test" >"$log" 2>&1
    status=$?
    p=$(count "  PASSED  " "$log") f=$(count "  FAILED  " "$log") k=$(count "  SKIPPED " "$log")
    if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi   # crashed before its summary
    passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + k))
    if [ "$status" -ne 0 ]; then
        cat "$log"
        broken="$broken $(basename "$test")"
    fi
done
echo "C tests: $# binaries, $passed passed, $failed failed, $skipped skipped${broken:+ (failed:$broken)}"

if [ -n "$python" ]; then
    # One unittest process per test module, TEST_JOBS (default: the online
    # CPUs, at most 4) at a time; each module's log is its own.
    jobs=${TEST_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}
    [ "$jobs" -le 4 ] 2>/dev/null || jobs=4
    rm -f "$logs"/python-*.log "$logs"/python-*.status
    ls tests/test_*.py | sed 's|^tests/||' | xargs -P "$jobs" -I{} sh -c \
        '"$1" -m unittest discover -s tests -p "$2" >"$3/python-$2.log" 2>&1; echo $? >"$3/python-$2.status"' \
        run-one "$python" {} "$logs"
    ran=0 py_failed=0 py_skipped=0 broken=""
    for log in "$logs"/python-test_*.py.log; do
        module=${log#"$logs"/python-}; module=${module%.log}
        status=$(cat "$logs/python-$module.status" 2>/dev/null || echo 1)
        # unittest's closing lines: "Ran N tests in Xs", then "OK", "OK (skipped=K)"
        # or "FAILED (failures=A, errors=B, skipped=K)".
        n=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p' "$log" | tail -1)
        verdict=$(tail -1 "$log")
        field() { echo "$verdict" | sed -n "s/.*$1=\([0-9]*\).*/\1/p"; }
        failures=$(field failures) errors=$(field errors) k=$(field skipped)
        f=$(( ${failures:-0} + ${errors:-0} )) k=${k:-0}
        if [ -z "$n" ]; then n=0; [ "$f" -gt 0 ] || f=1; fi
        if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
        if [ "$status" -ne 0 ]; then cat "$log"; broken="$broken $module"; fi
        ran=$((ran + n)) py_failed=$((py_failed + f)) py_skipped=$((py_skipped + k))
    done
    py_passed=$((ran - py_failed - py_skipped))
    [ "$py_passed" -ge 0 ] || py_passed=0
    echo "Python tests: $ran run, $py_passed passed, $py_failed failed, $py_skipped skipped${broken:+ (failed:$broken)} (logs: $logs/python-*.log)"
    passed=$((passed + py_passed)) failed=$((failed + py_failed)) skipped=$((skipped + py_skipped))
fi

echo "total: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
