#!/bin/sh
# Runs each test binary given, prints one line per binary and a closing
# "N passed, N failed" line; exits non-zero if any failed.
passed=0
failed=0
for test in "$@"; do
    if "$test"; then
        passed=$((passed + 1))
    else
        echo "FAILED: $test" >&2
        failed=$((failed + 1))
    fi
done
echo "test binaries: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
