#!/usr/bin/env bash
# A valgrind memcheck run of part of the mocha suite and of a short stress
# run (node under valgrind is some 30 times slower, hence the subset), with a
# debug build of the addon in a copy of the package (test/tools/build-copy.sh)
# so that reports have source lines. Fails on any definite leak, invalid read
# or write, or uninitialised use with a frame in the addon
# (valgrind-report.js); node's and V8's own noise is suppressed
# (valgrind.supp).
#
#   test/tools/valgrind.sh [--stress-seconds N] [mocha test files...]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
seconds=20
if [ "${1:-}" = "--stress-seconds" ]; then seconds=$2; shift 2; fi
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=(test/request.test.js test/steal.test.js test/signal.test.js test/thread-end.test.js test/names.test.js)
dir=${WEB_LOCKS_VALGRIND_DIR:-${TMPDIR:-/tmp}/web-locks-valgrind}
out=$(mktemp -d "${TMPDIR:-/tmp}/web-locks-valgrind-xml.XXXXXX")
echo "valgrind: building the addon (-O1 -g) in $dir; reports in $out"
"$root/test/tools/build-copy.sh" --dir "$dir" --cflags "-O1 -g -fno-omit-frame-pointer" >/dev/null
export WEB_LOCKS_PKG=$dir
vg=(valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite,indirect
  --errors-for-leak-kinds=definite --track-origins=no --num-callers=30
  --suppressions="$root/test/tools/valgrind.supp" --trace-children=yes
  --trace-children-skip='*/sh,*/bash,*/gcc,*/make'
  --xml=yes --xml-file="$out/vg.%p.xml" --error-exitcode=0)
cd "$root"
status=0
echo "valgrind: mocha ${specs[*]}"
"${vg[@]}" node "$root/node_modules/mocha/bin/mocha.js" --no-config --require "$root/test/tools/slow-timeouts.js" --timeout 20000 "${specs[@]}" >"$out/mocha.log" 2>&1 || status=$?
grep -E "passing|failing|^\s+[0-9]+\) " "$out/mocha.log" || tail -20 "$out/mocha.log"
echo "valgrind: stress run, $seconds s, 2 workers"
"${vg[@]}" node "$root/test/stress/run.js" --quiet --seconds "$seconds" --threads 2 >"$out/stress.log" 2>&1 || status=$?
tail -1 "$out/stress.log" | cut -c1-300
node "$root/test/tools/valgrind-report.js" "$out"/vg.*.xml || status=1
exit "$status"
