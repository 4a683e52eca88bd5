'use strict'

// T threads (2, 4, 8) contending on 1 or 16 names for a fixed time, each
// doing the same work per lock: throughput, fairness (the fewest locks any
// thread got over the most any got: 1 is perfectly fair, 0 starvation) and
// mutual-exclusion violations (a callback entered while another thread's
// callback on the same name had not left it).

const { parentPort } = require('worker_threads')
const { load } = require('../lib/references')
const { measure, nowMs } = require('../lib/measure')
const { startWorkers } = require('../lib/threads')
const { metricRow } = require('../lib/rows')
// A little CPU work in each critical section, the same as the processes'.
const { work } = require('../lib/processes')

const IMPLS = ['web-locks', 'built-in']
const START = 0 // the round the threads may start
const STOP = 1 // the round that must stop
const VIOLATIONS = 2
const INSIDE = 4 // + name index: callbacks inside, above 1 is a violation

function configs (opts) {
  const threads = opts.quick ? [2, 8] : [2, 4, 8]
  return threads.flatMap((t) => [1, 16].map((names) => ({ threads: t, names })))
}

function points (opts) {
  return configs(opts).map(({ threads, names }) => ({
    key: `contention/${threads}/${names}`,
    label: `${threads} threads contending on ${names} name${names > 1 ? 's' : ''}`,
    params: { threads, names, ms: opts.quick ? 250 : 1000 },
    rounds: opts.quick ? 2 : 3,
    passes: opts.quick ? 1 : 3,
    impls: IMPLS
  }))
}

async function run ({ threads, names, ms }, implId, ctx) {
  const sab = new SharedArrayBuffer(4 * (INSIDE + names))
  const i32 = new Int32Array(sab)
  const workers = await startWorkers('contention', Array.from({ length: threads }, (_, me) => ({ impl: implId, me, names, sab })))
  let roundNo = 0
  async function round (m, ms) {
    const r = ++roundNo
    const before = Atomics.load(i32, VIOLATIONS)
    Atomics.store(i32, START, r)
    Atomics.notify(i32, START)
    const t0 = nowMs()
    await new Promise((resolve) => setTimeout(resolve, ms))
    Atomics.store(i32, STOP, r)
    const elapsed = nowMs() - t0
    const ops = (await Promise.all(workers.map((w) => w.next()))).map((x) => x.ops)
    m.rate = ops.reduce((a, b) => a + b, 0) / (elapsed / 1000)
    m.fairness = Math.min(...ops) / Math.max(...ops)
    m.violations = Atomics.load(i32, VIOLATIONS) - before
  }
  return measure((m) => round(m, ms), { ...ctx, warmup: () => round({}, ms / 2) })
}

function worker ({ impl, me, names: count, sab }) {
  const i32 = new Int32Array(sab)
  const locks = load(impl)
  const names = Array.from({ length: count }, (_, i) => `contended-${i}`)
  const callbacks = names.map((_, k) => () => {
    if (Atomics.add(i32, INSIDE + k, 1) !== 0) Atomics.add(i32, VIOLATIONS, 1)
    work()
    Atomics.sub(i32, INSIDE + k, 1)
  })
  // Requests queued on the built-in do not keep a thread alive.
  setInterval(() => {}, 2 ** 30)
  let seed = 12345 + me * 7919
  parentPort.postMessage('ready')
  ;(async () => {
    for (let r = 1; ; r++) {
      Atomics.wait(i32, START, r - 1)
      let ops = 0
      while (Atomics.load(i32, STOP) < r) {
        seed = (seed * 1103515245 + 12345) & 0x7fffffff
        const k = count === 1 ? 0 : seed % count
        await locks.request(names[k], callbacks[k])
        ops++
      }
      parentPort.postMessage({ ops })
    }
  })()
}

function rows (get, opts) {
  const out = []
  const columns = { 'web-locks': 'web-locks', 'built-in': 'built-in' }
  for (const { threads, names } of configs(opts)) {
    const key = `contention/${threads}/${names}`
    const what = `${threads} threads, ${names} name${names > 1 ? 's' : ''}`
    out.push(metricRow(get, { id: `contention.${threads}.${names}.rate`, label: `${what}: locks per second`, unit: 'ops/s', better: 'higher', key, metric: 'rate', columns }))
    out.push(metricRow(get, { id: `contention.${threads}.${names}.fairness`, label: `${what}: fairness min/max`, unit: 'ratio', better: null, key, metric: 'fairness', columns }))
    out.push(metricRow(get, { id: `contention.${threads}.${names}.violations`, label: `${what}: violations`, unit: 'count', better: null, key, metric: 'violations', columns }))
  }
  return out
}

module.exports = {
  section: 'threads contending (each takes a lock, does the same small work, releases, again; fixed time)',
  points,
  run,
  worker,
  rows
}
