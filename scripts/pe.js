'use strict'

// Reads what the checks need from a Windows PE file (a .node, node.exe):
// its machine, the names it imports from each DLL, and the names it
// exports. PE32+ only (x64, arm64), as every binary of interest is.

const fs = require('node:fs')

const MACHINES = { 0x8664: 'x64', 0xaa64: 'arm64', 0x14c: 'ia32' }

function readPE (file) {
  const b = fs.readFileSync(file)
  const bad = (what) => new Error(`${file}: not a PE32+ file (${what})`)
  if (b.length < 64 || b.readUInt16LE(0) !== 0x5a4d) throw bad('no MZ header')
  const pe = b.readUInt32LE(0x3c)
  if (pe + 24 > b.length || b.readUInt32LE(pe) !== 0x00004550) throw bad('no PE signature')
  const machine = MACHINES[b.readUInt16LE(pe + 4)] || `0x${b.readUInt16LE(pe + 4).toString(16)}`
  const nsections = b.readUInt16LE(pe + 6)
  const optSize = b.readUInt16LE(pe + 20)
  const opt = pe + 24
  if (b.readUInt16LE(opt) !== 0x20b) throw bad('not PE32+')
  const dirs = opt + 112
  const sections = []
  for (let i = 0, s = opt + optSize; i < nsections; i++, s += 40) {
    sections.push({ va: b.readUInt32LE(s + 12), size: Math.max(b.readUInt32LE(s + 8), b.readUInt32LE(s + 16)), raw: b.readUInt32LE(s + 20) })
  }
  const at = (rva) => {
    const s = sections.find((x) => rva >= x.va && rva < x.va + x.size)
    if (!s) throw bad(`RVA 0x${rva.toString(16)} in no section`)
    return rva - s.va + s.raw
  }
  const cstring = (off) => b.toString('latin1', off, b.indexOf(0, off))

  const imports = {}
  const importRva = b.readUInt32LE(dirs + 8)
  if (importRva !== 0) {
    for (let d = at(importRva); b.readUInt32LE(d + 12) !== 0; d += 20) {
      const names = (imports[cstring(at(b.readUInt32LE(d + 12)))] ||= [])
      const lookup = b.readUInt32LE(d) || b.readUInt32LE(d + 16)
      for (let t = at(lookup); ; t += 8) {
        const entry = b.readBigUInt64LE(t)
        if (entry === 0n) break
        names.push(entry >> 63n ? `#${entry & 0xffffn}` : cstring(at(Number(entry & 0x7fffffffn)) + 2))
      }
    }
  }

  const exports = []
  const exportRva = b.readUInt32LE(dirs)
  if (exportRva !== 0) {
    const e = at(exportRva)
    const count = b.readUInt32LE(e + 24)
    const names = at(b.readUInt32LE(e + 32))
    for (let i = 0; i < count; i++) exports.push(cstring(at(b.readUInt32LE(names + 4 * i))))
  }
  return { machine, imports, exports }
}

module.exports = { readPE }
