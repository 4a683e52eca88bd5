'use strict'

// Memory per held lock and per queued request: each point runs
// bench/memory.js in a fresh process with --expose-gc.

const { metricRow, shortSize } = require('../lib/rows')

const IMPLS = ['web-locks', 'built-in', 'async-mutex', 'async-lock']
const COLUMNS = { 'web-locks': 'web-locks', 'built-in': 'built-in', 'async-mutex': 'async-mutex', 'async-lock': 'async-lock' }
const KINDS = [
  { id: 'held', label: 'held lock (N distinct names)' },
  { id: 'queued', label: 'queued request (N on one name)' }
]

function sizes (opts) {
  return opts.quick ? [1e4, 1e5] : [1e4, 1e5, 1e6]
}

// A pilot at 1k (not shown: too small to weigh) tells run.js how the time
// grows with N, so that sizes an implementation cannot reach in time are
// skipped instead of killed.
function points (opts) {
  return KINDS.flatMap((k) => [...(opts.quick ? [] : [1e3]), ...sizes(opts)].map((n) => ({
    key: `memory/${k.id}/${n}`,
    label: `memory per ${k.id === 'held' ? 'held lock' : 'queued request'}, N = ${shortSize(n)}`,
    series: `memory-${k.id}`,
    size: n,
    script: 'memory.js',
    scale: ['perItemNs'],
    nodeArgs: ['--expose-gc'],
    params: { kind: k.id, n },
    // Quick runs: the references up to 10k only.
    impls: opts.quick && n > 1e4 ? ['web-locks'] : IMPLS
  })))
}

function rows (get, opts) {
  const out = []
  for (const k of KINDS) {
    for (const n of sizes(opts)) {
      const key = `memory/${k.id}/${n}`
      const what = `per ${k.id === 'held' ? 'held lock' : 'queued request'}, N = ${shortSize(n)}`
      out.push(metricRow(get, { id: `memory.${k.id}.${n}.rss`, label: `${what}: RSS (all)`, unit: 'B', key, metric: 'rss', columns: COLUMNS }))
      out.push(metricRow(get, { id: `memory.${k.id}.${n}.heap`, label: `${what}: of which JS heap`, unit: 'B', key, metric: 'heap', columns: COLUMNS }))
    }
  }
  return out
}

module.exports = {
  section: 'memory (growth of RSS and of the JS heap divided by N, after full GCs; a fresh process per point)',
  points,
  rows
}
