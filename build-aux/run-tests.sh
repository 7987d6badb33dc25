#!/bin/sh
# Runs the test binaries given, then the Python tests, with each one's
# output kept in a log under $TEST_LOG_DIR (default build/test-logs): the
# expected error lines of negative tests stay there, and a failing binary's
# or the Python run's log is printed whole. Prints one line per part and
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
# failed, "[  FAILED  ] N test(s), listed below:"; sums them over a log.
count() { # PATTERN LOG
    sed -n "s/^\[  $1  \] \([0-9]*\) test.*/\1/p" "$2" | awk '{ n += $1 } END { print n + 0 }'
}

for test in "$@"; do
    log="$logs/$(basename "$test").log"
    "$test" >"$log" 2>&1
    status=$?
    p=$(count PASSED "$log") f=$(count FAILED "$log")
    if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi   # crashed before its summary
    passed=$((passed + p)) failed=$((failed + f))
    if [ "$status" -ne 0 ]; then
        cat "$log"
        broken="$broken $(basename "$test")"
    fi
done
echo "C tests: $# binaries, $passed passed, $failed failed${broken:+ (failed:$broken)}"

if [ -n "$python" ]; then
    log="$logs/python.log"
    "$python" -m unittest discover -s tests -p 'test_*.py' >"$log" 2>&1
    status=$?
    # unittest's closing lines: "Ran N tests in Xs", then "OK", "OK (skipped=K)"
    # or "FAILED (failures=A, errors=B, skipped=K)".
    ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p' "$log" | tail -1)
    verdict=$(tail -1 "$log")
    field() { echo "$verdict" | sed -n "s/.*$1=\([0-9]*\).*/\1/p"; }
    py_skipped=$(field skipped) py_failures=$(field failures) py_errors=$(field errors)
    py_failed=$(( ${py_failures:-0} + ${py_errors:-0} ))
    if [ -z "$ran" ]; then ran=0; py_failed=$((py_failed > 0 ? py_failed : 1)); fi
    if [ "$status" -ne 0 ] && [ "$py_failed" -eq 0 ]; then py_failed=1; fi
    py_passed=$((ran - py_failed - ${py_skipped:-0}))
    [ "$py_passed" -ge 0 ] || py_passed=0
    [ "$status" -eq 0 ] || cat "$log"
    echo "Python tests: $ran run, $py_passed passed, $py_failed failed, ${py_skipped:-0} skipped (log: $log)"
    passed=$((passed + py_passed)) failed=$((failed + py_failed)) skipped=$((skipped + ${py_skipped:-0}))
fi

echo "total: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
