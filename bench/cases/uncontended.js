'use strict'

// Uncontended request/release in one thread: each request is awaited
// before the next, so the lock is always free when asked for.

const { load } = require('../lib/references')
const { measure, nowNs, warmup } = require('../lib/measure')
const { metricRow } = require('../lib/rows')

const VARIANTS = [
  { cb: 'sync', names: 1 },
  { cb: 'async', names: 1 },
  { cb: 'sync', names: 1000 },
  { cb: 'async', names: 1000 }
]

function points (opts) {
  const impls = ['web-locks', 'built-in', 'async-mutex', 'async-lock', 'promise']
  if (opts.current) impls.push('web-locks@current')
  return VARIANTS.map((v) => ({
    key: `uncontended/${v.cb}/${v.names}`,
    label: `uncontended ${v.cb} callback, ${v.names} name${v.names > 1 ? 's' : ''}`,
    params: { ...v, ops: opts.quick ? 20000 : 50000, warmupMs: opts.quick ? 150 : 300 },
    passes: opts.quick ? 1 : 5,
    rounds: opts.quick ? 3 : 4,
    impls
  }))
}

async function run (params, implId, ctx) {
  const ops = params.ops
  if (implId === 'promise') {
    const loop = async (n) => {
      const t0 = nowNs()
      for (let i = 0; i < n; i++) await Promise.resolve()
      return (nowNs() - t0) / n
    }
    return measure(async (m) => { m.op = await loop(ops) }, { ...ctx, warmup: () => warmup(loop, params.warmupMs) })
  }
  const locks = load(implId)
  const names = Array.from({ length: params.names }, (_, i) => `n${i}`)
  const callback = params.cb === 'sync' ? () => {} : async () => {}
  const loop = async (n) => {
    const t0 = nowNs()
    for (let i = 0; i < n; i++) await locks.request(names[i % names.length], callback)
    return (nowNs() - t0) / n
  }
  return measure(async (m) => { m.op = await loop(ops) }, { ...ctx, warmup: () => warmup(loop, params.warmupMs) })
}

function rows (get, opts) {
  const columns = { 'web-locks': 'web-locks', 'built-in': 'built-in', 'async-mutex': 'async-mutex', 'async-lock': 'async-lock', floor: 'promise' }
  if (opts.current) columns['web-locks@current'] = 'web-locks@current'
  return VARIANTS.map((v) => metricRow(get, {
    id: `uncontended.${v.cb}.${v.names}`,
    label: `request+release, ${v.cb} callback, ${v.names === 1 ? '1 name' : '1,000 names'}`,
    unit: 'ns',
    key: `uncontended/${v.cb}/${v.names}`,
    metric: 'op',
    columns
  }))
}

module.exports = {
  section: '1 thread: uncontended request/release (time per request, awaited one at a time; floor: await Promise.resolve())',
  points,
  run,
  rows
}
