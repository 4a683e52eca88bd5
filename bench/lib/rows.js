'use strict'

// Building table rows from the outcomes of measurement points.
//
// A row: { id, label, unit, better: 'lower' | 'higher' | null, cells }
// where cells maps a column ('web-locks', 'built-in', 'async-mutex',
// 'async-lock', 'floor', 'web-locks@current') to a cell:
//   { value }                 a figure
//   { value, partial: true }  a figure measured before the run failed
//   { value, note }           a figure with a remark ('≤10k' for a growth
//                             exponent over fewer sizes)
//   { fail, detail }          'fails: RangeError', 'hangs', 'too slow', ...

const { growthExponent } = require('./stats')

function cellOf (outcome, metric) {
  if (!outcome) return undefined
  if (outcome.result && typeof outcome.result[metric] === 'number' && !Number.isNaN(outcome.result[metric])) {
    return { value: outcome.result[metric] }
  }
  if (outcome.partial && typeof outcome.partial[metric] === 'number' && !Number.isNaN(outcome.partial[metric])) {
    return { value: outcome.partial[metric], partial: true }
  }
  if (outcome.fail) return { fail: outcome.fail, detail: outcome.detail }
  return undefined
}

// columns: { column: implId } for the implementations this row shows.
function metricRow (get, { id, label, unit, better = 'lower', key, metric, columns }) {
  const cells = {}
  for (const [column, impl] of Object.entries(columns)) {
    const cell = cellOf(get(key, impl), metric)
    if (cell) cells[column] = cell
  }
  return { id, label, unit, better, cells }
}

function shortSize (n) {
  return n >= 1e6 ? `${n / 1e6}M` : n >= 1e3 ? `${n / 1e3}k` : String(n)
}

// The growth exponent of `metric` over the sizes of a series.
function growthRow (get, { id, label, sizes, keyOf, metric, columns }) {
  const cells = {}
  for (const [column, impl] of Object.entries(columns)) {
    const xs = []
    const ys = []
    let firstFail = null
    for (const n of sizes) {
      const cell = cellOf(get(keyOf(n), impl), metric)
      if (cell && cell.value !== undefined) {
        xs.push(n)
        ys.push(cell.value)
      } else if (cell && !firstFail) {
        firstFail = cell.fail ? cell : { fail: 'fails', detail: 'failed after this metric' }
      }
    }
    if (xs.length >= 2) {
      const note = xs.length < sizes.length ? `${shortSize(xs[0])}-${shortSize(xs[xs.length - 1])}` : undefined
      cells[column] = { value: growthExponent(xs, ys), note }
    } else if (firstFail) {
      cells[column] = { fail: firstFail.fail, detail: firstFail.detail }
    }
  }
  return { id, label, unit: 'exponent', better: null, cells }
}

// The rows of a case measured at sizes ns (burst, held): each metric per
// size, the unrelated request before and after in the largest run that got
// there, and each metric's growth exponent.
//   spec: { prefix, sizeLabel: (n) => string, metrics: [[metric, label, growthLabel]],
//           noneLabel, afterLabel, columns }
function sizedRows (get, ns, spec) {
  const { prefix, sizeLabel, metrics, noneLabel, afterLabel, columns } = spec
  const keyOf = (n) => `${prefix}/${n}`
  const out = []
  for (const n of ns) {
    for (const [metric, what] of metrics) {
      out.push(metricRow(get, { id: `${prefix}.${n}.${metric}`, label: `${sizeLabel(n)}: ${what}`, unit: 'ns', key: keyOf(n), metric, columns }))
    }
  }
  const largest = (metric) => (key, impl) => {
    for (const n of [...ns].reverse()) {
      const o = get(keyOf(n), impl)
      if (o && o.result && o.result[metric] !== undefined) return o
    }
    return get(keyOf(ns[ns.length - 1]), impl)
  }
  out.push(metricRow(largest('unrelated0'), { id: `${prefix}.none.unrelated`, label: noneLabel, unit: 'ns', key: null, metric: 'unrelated0', columns }))
  out.push(metricRow(largest('unrelatedAfter'), { id: `${prefix}.after.unrelated`, label: afterLabel, unit: 'ns', key: null, metric: 'unrelatedAfter', columns }))
  const range = `${shortSize(ns[0])}-${shortSize(ns[ns.length - 1])}`
  for (const [metric, , growthWhat] of metrics) {
    out.push(growthRow(get, { id: `${prefix}.growth.${metric}`, label: `growth exponent ${range}: ${growthWhat}`, sizes: ns, keyOf, metric, columns }))
  }
  return out
}

module.exports = { cellOf, metricRow, growthRow, shortSize, sizedRows }
