'use strict'

// Figures and the table.

function sig3 (x) {
  if (x === 0) return '0'
  const digits = Math.max(0, 2 - Math.floor(Math.log10(Math.abs(x))))
  return x.toFixed(Math.min(digits, 2))
}

function time (ns) {
  if (ns < 1e3) return `${Math.round(ns)} ns`
  if (ns < 1e6) return `${sig3(ns / 1e3)} µs`
  if (ns < 1e9) return `${sig3(ns / 1e6)} ms`
  return `${sig3(ns / 1e9)} s`
}

function rate (perSecond) {
  if (perSecond >= 1e6) return `${sig3(perSecond / 1e6)}M/s`
  if (perSecond >= 1e3) return `${sig3(perSecond / 1e3)}k/s`
  return `${sig3(perSecond)}/s`
}

function bytes (b) {
  return `${Math.round(b).toLocaleString('en-US')} B`
}

function value (unit, v) {
  switch (unit) {
    case 'ns': return time(v)
    case 'ops/s': return rate(v)
    case 'B': return bytes(v)
    case 'exponent': return v.toFixed(2)
    case 'ratio': return v.toFixed(2)
    case 'x': return `${v.toFixed(2)}x`
    case 'count': return Math.round(v).toLocaleString('en-US')
    default: return String(v)
  }
}

function cell (unit, c) {
  if (!c) return ''
  if (c.fail) return c.fail
  let text = value(unit, c.value)
  if (c.note) text += ` (${c.note})`
  if (c.partial) text += '*'
  return text
}

// How many times better `ours` is than `other` (above 1: ours is better).
function advantage (row, ours, other) {
  if (!ours || !other || ours.value === undefined || other.value === undefined) return undefined
  if (row.better === 'lower') return ours.value > 0 ? other.value / ours.value : undefined
  if (row.better === 'higher') return other.value > 0 ? ours.value / other.value : undefined
  return undefined
}

function ratioText (x) {
  if (x === undefined || !Number.isFinite(x)) return ''
  return x >= 100 ? `${Math.round(x)}x` : `${x.toFixed(2)}x`
}

// columns: [{ title, get(row) -> string, left? }]; rows: [row | { section }]
function table (columns, rows) {
  const lines = []
  const body = rows.map((r) => (r.section ? r : columns.map((c) => c.get(r))))
  const widths = columns.map((c, i) => Math.max(c.title.length, ...body.filter(Array.isArray).map((b) => b[i].length)))
  const render = (cells) => cells.map((text, i) => (columns[i].left ? text.padEnd(widths[i]) : text.padStart(widths[i]))).join('  ').trimEnd()
  const total = widths.reduce((a, w) => a + w + 2, -2)
  lines.push(render(columns.map((c) => c.title)))
  lines.push('='.repeat(total))
  for (const b of body) {
    if (!Array.isArray(b)) {
      lines.push(`-- ${b.section} `.padEnd(total, '-'))
    } else {
      lines.push(render(b))
    }
  }
  return lines.join('\n')
}

module.exports = { time, rate, bytes, value, cell, advantage, ratioText, table }
