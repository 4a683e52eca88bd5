#!/usr/bin/env bash
# Installs the addon without the machine-wide manager as a user does
# (WEB_LOCKS_NO_MACHINE=1 at install; binding.gyp then leaves it out, as it
# does off Linux) in a copy of the package that has a matching prebuilt
# binary with the manager (this build, as prebuilds/), checks that the
# build made and loaded has none of its files, and runs the process-wide
# suites and test/no-machine/ against it.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp -r binding.gyp package.json src lib "$dir"/
mkdir -p "$dir/scripts" "$dir/prebuilds/linux-x64"
cp scripts/install.js "$dir/scripts/"
cp "$(node -p "require('node-gyp-build').resolve('.')")" "$dir/prebuilds/linux-x64/web-locks.glibc.node"
ln -s "$PWD/node_modules" "$dir/node_modules"
(cd "$dir" && WEB_LOCKS_NO_MACHINE=1 npm run install --silent >/dev/null)
addon=$(cd "$dir" && node -p "require('node-gyp-build').resolve('.')")
if [ "$addon" != "$dir/build/Release/web_locks.node" ]; then
  echo "no-machine: the addon loaded is $addon, not the build" >&2
  exit 1
fi
symbols=$(nm "$addon")
for s in wl_scope_open wl__watch_start wl__recover wl__wake; do
  if grep -qw "$s" <<<"$symbols"; then
    echo "no-machine: $s is in the build" >&2
    exit 1
  fi
done
WEB_LOCKS_PKG="$dir" npx mocha --no-config --timeout 10000 \
  test/no-machine/no-machine.test.js test/request.test.js test/threads.test.js test/steal.test.js
