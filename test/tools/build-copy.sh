#!/usr/bin/env bash
# Builds a copy of the package in DIR (default: a new temporary directory)
# with extra compiler and linker flags, leaving ./build alone, and prints
# DIR. Point the tests at it with WEB_LOCKS_PKG=DIR.
#
#   test/tools/build-copy.sh [--dir DIR] [--cflags FLAGS] [--ldflags FLAGS]
#
# node-gyp's Makefiles take CFLAGS and LDFLAGS from the environment, so no
# change to binding.gyp is needed.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir= cflags= ldflags=
while [ $# -gt 0 ]; do
  case $1 in
  --dir) dir=$2; shift 2 ;;
  --cflags) cflags=$2; shift 2 ;;
  --ldflags) ldflags=$2; shift 2 ;;
  *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$dir" ] || dir=$(mktemp -d "${TMPDIR:-/tmp}/web-locks-copy.XXXXXX")
mkdir -p "$dir"
# What the package ships (its "files"), less prebuilt binaries.
files=$(cd "$root" && node -e '
  const p = require("./package.json");
  for (const f of p.files) if (!f.startsWith("prebuilds") && require("fs").existsSync(f)) console.log(f.replace(/\/$/, ""));')
rm -rf "$dir/build"
for f in $files package.json; do
  rm -rf "${dir:?}/$f"
  mkdir -p "$(dirname "$dir/$f")"
  cp -R "$root/$f" "$dir/$f"
done
[ -e "$dir/node_modules" ] || ln -s "$root/node_modules" "$dir/node_modules"
if [ -z "${npm_config_nodedir:-}" ] && [ -f /usr/include/node/node_api.h ]; then
  export npm_config_nodedir=/usr
fi
(
  cd "$dir"
  # npm puts its own node-gyp on PATH for the package's "build" script.
  CFLAGS="$cflags" LDFLAGS="$ldflags" npm run --silent build >build.log 2>&1 ||
    { cat build.log >&2; exit 1; }
)
echo "$dir"
