#!/usr/bin/env node
'use strict'

// macOS compile-and-link check (npm run check:darwin). Nothing here can run
// a macOS binary, so this is what can be known on Linux: the addon's sources,
// as binding.gyp selects them for macOS (OS 'mac', wl_machine 1, wl_posix 1:
// the machine-wide manager on the POSIX family, src/os/posix/, whose
// macOS-only lines this is the only build of), compile
// without a warning (-Werror) and link, for x86_64 macOS 10.15 and arm64
// macOS 11 (the prebuilds' targets), with
// Zig's C compiler (macOS's libc headers and libSystem stubs, from npm, as
// scripts/prebuild.js gets it). Each result is checked by reading it (Mach-O
// parsed here; Zig has no nm):
//
//   - a 64-bit Mach-O dylib of the target's CPU, loading libSystem only;
//   - every undefined symbol is either bound to libSystem by the linker, or
//     left to dynamic lookup (-undefined dynamic_lookup, as node-gyp links on
//     macOS: node supplies them at load) and then a Node-API or libuv
//     function that Node's headers declare. Anything else (a Linux-only
//     function, a typo) would make dlopen fail on a Mac.
//
// Also built once at -O0: an optimizer can drop calls into code a build
// leaves out (the Linux family's files), which at -O0 stay and would
// be undefined `wl_`/`wl__` symbols; -undefined dynamic_lookup links them
// anyway, so this looks for them. (Clang drops a branch whose condition is a
// constant even at -O0, so this finds the calls that survive that; gcc at -O0
// with -Wl,--no-undefined is make -C test/c portable.)
//
// First, a canary: a file with a call to an undefined wl__ function and to
// a function neither libSystem nor Node has is linked and must be caught, so
// that a reader which found no symbols cannot pass.
//
//   node scripts/check-darwin.js [--keep]    (--keep: leave the temp dir)

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
// binding.gyp read, Zig installed and Node's headers found as prebuild.js does.
const { gyp, nodeFunctions, nodeHeaders, zig: installedZig, MAC } = require('./prebuild.js')

const ROOT = path.resolve(__dirname, '..')
const LIBSYSTEM = '/usr/lib/libSystem.B.dylib'

// Mach-O constants (<mach-o/loader.h>, <mach-o/nlist.h>).
const MH_MAGIC_64 = 0xfeedfacf
const MH_DYLIB = 6
const CPU = { 0x01000007: 'x86_64', 0x0100000c: 'arm64' }
const LC_SYMTAB = 0x2
const LC_CODE_SIGNATURE = 0x1d
const LC_DYLIBS = new Set([0xc, 0x80000018, 0x8000001f, 0x20, 0x80000023]) // load, weak, reexport, lazy, upward
const N_STAB = 0xe0
const N_TYPE = 0x0e
const N_EXT = 0x01
const N_UNDF = 0x0
const DYNAMIC_LOOKUP_ORDINAL = 0xfe

const BUILDS = [
  { zig: 'x86_64-macos.10.15', cpu: 'x86_64' },
  { zig: 'aarch64-macos.11.0', cpu: 'arm64' },
  { zig: 'aarch64-macos.11.0', cpu: 'arm64', opt: '-O0' }
]

// A Mach-O file's CPU, type, dylibs and undefined external symbols (name and
// library ordinal: 1-based index into dylibs, or DYNAMIC_LOOKUP_ORDINAL).
function readMachO (file) {
  const b = fs.readFileSync(file)
  if (b.length < 32 || b.readUInt32LE(0) !== MH_MAGIC_64) {
    throw new Error(`not a 64-bit little-endian Mach-O file (starts ${b.subarray(0, 4).toString('hex')})`)
  }
  const cputype = b.readUInt32LE(4)
  const filetype = b.readUInt32LE(12)
  const ncmds = b.readUInt32LE(16)
  const dylibs = []
  let signed = false
  let symtab = null
  let off = 32
  for (let i = 0; i < ncmds; i++) {
    const cmd = b.readUInt32LE(off)
    const size = b.readUInt32LE(off + 4)
    if (LC_DYLIBS.has(cmd)) {
      const name = off + b.readUInt32LE(off + 8)
      dylibs.push(b.toString('latin1', name, b.indexOf(0, name)))
    } else if (cmd === LC_CODE_SIGNATURE) {
      signed = true
    } else if (cmd === LC_SYMTAB) {
      symtab = { symoff: b.readUInt32LE(off + 8), nsyms: b.readUInt32LE(off + 12), stroff: b.readUInt32LE(off + 16) }
    }
    off += size
  }
  const undefinedSymbols = []
  if (symtab) {
    for (let i = 0; i < symtab.nsyms; i++) {
      const e = symtab.symoff + i * 16 // struct nlist_64
      const type = b[e + 4]
      if ((type & N_STAB) || (type & N_TYPE) !== N_UNDF || !(type & N_EXT)) continue
      const name = symtab.stroff + b.readUInt32LE(e)
      undefinedSymbols.push({ name: b.toString('latin1', name, b.indexOf(0, name)), ordinal: (b.readUInt16LE(e + 6) >> 8) & 0xff })
    }
  }
  return { cpu: CPU[cputype] || `0x${cputype.toString(16)}`, filetype, dylibs, signed, symtab: symtab !== null, undefinedSymbols }
}

// What is wrong with a linked file, as a list of sentences (empty: nothing),
// and a summary of its imports.
function inspect (file, build, declared) {
  const problems = []
  const m = readMachO(file)
  if (m.cpu !== build.cpu) problems.push(`CPU is ${m.cpu}, not ${build.cpu}`)
  if (m.filetype !== MH_DYLIB) problems.push(`file type ${m.filetype}, not a dylib (${MH_DYLIB})`)
  if (!m.symtab) problems.push('no symbol table')
  // macOS on Apple silicon refuses code without a signature.
  if (m.cpu === 'arm64' && !m.signed) problems.push('not signed (an arm64 Mac would refuse to load it)')
  const others = m.dylibs.filter((d) => d !== LIBSYSTEM)
  if (others.length) problems.push(`loads ${others.join(', ')} (only ${LIBSYSTEM} is expected)`)
  const counts = { napi: 0, uv: 0, libSystem: 0 }
  const wl = []
  const unknown = []
  for (const { name, ordinal } of m.undefinedSymbols) {
    if (/^_wl_/.test(name)) wl.push(name)
    if (ordinal === DYNAMIC_LOOKUP_ORDINAL) {
      if (declared.has(name)) counts[name.startsWith('_uv_') ? 'uv' : 'napi']++
      else if (!/^_wl_/.test(name)) unknown.push(name)
    } else if (m.dylibs[ordinal - 1] === LIBSYSTEM) {
      counts.libSystem++
    } else {
      unknown.push(`${name} (library ordinal ${ordinal})`)
    }
  }
  if (wl.length) problems.push(`undefined symbols of the addon's own (a call into a file this build leaves out): ${wl.join(', ')}`)
  if (unknown.length) problems.push(`undefined symbols that are neither libSystem's nor a Node-API or libuv function of Node's headers: ${unknown.join(', ')}`)
  if (counts.napi === 0 || counts.libSystem === 0) problems.push(`no Node-API or no libSystem import found (${counts.napi}, ${counts.libSystem}): the symbol table was misread`)
  return { problems, summary: `${counts.napi} napi_, ${counts.uv} uv_ (dynamic lookup), ${counts.libSystem} libSystem` }
}

function zigCc (zig, args, cwd) {
  const started = Date.now()
  const r = spawnSync(zig, ['cc', ...args], { cwd, encoding: 'utf8', timeout: 300000 })
  const seconds = ((Date.now() - started) / 1000).toFixed(1)
  const failure = r.error || r.status !== 0 ? `${r.error ? r.error.message : `exit ${r.status}`}:\n${r.stderr}` : null
  return { failure, seconds }
}

const CANARY = `
void wl__canary_missing(void);
int epoll_create(int);
int napi_get_boolean(void *, int, void *);
int web_locks_canary(void) { wl__canary_missing(); napi_get_boolean(0, 0, 0); return epoll_create(1); }
`

// Whether inspect() catches what it must, on a file made to fail it.
function canary (zig, tmp, declared) {
  const source = path.join(tmp, 'canary.c')
  fs.writeFileSync(source, CANARY)
  const out = path.join(tmp, 'canary.node')
  const { failure } = zigCc(zig, ['-target', BUILDS[0].zig, '-shared', '-Wl,-undefined,dynamic_lookup', source, '-o', out], tmp)
  if (failure) return `the canary did not link: ${failure}`
  const { problems } = inspect(out, BUILDS[0], declared)
  const text = problems.join('\n')
  if (!text.includes('_wl__canary_missing') || !text.includes('_epoll_create') || text.includes('_napi_get_boolean')) {
    return `the canary's symbols were not reported as expected:\n  ${problems.join('\n  ') || '(no problems found)'}`
  }
  return null
}

function main () {
  const keep = process.argv.includes('--keep')
  const zig = installedZig()
  const headers = nodeHeaders()
  // With Mach-O's leading underscore.
  const declared = new Set([...nodeFunctions(headers)].map((name) => `_${name}`))
  const spec = gyp(MAC)
  const cflags = spec.cflags
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-darwin-'))
  const results = []
  try {
    const canaryFailure = canary(zig, tmp, declared)
    results.push({ label: 'canary', ok: !canaryFailure, text: canaryFailure || 'a missing wl__ function and a Linux-only one are caught' })
    for (const build of BUILDS) {
      const flags = build.opt ? [...cflags.filter((f) => !/^-O/.test(f)), build.opt] : cflags
      const label = `${build.zig} ${flags.filter((f) => /^-O/.test(f)).join(' ') || '(no -O)'}`
      const out = path.join(tmp, `${build.zig}${build.opt || ''}.node`)
      const args = ['-target', build.zig, '-shared', '-Wl,-undefined,dynamic_lookup', ...flags, '-Werror',
        ...spec.defines.map((d) => `-D${d}`), '-I', headers, ...spec.sources.map((s) => path.join(ROOT, s)), '-o', out]
      const { failure, seconds } = zigCc(zig, args, tmp)
      if (failure) {
        results.push({ label, ok: false, text: `compile/link failed (${seconds} s): ${failure}` })
        continue
      }
      const { problems, summary } = inspect(out, build, declared)
      results.push({
        label,
        ok: problems.length === 0,
        text: problems.length ? problems.join('\n  ') : `Mach-O ${build.cpu} dylib, ${fs.statSync(out).size} bytes; imports ${summary} (${seconds} s)`
      })
    }
  } finally {
    if (keep) console.log(`check-darwin: kept ${tmp}`)
    else fs.rmSync(tmp, { recursive: true, force: true })
  }
  console.log(`check-darwin: ${spec.sources.length} sources (${spec.sources.join(' ')}), ${spec.defines.map((d) => `-D${d}`).join(' ')}`)
  for (const r of results) console.log(`${r.ok ? 'ok  ' : 'FAIL'} ${r.label}: ${r.text}`)
  const failed = results.filter((r) => !r.ok).length
  console.log(failed ? `check-darwin: ${failed} of ${results.length} failed` : `check-darwin: all ${results.length} passed`)
  process.exitCode = failed ? 1 : 0
}

if (require.main === module) {
  try {
    main()
  } catch (e) {
    console.error(`check-darwin: ${e.message}`)
    process.exitCode = 1
  }
}

module.exports = { readMachO, inspect }
