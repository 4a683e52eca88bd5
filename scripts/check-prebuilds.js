#!/usr/bin/env node
'use strict'

// Checks the Linux binaries in prebuilds/ (or in the directory given) with
// readelf, for what cannot be run here:
// - each is an ELF shared object of its directory's architecture;
// - a glibc build needs no symbol version newer than glibc 2.28, and
//   libraries of glibc only; a musl build needs musl's libc.so only;
// - every symbol it imports is one the node process has: a Node-API or
//   libuv function that this node exports, or a function of its C library
//   (for musl: one that musl's libc.so defines, read from
//   /lib/<arch>-linux-musl/libc.so, Debian's musl package; the same list on every
//   architecture).
//
//   node scripts/check-prebuilds.js [dir]

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..')
const GLIBC_MAX = [2, 28]
const MACHINES = { x64: 'Advanced Micro Devices X86-64', arm64: 'AArch64' }
const NEEDED = { glibc: ['libc.so.6', 'libpthread.so.0', 'ld-linux-x86-64.so.2', 'ld-linux-aarch64.so.1'], musl: ['libc.so'] }
const MUSL_LIBC = `/lib/${execFileSync('gcc', ['-print-multiarch'], { encoding: 'utf8' }).trim().replace('-gnu', '-musl')}/libc.so`

function readelf (args, file) {
  return execFileSync('readelf', ['-W', ...args, file], { encoding: 'utf8', maxBuffer: 64 << 20 })
}

// Dynamic symbols: { name, version, defined }.
function dynamicSymbols (file) {
  const symbols = []
  for (const line of readelf(['--dyn-syms'], file).split('\n')) {
    const f = line.trim().split(/\s+/)
    if (f.length < 8 || !/^\d+:$/.test(f[0])) continue
    const [name, version] = f[7].split(/@+/)
    symbols.push({ name, version, defined: f[6] !== 'UND', type: f[3] })
  }
  return symbols
}

function exportsOf (file) {
  return new Set(dynamicSymbols(file).filter((s) => s.defined && (s.type === 'FUNC' || s.type === 'OBJECT' || s.type === 'IFUNC')).map((s) => s.name))
}

function versionTooNew (version) {
  const m = /^GLIBC_(\d+)\.(\d+)/.exec(version || '')
  if (!m) return false
  const [major, minor] = [Number(m[1]), Number(m[2])]
  return major > GLIBC_MAX[0] || (major === GLIBC_MAX[0] && minor > GLIBC_MAX[1])
}

function check (file, arch, libc, node, musl) {
  const problems = []
  const header = readelf(['-h'], file)
  if (!/Type:\s+DYN/.test(header)) problems.push('not a shared object')
  if (!header.includes(`Machine:                           ${MACHINES[arch]}`)) problems.push(`not ${MACHINES[arch]}`)
  const needed = [...readelf(['-d'], file).matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1])
  for (const lib of needed) {
    if (!NEEDED[libc].includes(lib)) problems.push(`needs ${lib}`)
  }
  for (const s of dynamicSymbols(file).filter((s) => !s.defined && s.name !== '')) {
    if (/^(napi|uv)_/.test(s.name)) {
      if (!node.has(s.name)) problems.push(`imports ${s.name}, which this node does not export`)
    } else if (libc === 'glibc') {
      if (!/^GLIBC_/.test(s.version || '') && !s.name.startsWith('__gmon') && !s.name.startsWith('_ITM') && s.name !== '__cxa_finalize') {
        problems.push(`imports ${s.name} from no glibc version`)
      }
      if (versionTooNew(s.version)) problems.push(`needs ${s.name}@${s.version}, newer than glibc ${GLIBC_MAX.join('.')}`)
    } else if (!musl.has(s.name)) {
      problems.push(`imports ${s.name}, which musl's libc.so does not define`)
    }
  }
  return problems
}

function main () {
  const dir = path.resolve(process.argv[2] || path.join(ROOT, 'prebuilds'))
  if (!fs.existsSync(MUSL_LIBC)) {
    console.error(`check-prebuilds: ${MUSL_LIBC} is missing (apt-get install musl-tools)`)
    process.exit(1)
  }
  const node = exportsOf(fs.realpathSync(process.execPath))
  const musl = exportsOf(MUSL_LIBC)
  let failed = 0
  let checked = 0
  for (const platform of fs.readdirSync(dir)) {
    const m = /^linux-(x64|arm64)$/.exec(platform)
    if (!m) continue
    for (const name of fs.readdirSync(path.join(dir, platform))) {
      const libc = /\.(glibc|musl)\.node$/.exec(name)
      const file = path.join(dir, platform, name)
      const problems = libc ? check(file, m[1], libc[1], node, musl) : ['names no C library (.glibc.node or .musl.node)']
      checked++
      if (problems.length > 0) failed++
      console.log(`${problems.length === 0 ? 'ok' : 'FAIL'} ${platform}/${name} (${fs.statSync(file).size} bytes)${problems.map((p) => `\n  ${p}`).join('')}`)
    }
  }
  if (checked === 0) {
    console.error(`check-prebuilds: no Linux prebuild in ${dir}`)
    process.exit(1)
  }
  process.exit(failed === 0 ? 0 : 1)
}

main()
