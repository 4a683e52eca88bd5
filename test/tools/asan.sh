#!/usr/bin/env bash
# The addon built with AddressSanitizer and UndefinedBehaviorSanitizer, run
# under the mocha suite and a short stress run. The build goes to a copy of
# the package (test/tools/build-copy.sh), so ./build stays as it is; node
# itself is not instrumented, so the sanitizer runtimes are preloaded.
# Leak detection is off here (V8 keeps memory until exit by design); leaks
# are the valgrind run's business (test/tools/valgrind.sh).
#
#   test/tools/asan.sh [--stress-seconds N] [--no-mocha]
#
# Any sanitizer report fails the run: UBSan halts on the first error, ASan
# aborts, and the output is also searched for reports.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
seconds=10 mocha=1
while [ $# -gt 0 ]; do
  case $1 in
  --stress-seconds) seconds=$2; shift 2 ;;
  --no-mocha) mocha=0; shift ;;
  *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
dir=${WEB_LOCKS_ASAN_DIR:-${TMPDIR:-/tmp}/web-locks-asan}
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
echo "asan: building the addon in $dir"
"$root/test/tools/build-copy.sh" --dir "$dir" --cflags "$flags" --ldflags "-fsanitize=address,undefined" >/dev/null
# Make sure the build is instrumented.
# (nm's whole output first: grep -q would stop reading, and under pipefail
# nm's SIGPIPE would fail the check.)
syms=$(nm -D "$dir/build/Release/web_locks.node")
grep -q __asan_ <<<"$syms" || { echo "asan: the addon is not instrumented" >&2; exit 1; }

export WEB_LOCKS_PKG=$dir
export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allow_user_segv_handler=1:strict_string_checks=1:detect_stack_use_after_return=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
log=$(mktemp "${TMPDIR:-/tmp}/web-locks-asan.XXXXXX.log")
status=0
if [ "$mocha" = 1 ]; then
  echo "asan: mocha suite (log: $log)"
  (cd "$root" && "$root/node_modules/.bin/mocha" --timeout 30000) >>"$log" 2>&1 || status=$?
  grep -E "passing|failing|pending" "$log" | tail -3
fi
echo "asan: stress run, $seconds s"
node "$root/test/stress/run.js" --quiet --seconds "$seconds" >>"$log" 2>&1 || status=$?
tail -1 "$log" | cut -c1-300
if grep -qE "ERROR: AddressSanitizer|runtime error:|SUMMARY: (Address|UndefinedBehavior)Sanitizer" "$log"; then
  echo "asan: sanitizer reports in $log:" >&2
  grep -E -A20 "ERROR: AddressSanitizer|runtime error:" "$log" | head -60 >&2
  exit 1
fi
if [ "$status" != 0 ]; then
  echo "asan: a run failed (status $status); see $log" >&2
  exit "$status"
fi
echo "asan: clean (no AddressSanitizer or UBSan report)"
