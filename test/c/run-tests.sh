#!/bin/sh
# Runs each test executable given. Every "ok" line a test prints is a passed
# case; an executable that exits non-zero or whose output mentions a
# sanitizer counts as one failed case. Prints "N passed, N failed" last and
# exits non-zero if anything failed.
passed=0
failed=0

# TSan cannot map its shadow memory under some kernels' ASLR; retry such a
# run with ASLR disabled.
run() {
  out=$("$1" 2>&1)
  rc=$?
  case $out in
  *"unexpected memory mapping"*)
    out=$(setarch "$(uname -m)" -R "$1" 2>&1)
    rc=$?
    ;;
  esac
}

for t in "$@"; do
  run "$t"
  printf '%s\n' "$out"
  ok=$(printf '%s\n' "$out" | grep -c '^ok ')
  passed=$((passed + ok))
  if [ "$rc" -ne 0 ] || printf '%s\n' "$out" | grep -q -e 'Sanitizer' -e 'runtime error'; then
    echo "not ok $t (exit status $rc)"
    failed=$((failed + 1))
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
