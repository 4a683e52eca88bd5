#!/usr/bin/env bash
# The machine-wide manager on the POSIX family of its OS layer
# (src/os/posix/: macOS's, which nothing here can run) on this Linux: the C
# tests built on it with ASan and UBSan (make -C test/c posix), then a copy
# of the package built with it (WEB_LOCKS_OS=posix) and the machine-wide
# suites against that copy. The threads' stress runs and the PostgreSQL
# ones are left out: no code of the family is in them.
set -euo pipefail
cd "$(dirname "$0")/../.."
make --no-print-directory -C test/c posix
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Other users run it too (machine-hostile.test.js, as root).
chmod 755 "$dir"
WEB_LOCKS_OS=posix bash test/tools/build-copy.sh --dir "$dir" >/dev/null
export WEB_LOCKS_PKG="$dir"
family=$(node -p "require('$dir/lib/binding.js').machineFamily()")
if [ "$family" != posix ]; then
  echo "posix: the copy built has the $family family" >&2
  exit 1
fi
npx mocha --no-config --timeout 60000 --require test/fixtures/postgres.js \
  --grep 'many threads|PostgreSQL|TCP proxy' --invert \
  test/machine.test.js test/machine-hostile.test.js test/machine-full-crash.test.js \
  test/keep-alive.test.js test/stress.test.js
WEB_LOCKS_TEST_AGENTS=processes npx mocha --config test/agents.mocharc.json
