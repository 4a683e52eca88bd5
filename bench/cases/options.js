'use strict'

// The request options: ifAvailable (lock free, lock held), a request with
// a signal that is never aborted, aborting queued requests one by one,
// steal (in one thread, and from another thread's holder), and mass abort:
// N requests queued with one shared signal, aborted at once.

const { parentPort } = require('worker_threads')
const { load } = require('../lib/references')
const { measure, nowMs, warmup, trackGc, Phases, settle, hold } = require('../lib/measure')
const { startWorkers } = require('../lib/threads')
const { metricRow, growthRow, shortSize } = require('../lib/rows')

const IMPLS = ['web-locks', 'built-in']
const COLUMNS = { 'web-locks': 'web-locks', 'built-in': 'built-in' }

const SIMPLE = [
  { id: 'ifavailable-free', label: 'ifAvailable, lock free: request+release' },
  { id: 'ifavailable-held', label: 'ifAvailable, lock held: request (gets null)' },
  { id: 'signal', label: 'with a signal never aborted: request+release' },
  { id: 'abort-one', label: 'abort one of 1,000 queued (own signals)' },
  { id: 'steal', label: 'steal a held lock, same thread (hold + steal)' },
  { id: 'steal-thread', label: "steal another thread's lock (hold + steal)" }
]

function massSizes (opts) {
  return opts.quick ? [1e3, 1e4] : [1e3, 1e4, 1e5, 1e6]
}

function points (opts) {
  const out = SIMPLE.map((c) => ({
    key: `options/${c.id}`,
    label: c.label,
    params: { kind: c.id, ops: (opts.quick ? 5000 : 20000) / (c.id === 'abort-one' ? 4 : 1), warmupMs: opts.quick ? 100 : 300 },
    impls: IMPLS
  }))
  for (const n of massSizes(opts)) {
    out.push({
      key: `options/mass-abort/${n}`,
      label: `mass abort of ${shortSize(n)} queued (one signal)`,
      series: 'mass-abort',
      size: n,
      work: Math.max(n, opts.quick ? 5000 : 20000),
      scale: ['enqueue', 'abort'],
      params: { kind: 'mass-abort', n, perRound: opts.quick ? 5000 : 20000 },
      rounds: n >= 1e6 || opts.quick ? 2 : undefined,
      // One shared signal makes request() O(listeners) in Node's EventTarget:
      // large sizes take minutes, not worth waiting for.
      timeoutMs: 45000,
      nodeArgs: ['--expose-gc'],
      impls: IMPLS
    })
  }
  return out
}

const forever = () => new Promise(() => {})
const ignore = () => {}

const LOOPS = {
  // Each returns async (n) => ns per operation.
  'ifavailable-free': (locks) => {
    const options = { ifAvailable: true }
    const callback = () => {}
    return async (n) => {
      const t0 = nowMs()
      for (let i = 0; i < n; i++) await locks.request('free', options, callback)
      return (nowMs() - t0) * 1e6 / n
    }
  },
  'ifavailable-held': async (locks) => {
    await hold(locks, 'held')
    const options = { ifAvailable: true }
    const callback = (lock) => {
      if (lock !== null) throw new Error('ifAvailable granted a held lock')
    }
    return async (n) => {
      const t0 = nowMs()
      for (let i = 0; i < n; i++) await locks.request('held', options, callback)
      return (nowMs() - t0) * 1e6 / n
    }
  },
  signal: (locks) => {
    const options = { signal: new AbortController().signal }
    const callback = () => {}
    return async (n) => {
      const t0 = nowMs()
      for (let i = 0; i < n; i++) await locks.request('signal', options, callback)
      return (nowMs() - t0) * 1e6 / n
    }
  },
  'abort-one': (locks) => {
    const callback = () => {}
    return async (n) => {
      const holder = await hold(locks, 'abort-one')
      let total = 0
      for (let done = 0; done < n; done += 1000) {
        const controllers = Array.from({ length: 1000 }, () => new AbortController())
        const promises = controllers.map((c) => locks.request('abort-one', { signal: c.signal }, callback).catch(ignore))
        await new Promise((resolve) => setImmediate(resolve))
        // Abort from the middle outwards: no position is favoured.
        const t0 = nowMs()
        for (let i = 0; i < 1000; i++) controllers[(i * 617) % 1000].abort()
        await Promise.all(promises)
        total += nowMs() - t0
      }
      holder.release()
      await holder.done
      return total * 1e6 / (Math.ceil(n / 1000) * 1000)
    }
  },
  steal: (locks) => {
    const options = { steal: true }
    const callback = () => {}
    return async (n) => {
      const t0 = nowMs()
      for (let i = 0; i < n; i++) {
        locks.request('steal', forever).catch(ignore)
        await locks.request('steal', options, callback)
      }
      return (nowMs() - t0) * 1e6 / n
    }
  },
  'steal-thread': async (locks, implId) => {
    const sab = new SharedArrayBuffer(16)
    const i32 = new Int32Array(sab)
    await startWorkers('options', [{ impl: implId, sab }])
    const options = { steal: true }
    const callback = () => {}
    return async (n) => {
      const t0 = nowMs()
      for (let i = 0; i < n; i++) {
        // Wait for the other thread to hold the lock again.
        while (Atomics.load(i32, 0) === 0) {
          const r = Atomics.waitAsync(i32, 0, 0)
          if (r.async) await r.value
        }
        Atomics.store(i32, 0, 0)
        await locks.request('steal-thread', options, callback)
      }
      return (nowMs() - t0) * 1e6 / n
    }
  }
}

// The other thread of 'steal-thread': holds the lock until it is stolen,
// then asks for it again.
function worker ({ impl, sab }) {
  const i32 = new Int32Array(sab)
  const locks = load(impl)
  setInterval(() => {}, 2 ** 30)
  const callback = () => {
    Atomics.store(i32, 0, 1)
    Atomics.notify(i32, 0)
    return forever()
  }
  parentPort.postMessage('ready')
  ;(async () => {
    for (;;) await locks.request('steal-thread', callback).catch(ignore)
  })()
}

async function massAbort (locks, n, phases, gc) {
  const holder = await hold(locks, 'mass')
  const controller = new AbortController()
  const options = { signal: controller.signal }
  const callback = () => {}
  let settled = 0
  let allSettled
  const all = new Promise((resolve) => { allSettled = resolve })
  const count = () => { if (++settled === n) allSettled() }
  if (gc) settle()
  const endEnqueue = phases.start('enqueue')
  for (let i = 0; i < n; i++) locks.request('mass', options, callback).then(count, count)
  endEnqueue()
  await new Promise((resolve) => setImmediate(resolve))
  if (gc) settle()
  const endAbort = phases.start('abort')
  controller.abort()
  await all
  endAbort()
  holder.release()
  await holder.done
}

async function run (params, implId, ctx) {
  const locks = load(implId)
  if (params.kind === 'mass-abort') {
    trackGc()
    const { n } = params
    const reps = Math.max(1, Math.round(params.perRound / n))
    const round = async (m, n, reps) => {
      const phases = new Phases()
      for (let rep = 0; rep < reps; rep++) {
        await massAbort(locks, n, phases, rep === 0 || n >= 1e4)
        m.enqueue = phases.ms('enqueue') * 1e6 / (n * (rep + 1))
        m.abort = phases.ms('abort') * 1e6 / (n * (rep + 1))
      }
      m.enqueueGc = await phases.gcShare('enqueue')
      m.abortGc = await phases.gcShare('abort')
    }
    return measure((m) => round(m, n, reps), { ...ctx, warmup: () => round({}, 200, 5) })
  }
  const loop = await LOOPS[params.kind](locks, implId)
  return measure(async (m) => { m.op = await loop(params.ops) }, { ...ctx, warmup: () => warmup(loop, params.warmupMs) })
}

function rows (get, opts) {
  const out = SIMPLE.map((c) => metricRow(get, {
    id: `options.${c.id}`, label: c.label, unit: 'ns', key: `options/${c.id}`, metric: 'op', columns: COLUMNS
  }))
  const ns = massSizes(opts)
  for (const n of ns) {
    out.push(metricRow(get, { id: `options.mass.${n}.enqueue`, label: `${shortSize(n)} queued with one signal: request() each`, unit: 'ns', key: `options/mass-abort/${n}`, metric: 'enqueue', columns: COLUMNS }))
    out.push(metricRow(get, { id: `options.mass.${n}.abort`, label: `${shortSize(n)} queued with one signal: abort, each`, unit: 'ns', key: `options/mass-abort/${n}`, metric: 'abort', columns: COLUMNS }))
  }
  for (const [metric, what] of [['enqueue', 'request() with a shared signal'], ['abort', 'mass abort']]) {
    out.push(growthRow(get, {
      id: `options.mass.growth.${metric}`, label: `growth exponent ${shortSize(ns[0])}-${shortSize(ns[ns.length - 1])}: ${what}`, sizes: ns, keyOf: (n) => `options/mass-abort/${n}`, metric, columns: COLUMNS
    }))
  }
  return out
}

module.exports = {
  section: 'ifAvailable, signal, abort and steal (time per operation, one thread unless said)',
  points,
  run,
  worker,
  rows
}
