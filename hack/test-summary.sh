#!/usr/bin/env bash
# Passes `go test -v` output through and ends with a summary: the per-package result lines, the
# terraform and tofu binaries the tests ran (CAPTF_TEST_TOFU, CAPTF_TEST_TERRAFORM, exported by
# the Makefile) with their versions and the "binary check:" lines tests print for each, and the
# counts of passed, failed and skipped tests; before them, each Ginkgo failure's message (colours
# removed, at most 40 lines each), so the end of a long log says why a spec failed. Exits
# non-zero when any test or package failed.
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
echo "binaries:"
for var in CAPTF_TEST_TOFU CAPTF_TEST_TERRAFORM; do
  path=${!var:-}
  if [ -z "$path" ]; then
    echo "  $var: not set"
  elif [ -x "$path" ]; then
    echo "  $var: $("$path" version 2>/dev/null | head -1) ($path)"
  else
    echo "  $var: $path is missing"
  fi
done
grep -E '^binary check: ' "$log" | sed 's/^/  /' || true
if grep -qE '\[FAILED\]' "$log"; then
  echo "failures (Ginkgo's messages):"
  sed 's/\x1b\[[0-9;]*m//g' "$log" | awk '
    /^[[:space:]]*\[FAILED\] / && !/\[FAILED\] in \[/ { on = 1; n = 0 }
    on { if (n < 40) print "  " $0; n++ }
    on && /^[[:space:]]*In \[[A-Za-z]+\] at: / { on = 0; print "" }
  '
fi
echo "summary: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] && [ "$pkgfail" -eq 0 ]
