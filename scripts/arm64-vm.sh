#!/usr/bin/env bash
# The machine-wide manager on a real arm64 Linux kernel: the C core's tests
# (built for arm64) and its mocha file (test/machine.test.js, with an arm64
# node and the linux-arm64 glibc prebuild) in a virtual machine,
# qemu-system-aarch64 under software emulation. qemu-user cannot do this: it
# has no futex_waitv and no robust futex lists.
#
# The machine: Debian's arm64 kernel and busybox (apt-get download, kept in a
# cache), and an initramfs made here with the arm64 C library, node, the
# package, the tests and an /init that runs them, prints their results on
# the console and powers off. No disk, no network.
#
#   bash scripts/arm64-vm.sh        (npm run test:arm64-vm)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/web-locks/arm64-vm
mkdir -p "$CACHE"

need=()
command -v qemu-system-aarch64 >/dev/null || need+=(qemu-system-arm)
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
command -v cpio >/dev/null || need+=(cpio)
[ -f /usr/aarch64-linux-gnu/lib/libstdc++.so.6 ] || need+=(libc6-arm64-cross libstdc++6-arm64-cross libgcc-s1-arm64-cross)
if [ ${#need[@]} -gt 0 ]; then
  $sudo apt-get update
  $sudo apt-get install -y "${need[@]}"
fi

# Debian's arm64 kernel and busybox, downloaded once (the arm64 architecture
# is added to apt only for that, and removed again).
if [ ! -f "$CACHE/vmlinuz" ] || [ ! -f "$CACHE/busybox" ]; then
  $sudo dpkg --add-architecture arm64
  $sudo apt-get update
  image=$(apt-cache depends linux-image-arm64:arm64 | sed -n 's/.*Depends: \(linux-image-[0-9][^:]*-arm64\).*/\1/p' | head -1)
  dl=$(mktemp -d)
  (cd "$dl" && apt-get download "$image:arm64" busybox-static:arm64)
  $sudo dpkg --remove-architecture arm64
  $sudo apt-get update
  for deb in "$dl"/*.deb; do dpkg-deb -x "$deb" "$dl/x"; done
  cp "$(ls "$dl"/x/boot/vmlinuz-* | head -1)" "$CACHE/vmlinuz"
  cp "$dl/x/bin/busybox" "$CACHE/busybox"
  rm -rf "$dl"
fi

# The arm64 node (scripts/arm64-node.js) and the linux-arm64 glibc prebuild.
node_bin=$(node -e "const n = require('./scripts/arm64-node.js').arm64Node(); if (n.missing) { console.error(n.missing); process.exit(1) } console.log(n.bin)")
node scripts/prebuild.js --only linux-arm64-glibc >/dev/null 2>&1
make --no-print-directory -C test/c arm64-build >/dev/null

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,lib,proc,sys,dev,tmp,ctests,work/test,work/node_modules}
cp "$CACHE/busybox" "$root/bin/busybox"
cp -a /usr/aarch64-linux-gnu/lib/. "$root/lib/"
aarch64-linux-gnu-strip -o "$root/bin/node" "$node_bin"
cp test/c/build/arm64/test-* test/c/run-tests.sh "$root/ctests/"
rm -f "$root"/ctests/*.o
# The package as it ships (its files, the arm64 prebuild, its dependency),
# and the test with mocha and what mocha needs.
pkg="$root/work/node_modules/web-locks"
mkdir -p "$pkg/prebuilds/linux-arm64"
cp -r package.json lib polyfill.js polyfill "$pkg/"
cp prebuilds/linux-arm64/web-locks.glibc.node "$pkg/prebuilds/linux-arm64/"
cp -r test/machine.test.js test/fixtures "$root/work/test/"
node -e "
  // mocha, node-gyp-build and everything they depend on, as installed here.
  const path = require('path'), fs = require('fs')
  const seen = new Set()
  // Where Node finds package name from directory from (not through its
  // exports: some hide package.json).
  const find = (name, from) => {
    for (let d = from; ; d = path.dirname(d)) {
      const dir = path.join(d, 'node_modules', name)
      if (fs.existsSync(path.join(dir, 'package.json'))) return dir
      if (d === path.dirname(d)) throw new Error('cannot find ' + name + ' from ' + from)
    }
  }
  const add = (name, from) => {
    const dir = find(name, from)
    if (seen.has(dir)) return
    seen.add(dir)
    const deps = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).dependencies || {}
    for (const dep of Object.keys(deps)) add(dep, dir)
  }
  add('mocha', process.cwd())
  add('node-gyp-build', process.cwd())
  for (const dir of seen) console.log(path.relative(path.join(process.cwd(), 'node_modules'), dir))
" | while read -r dir; do
  mkdir -p "$root/work/node_modules/$(dirname "$dir")"
  cp -r "node_modules/$dir" "$root/work/node_modules/$dir"
done
cat > "$root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/shm
mount -t tmpfs shm /dev/shm
mount -t tmpfs tmp /tmp
ip link set lo up
echo "arm64-vm: $(uname -r) $(uname -m), $(nproc) CPUs"
cd /ctests
WL_TEST_TIMEOUT=900 sh ./run-tests.sh ./test-* > /tmp/c.log 2>&1
echo "arm64-vm: C tests exit $?"
grep -e '^not ok' -e 'passed,' -e 'assertion' /tmp/c.log
cd /work
WEB_LOCKS_PKG=/work/node_modules/web-locks /bin/node node_modules/mocha/bin/mocha.js --no-config --timeout 60000 test/machine.test.js > /tmp/mocha.log 2>&1
echo "arm64-vm: mocha exit $?"
grep -e 'passing' -e 'failing' -e 'pending' /tmp/mocha.log
grep -A12 '^  [0-9]*) ' /tmp/mocha.log | head -80
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$CACHE/initrd.cpio.gz"

log="$CACHE/console.log"
timeout 1500 qemu-system-aarch64 -M virt -cpu max -smp 2 -m 4096 -accel tcg,thread=multi -nic none \
  -kernel "$CACHE/vmlinuz" -initrd "$CACHE/initrd.cpio.gz" \
  -append "console=ttyAMA0 rdinit=/init panic=-1 quiet" -nographic -no-reboot -monitor none | tee "$log" | grep --line-buffered '^arm64-vm\|passed,\|not ok\|passing\|failing\|pending' || true
ok=1
grep -q 'arm64-vm: C tests exit 0' "$log" || ok=0
grep -q 'arm64-vm: mocha exit 0' "$log" || ok=0
[ "$ok" -eq 1 ] || { sed -n '/^arm64-vm: C tests exit/,$p' "$log"; echo "arm64-vm: FAILED (the console: $log)"; exit 1; }
echo "arm64-vm: the C tests and test/machine.test.js pass on arm64"
