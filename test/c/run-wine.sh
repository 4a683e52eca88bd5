#!/bin/sh
# Runs each Windows test executable given under wine, as run-tests.sh runs
# native ones: every "ok" line is a passed case; an executable that exits
# non-zero counts as one failed case. Each one's output goes to a file
# beside it (wine's programs cannot write to a pipe reliably), printed once
# it ends. Prints "N passed, N failed" last and exits non-zero if anything
# failed.
passed=0
failed=0
limit=${WL_TEST_TIMEOUT:-300}
export WINEDEBUG=${WINEDEBUG:--all}

for t in "$@"; do
  timeout -k 10 "$limit" wine "$t" >"$t.log" 2>&1
  rc=$?
  cat "$t.log"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "$t: timed out after $limit s"
  fi
  ok=$(grep -c '^ok ' "$t.log")
  passed=$((passed + ok))
  if [ "$rc" -ne 0 ]; then
    echo "not ok $t (exit status $rc)"
    failed=$((failed + 1))
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
