#!/usr/bin/env node
'use strict'

// Runs the mocha suite against the package as it ships: the tarball `npm
// pack` makes (its prepack builds the prebuilds, scripts/prebuild.js),
// unpacked as an install puts it, with no build/ directory, so that
// node-gyp-build loads the prebuilt binary for the platform the suite runs
// on.
//
//   node scripts/test-shipped.js            this machine's node (linux-x64, glibc)
//   node scripts/test-shipped.js --node 26  Node 26 from npm (node-matrix.js's
//                                           cache), so that CI's run of the
//                                           newest Node is this one
//   node scripts/test-shipped.js --arm64    an arm64 node under qemu-user (linux-arm64,
//                                           glibc), the process-wide suites only
//
// Under qemu-user the machine-wide manager cannot run (qemu answers
// futex_waitv and the robust-list calls with ENOSYS: it refuses to open), so
// --arm64 runs the suites of the process-wide manager and the polyfill
// (scripts/arm64-node.js says what the machine needs for it).

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const { arm64Node } = require('./arm64-node.js')
const { ensureNode } = require('./node-matrix.js')

const ROOT = path.resolve(__dirname, '..')
const ARM64_SUITES = ['request', 'threads', 'steal', 'signal', 'query', 'keep-alive', 'thread-end', 'polyfill', 'esm', 'names', 'validation']

function fail (message) {
  console.error(`test-shipped: ${message}`)
  process.exit(1)
}

function run (command, args, options = {}) {
  const r = spawnSync(command, args, Object.assign({ stdio: 'inherit' }, options))
  if (r.error) fail(`${command}: ${r.error.message}`)
  return r.status
}

function pack (dir) {
  const r = spawnSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 64 << 20 })
  if (r.status !== 0) fail('npm pack failed')
  const report = JSON.parse(r.stdout.slice(r.stdout.search(/^\[$/m)))[0]
  const tarball = path.join(dir, report.filename)
  const pkg = path.join(dir, 'node_modules', 'web-locks')
  fs.mkdirSync(pkg, { recursive: true })
  if (run('tar', ['xzf', tarball, '-C', pkg, '--strip-components', '1']) !== 0) fail('tar failed')
  return pkg
}

// The binary that node-gyp-build picks for that node is the shipped one.
function loadsPrebuild (bin, env, pkg, arch) {
  const want = path.join(pkg, 'prebuilds', `linux-${arch}`, 'web-locks.glibc.node')
  const r = spawnSync(bin, ['-p', `require('node-gyp-build').resolve(${JSON.stringify(pkg)})`], {
    cwd: pkg,
    encoding: 'utf8',
    env: Object.assign({}, process.env, env)
  })
  if (r.status !== 0 || r.stdout.trim() !== want) fail(`node-gyp-build picks ${r.stdout.trim() || r.stderr}, not ${want}`)
  console.log(`test-shipped: ${path.relative(pkg, want)} under Node ${spawnSync(bin, ['-v'], { encoding: 'utf8', env: Object.assign({}, process.env, env) }).stdout.trim()} (${arch})`)
}

function main () {
  const arm64 = process.argv.includes('--arm64')
  const at = process.argv.indexOf('--node')
  const major = at === -1 ? null : process.argv[at + 1]
  if (major !== null && !/^\d+$/.test(major || '')) fail('--node takes a major version, e.g. --node 26')
  if (major !== null && arm64) fail('--node and --arm64 do not go together')
  // Under the repository, so that the package finds its dependency and peer
  // dependency (node-gyp-build, pg) in the repository's node_modules, as it
  // finds them beside it in a user's.
  const tmp = fs.mkdtempSync(path.join(ROOT, '.shipped-'))
  let status
  try {
    const pkg = pack(tmp)
    const mocha = path.join(ROOT, 'node_modules', 'mocha', 'bin', 'mocha.js')
    const { bin, env, missing } = arm64 ? arm64Node() : { bin: major ? ensureNode(Number(major), false) : process.execPath, env: {} }
    if (missing) fail(missing)
    loadsPrebuild(bin, env, pkg, arm64 ? 'arm64' : 'x64')
    if (arm64) {
      const files = ARM64_SUITES.map((s) => path.join('test', `${s}.test.js`))
      // Emulated, everything is several times slower: the timeout too.
      status = run(bin, [mocha, '--no-config', '--timeout', '40000', ...files], {
        cwd: ROOT,
        env: Object.assign({}, process.env, env, { WEB_LOCKS_PKG: pkg, WEB_LOCKS_TEST_NO_SCOPES: 'qemu-user has no futex_waitv' })
      })
    } else {
      status = run(bin, [mocha, '--ignore', 'test/runners.test.js'], {
        cwd: ROOT,
        env: Object.assign({}, process.env, { WEB_LOCKS_PKG: pkg })
      })
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
  process.exit(status)
}

if (require.main === module) main()

module.exports = { pack }
