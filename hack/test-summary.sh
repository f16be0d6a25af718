#!/usr/bin/env bash
# Passes `go test -v` output through and ends with a summary: the per-package result lines and
# the counts of passed, failed and skipped tests. Exits non-zero when any test or package failed.
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
tee "$log"
pass=$(grep -cE '^\s*--- PASS' "$log")
fail=$(grep -cE '^\s*--- FAIL' "$log")
skip=$(grep -cE '^\s*--- SKIP' "$log")
pkgfail=$(grep -cE '^(FAIL|--- FAIL|panic:)' "$log")
echo
echo "== go test summary"
grep -E '^(ok|FAIL|\?)\s' "$log" | grep -v '\[no test files\]' || true
echo "summary: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] && [ "$pkgfail" -eq 0 ]
