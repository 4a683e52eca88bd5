#!/usr/bin/env bash
# Builds the addon without the machine-wide manager (WEB_LOCKS_NO_SHARED, as
# binding.gyp does off Linux) in a copy of the package, checks that none of
# its files went in, and runs the process-wide suites and
# test/no-shared/ against that build.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp -r binding.gyp package.json src lib "$dir"/
ln -s "$PWD/node_modules" "$dir/node_modules"
(cd "$dir" && WEB_LOCKS_NO_SHARED=1 npm run build --silent >/dev/null)
symbols=$(nm "$dir/build/Release/web_locks.node")
for s in wl_segment_open wl__watch_start wl__recover wl__wake; do
  if grep -qw "$s" <<<"$symbols"; then
    echo "no-shared: $s is in the build" >&2
    exit 1
  fi
done
WEB_LOCKS_PKG="$dir" npx mocha --no-config --timeout 10000 \
  test/no-shared/no-shared.test.js test/request.test.js test/threads.test.js test/steal.test.js
