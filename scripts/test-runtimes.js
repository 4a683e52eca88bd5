#!/usr/bin/env node
'use strict'

// The package under the other runtimes (Linux x64), each from npm (cached:
// npm-cache.js). Bun (@oven/bun-linux-x64):
// - the mocha suites that apply to Bun, run by Bun: the process-wide
//   manager, the machine-wide one (its agents woken by the binding's waker
//   thread there: Bun has no uv_poll for addons), the polyfill, the
//   tracing channel, and test/bun.test.js (what differs under Bun);
// - the conformance suite again with agents in separate Bun processes on a
//   machine-wide scope (WEB_LOCKS_TEST_AGENTS=processes), and the
//   cross-process stress test on a machine-wide scope;
// - web-locks/polyfill under Bun's own runner: bun test --preload.
// Not the PostgreSQL manager (its tests need Node's child processes and
// servers).
// Deno (@deno/linux-x64-glibc): require() throws an ENOTSUP error that names
// the cause, and the process goes on (loading the addon would end it).
//
//   node scripts/test-runtimes.js

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { cachedPackage } = require('./npm-cache.js')

const ROOT = path.resolve(__dirname, '..')
const BUN = '@oven/bun-linux-x64@1.4'
const DENO = '@deno/linux-x64-glibc@2'
const SUITES = ['request', 'threads', 'steal', 'signal', 'query', 'keep-alive', 'thread-end', 'polyfill', 'esm', 'names',
  'validation', 'callback', 'classes', 'async-context', 'diagnostics', 'if-available', 'bad-input', 'token', 'abort-event', 'bun',
  'machine', 'machine-hostile', 'machine-full-crash', 'environment', 'acquire', 'tracing', 'deadlock', 'deadlock-edges', 'deadlock-model', 'deadlock-workload', 'inspect']

function fail (message) {
  console.error(`test-runtimes: ${message}`)
  process.exit(1)
}

function bun () {
  if (process.platform !== 'linux' || process.arch !== 'x64') fail('Bun is tested on Linux x64')
  return cachedPackage('bun', BUN, path.join('bin', 'bun'))
}

function run (bin, args, env = {}) {
  const r = spawnSync(bin, args, { cwd: ROOT, stdio: 'inherit', env: Object.assign({}, process.env, env) })
  if (r.error) fail(r.error.message)
  return r.status
}

// Under Deno, require() of the package and of its polyfill throws ENOTSUP,
// and the process goes on.
function denoRefuses () {
  const deno = cachedPackage('deno', DENO, 'deno')
  const script = `
    const seen = []
    for (const entry of [${JSON.stringify(ROOT)}, ${JSON.stringify(path.join(ROOT, 'polyfill.js'))}]) {
      try { require(entry); seen.push('loaded') } catch (e) { seen.push(e.code + ': ' + e.message) }
    }
    console.log(JSON.stringify(seen))`
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-deno-'))
  const file = path.join(dir, 'check.cjs')
  fs.writeFileSync(file, script)
  const r = spawnSync(deno, ['run', '-A', file], { cwd: dir, encoding: 'utf8' })
  fs.rmSync(dir, { recursive: true, force: true })
  let seen = []
  try {
    seen = JSON.parse(r.stdout)
  } catch {}
  const ok = r.status === 0 && seen.length === 2 && seen.every((s) => s.startsWith('ENOTSUP: web-locks: Deno'))
  console.log(`test-runtimes: Deno ${ok ? 'refuses with ENOTSUP, and goes on' : `FAILED (${r.status}): ${r.stdout}${r.stderr}`}`)
  return ok
}

function main () {
  const bin = bun()
  console.log(`test-runtimes: Bun ${spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout.trim()}`)
  const mocha = path.join(ROOT, 'node_modules', 'mocha', 'bin', 'mocha.js')
  // The PostgreSQL fixture's root hooks stop the server it starts for the
  // deadlock and inspect suites (without them the run never ends).
  const suites = run(bin, [mocha, '--no-config', '--timeout', '20000', '--require', path.join('test', 'fixtures', 'postgres.js'),
    ...SUITES.map((s) => path.join('test', `${s}.test.js`))], { WEB_LOCKS_DEADLOCK_WORKLOADS: '8' })
  const agents = run(bin, [mocha, '--config', path.join('test', 'agents.mocharc.json')], { WEB_LOCKS_TEST_AGENTS: 'processes' })
  const stress = run(bin, [mocha, '--no-config', '--grep', 'many processes on one scope', path.join('test', 'stress.test.js')])
  const polyfill = run(bin, ['test', '--preload', path.join(ROOT, 'polyfill.js'), path.join(ROOT, 'test', 'bun')])
  const deno = denoRefuses()
  process.exit([suites, agents, stress, polyfill].some((status) => status !== 0) || !deno ? 1 : 0)
}

main()
