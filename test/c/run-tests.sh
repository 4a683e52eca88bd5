#!/bin/sh
# Runs each test executable given. Every "ok" line a test prints is a passed
# case; an executable that exits non-zero or whose output mentions a
# sanitizer counts as one failed case. Prints "N passed, N failed" last and
# exits non-zero if anything failed.
passed=0
failed=0

# A test that hangs fails after this many seconds; timeout signals its whole
# process group, so forked children end too.
limit=${WL_TEST_TIMEOUT:-300}

# TSan cannot map its shadow memory under some kernels' ASLR; retry such a
# run with ASLR disabled.
run() {
  out=$(timeout -k 10 "$limit" "$@" 2>&1)
  rc=$?
  case $out in
  *"unexpected memory mapping"*)
    out=$(timeout -k 10 "$limit" setarch "$(uname -m)" -R "$@" 2>&1)
    rc=$?
    ;;
  esac
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    out="$out
$1: timed out after $limit s"
  fi
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
