'use strict'

// Uncontended request/release through a scope (openLockManager), in one
// process, against the process-wide manager and proper-lockfile doing the
// same in the same run: each request is awaited before the next, so the
// lock is always free when asked for. What a scope adds: its state is in a
// shared file, behind a process-shared mutex, and every agent has a FIFO.

const { open } = require('../lib/references')
const { measure, nowNs, warmup } = require('../lib/measure')
const { metricRow } = require('../lib/rows')
const { COLUMNS } = require('../lib/scope')
const { withWine } = require('../lib/wine')
const uncontended = require('./uncontended')

const VARIANTS = ['sync', 'async']

function points (opts) {
  return VARIANTS.map((cb) => ({
    key: `scope/uncontended/${cb}`,
    label: `scope: uncontended ${cb} callback, 1 name`,
    // proper-lockfile takes tens of µs a lock (five file system calls):
    // fewer of them time as well.
    params: { cb, ops: opts.quick ? 20000 : 50000, lockfileOps: opts.quick ? 1000 : 3000, warmupMs: opts.quick ? 150 : 300 },
    passes: opts.quick ? 1 : 3,
    rounds: opts.quick ? 3 : 4,
    scratch: true,
    // --windows: on Linux and under wine, with the 1-thread case's floor.
    impls: opts.windows ? withWine(['web-locks-scope', 'promise']) : ['web-locks-scope', 'web-locks', 'proper-lockfile']
  }))
}

async function run (params, implId, ctx) {
  if (implId === 'promise') return uncontended.run(params, implId, ctx)
  const locks = await open(implId, { dir: ctx.dir, scope: `uncontended-${process.pid}` })
  const ops = implId === 'proper-lockfile' ? params.lockfileOps : params.ops
  const callback = params.cb === 'sync' ? () => {} : async () => {}
  const loop = async (n) => {
    const t0 = nowNs()
    for (let i = 0; i < n; i++) await locks.request('n0', callback)
    return (nowNs() - t0) / n
  }
  const warmupMs = implId === 'proper-lockfile' ? params.warmupMs * 2 : params.warmupMs
  return measure(async (m) => { m.op = await loop(ops) }, { ...ctx, warmup: () => warmup(loop, warmupMs) })
}

function rows (get) {
  return VARIANTS.map((cb) => metricRow(get, {
    id: `scope.uncontended.${cb}`,
    label: `request+release, ${cb} callback, 1 name`,
    unit: 'ns',
    key: `scope/uncontended/${cb}`,
    metric: 'op',
    columns: { ...COLUMNS, floor: 'promise', 'floor@wine': 'promise@wine' }
  }))
}

module.exports = {
  section: '1 process: uncontended request/release through a scope (time per request, awaited one at a time; process-wide: the same with require(\'web-locks\').locks)',
  windowsSection: '1 process: uncontended request/release through a scope (time per request, awaited one at a time; floor: await Promise.resolve())',
  table: 'scope',
  points,
  run,
  rows
}
