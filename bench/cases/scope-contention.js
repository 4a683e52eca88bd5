'use strict'

// P processes (2, 4, 8) contending on one name through a scope, for a fixed
// time, each looping request(name) -> a short critical section -> release:
// grants per second, fairness (the fewest grants any process got over the
// most any got) and mutual-exclusion violations, against proper-lockfile
// doing the same. The critical section checks exclusion for real: it
// creates a marker file with O_EXCL, does the same small work as the thread
// case, and removes the marker; finding the marker there means another
// process is inside, a violation. Every round must end: a process still
// waiting long after the stop (a lost wake-up leaves one, and everyone
// behind it, waiting for ever) makes the point 'hangs'.

const path = require('path')
const { open } = require('../lib/references')
const { measure } = require('../lib/measure')
const { HangError, hostNs, startProcesses, stopProcesses, contend } = require('../lib/processes')
const { scopeRow } = require('../lib/scope')

const IMPLS = ['web-locks-scope', 'proper-lockfile']
const COUNTS = [2, 4, 8]
const START_MS = 200 // from the parent's go to the start: the messages' way, on a busy machine
// After the stop, each process is granted at most once more: if they have
// not all reported by then, some wait for ever. Under the orchestrator's
// idle limit (3 s), so that this case's own diagnosis is what it reports.
const HANG_MS = 2000

function points (opts) {
  return COUNTS.map((procs) => ({
    key: `scope/contention/${procs}`,
    label: `scope: ${procs} processes contending on 1 name`,
    params: { procs, ms: opts.quick ? 250 : 1000, hangMs: HANG_MS },
    rounds: opts.quick ? 2 : 3,
    passes: opts.quick ? 1 : 3,
    scratch: true,
    impls: IMPLS
  }))
}

async function run ({ procs: count, ms, hangMs }, implId, ctx) {
  const scope = `contention-${process.pid}`
  const procs = await startProcesses('scope-contention',
    Array.from({ length: count }, (_, me) => ({ me, impl: implId, dir: ctx.dir, scope })))
  let roundNo = 0
  async function round (m, ms) {
    const r = ++roundNo
    const startAt = hostNs() + START_MS * 1e6
    const stopAt = startAt + ms * 1e6
    const name = `contended-${r}`
    for (const p of procs) p.send({ round: r, name, startAt, stopAt, marker: path.join(ctx.dir, `inside-${r}`) })
    const settled = await Promise.allSettled(procs.map((p, i) => p.next(START_MS + ms + hangMs, `round ${r}, process ${i}`)))
    const failed = settled.find((s) => s.status === 'rejected')
    if (failed && !(failed.reason instanceof HangError)) throw failed.reason
    if (failed) {
      const silent = settled.filter((s) => s.status === 'rejected').length
      throw new HangError(`round ${r}: ${silent} of ${count} processes still waiting ${hangMs / 1000} s after the stop` +
        await scopeState(implId, ctx.dir, scope, name))
    }
    const results = settled.map((s) => s.value)
    const ops = results.map((x) => x.ops)
    m.rate = ops.reduce((a, b) => a + b, 0) / (ms / 1000)
    m.fairness = Math.min(...ops) / Math.max(...ops)
    m.violations = results.reduce((a, x) => a + x.violations, 0)
  }
  try {
    return await measure((m) => round(m, ms), { ...ctx, warmup: () => round({}, ms / 2) })
  } finally {
    await stopProcesses(procs)
  }
}

// For a hung round of a scope: who holds and who waits for the name (this
// process opens the scope to see).
async function scopeState (implId, dir, scope, name) {
  if (implId !== 'web-locks-scope') return ''
  try {
    const m = await open(implId, { dir, scope })
    const { held, pending } = await m.query()
    await m.close()
    const mine = (list) => list.filter((l) => l.name === name).length
    return `; the scope then had ${mine(held)} holder(s) and ${mine(pending)} waiting on the name`
  } catch (error) {
    return `; the scope could not be queried (${error.message})`
  }
}

// In each process.
async function proc ({ impl, dir, scope }) {
  const locks = await open(impl, { dir, scope })
  contend((name, callback) => locks.request(name, callback), (go) => ({ name: go.name, file: go.marker }))
}

function rows (get) {
  const out = []
  for (const procs of COUNTS) {
    const key = `scope/contention/${procs}`
    const what = `${procs} processes, 1 name`
    const threads = (metric) => ({ 'process-wide': { key: `contention/${procs}/1`, metric } })
    out.push(scopeRow(get, { id: `scope.contention.${procs}.rate`, label: `${what}: locks per second (process-wide: ${procs} threads)`, unit: 'ops/s', better: 'higher', key, metric: 'rate', from: threads('rate') }))
    out.push(scopeRow(get, { id: `scope.contention.${procs}.fairness`, label: `${what}: fairness min/max`, unit: 'ratio', better: null, key, metric: 'fairness', from: threads('fairness') }))
    out.push(scopeRow(get, { id: `scope.contention.${procs}.violations`, label: `${what}: violations`, unit: 'count', better: null, key, metric: 'violations', from: threads('violations') }))
  }
  return out
}

module.exports = {
  section: 'processes contending on 1 name (each takes the lock, O_EXCL-creates a marker, does the same small work, removes it, releases; fixed time)',
  table: 'scope',
  points,
  run,
  proc,
  rows
}
