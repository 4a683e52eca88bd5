'use strict'

// Handoff of one exclusive lock between two threads: latency from the
// moment the holder's callback returns to the moment the waiter's callback
// starts (one way), p50 and p99. Each holder waits, inside its callback,
// until the other thread has queued its next request, so that every
// release is a handoff. The floors are the same one-way trip through a
// MessagePort, Atomics.waitAsync and Atomics.wait/notify.

const { parentPort } = require('worker_threads')
const { load } = require('../lib/references')
const { measure, nowNs, nowMs } = require('../lib/measure')
const { percentile } = require('../lib/stats')
const { startWorkers } = require('../lib/threads')
const { metricRow } = require('../lib/rows')

const LOCKS = ['web-locks', 'built-in']
const FLOORS = ['messageport', 'waitasync', 'atomics-wait']

// Int32 slots of the shared buffer.
const START = 0
const INSIDE = 1 // threads inside a callback: above 1 is a violation
const VIOLATIONS = 2
const QUEUED = 3 // + thread: it has a request queued
const DONE = 5 // + thread: it has finished
const LAST = 7 // the thread whose callback ran last, -1 at first
const TURN = 8 // ping-pong: whose move it is
const TIME = 6 // Float64 slot (bytes 48-55, after the Int32 slots): the last exit / send time

function points (opts) {
  const impls = [...LOCKS, ...FLOORS]
  if (opts.current) impls.push('web-locks@current')
  return [{
    key: 'handoff',
    label: 'handoff between 2 threads',
    params: { n: opts.quick ? 2000 : 10000 },
    passes: opts.quick ? 1 : 5,
    rounds: opts.quick ? 3 : 4,
    impls
  }]
}

async function run ({ n }, implId, ctx) {
  let roundNo = 0
  async function round (m, n) {
    // A fresh name per round: nothing a previous round's (terminated)
    // threads left behind can stand in the way.
    const name = `handoff-${++roundNo}`
    const sab = new SharedArrayBuffer(64)
    const i32 = new Int32Array(sab)
    i32[LAST] = -1
    const workers = await startWorkers('handoff', [0, 1].map((me) => ({ impl: implId, me, n, sab, name })))
    let channel
    if (implId === 'messageport') {
      const { MessageChannel } = require('worker_threads')
      channel = new MessageChannel()
      workers[0].postMessage({ port: channel.port1 }, [channel.port1])
      workers[1].postMessage({ port: channel.port2 }, [channel.port2])
      await Promise.all(workers.map((w) => w.next()))
    }
    const t0 = nowMs()
    Atomics.store(i32, START, 1)
    Atomics.notify(i32, START)
    const results = await Promise.all(workers.map((w) => w.next()))
    const elapsed = nowMs() - t0
    const samples = results.flatMap((r) => Array.from(r.latencies))
    m.p50 = percentile(samples, 50)
    m.p99 = percentile(samples, 99)
    m.rate = samples.length / (elapsed / 1000)
    m.samples = samples.length
    m.violations = Atomics.load(i32, VIOLATIONS)
    await Promise.all(workers.map((w) => w.terminate()))
  }
  return measure((m) => round(m, n), { ...ctx, warmup: () => round({}, Math.max(200, n >> 3)) })
}

// In each worker thread.
function worker ({ impl, me, n, sab, name }) {
  const i32 = new Int32Array(sab)
  const f64 = new Float64Array(sab)
  const other = 1 - me
  const latencies = new Float64Array(n)
  let k = 0
  // Neither a pending Atomics.waitAsync nor a request queued on the
  // built-in keeps a thread alive: a timer does, until finish().
  const keepAlive = setInterval(() => {}, 2 ** 30)
  const begin = (then) => {
    parentPort.postMessage('ready')
    if (impl === 'messageport') {
      parentPort.once('message', ({ port }) => {
        parentPort.postMessage('port')
        Atomics.wait(i32, START, 0)
        then(port)
      })
    } else {
      Atomics.wait(i32, START, 0)
      then()
    }
  }
  const finish = () => {
    clearInterval(keepAlive)
    parentPort.postMessage({ latencies: latencies.subarray(0, k) })
  }

  if (impl === 'messageport') {
    // Thread 0 serves first; each message carries its send time.
    return begin((port) => {
      let sent = 0
      const send = () => {
        sent++
        port.postMessage(nowNs())
      }
      port.on('message', (time) => {
        latencies[k++] = nowNs() - time
        if (sent < n) send()
        if (k === n) {
          port.close()
          finish()
        }
      })
      if (me === 0) send()
    })
  }
  if (impl === 'atomics-wait' || impl === 'waitasync') {
    const wait = impl === 'atomics-wait'
      ? async () => { while (Atomics.load(i32, TURN) !== me) Atomics.wait(i32, TURN, other) }
      : async () => {
        while (Atomics.load(i32, TURN) !== me) {
          const r = Atomics.waitAsync(i32, TURN, other)
          if (r.async) await r.value
        }
      }
    return begin(async () => {
      for (let j = 0; j < n; j++) {
        await wait()
        if (j > 0 || me === 1) latencies[k++] = nowNs() - f64[TIME]
        f64[TIME] = nowNs()
        Atomics.store(i32, TURN, other)
        Atomics.notify(i32, TURN)
      }
      finish()
    })
  }

  const locks = load(impl)
  const callback = () => {
    const entry = nowNs()
    const violation = Atomics.add(i32, INSIDE, 1) !== 0
    if (violation) Atomics.add(i32, VIOLATIONS, 1)
    if (Atomics.load(i32, LAST) === other) latencies[k++] = entry - f64[TIME]
    Atomics.store(i32, QUEUED + me, 0)
    // Hold until the other thread's next request is queued (or it is done).
    // Not when the other thread holds the lock too (a violation): it would
    // wait for us. Not for more than 100 ms in any case.
    const until = entry + 1e8
    while (!violation && Atomics.load(i32, QUEUED + other) === 0 && Atomics.load(i32, DONE + other) === 0 &&
      Atomics.load(i32, INSIDE) === 1 && nowNs() < until) {
      Atomics.wait(i32, QUEUED + other, 0, 5)
    }
    Atomics.sub(i32, INSIDE, 1)
    f64[TIME] = nowNs()
    Atomics.store(i32, LAST, me)
  }
  begin(async () => {
    for (let j = 0; j < n; j++) {
      const p = locks.request(name, callback)
      Atomics.store(i32, QUEUED + me, 1)
      Atomics.notify(i32, QUEUED + me)
      await p
    }
    Atomics.store(i32, DONE + me, 1)
    Atomics.notify(i32, QUEUED + me)
    finish()
  })
}

function rows (get, opts) {
  const columns = { 'web-locks': 'web-locks', 'built-in': 'built-in', floor: 'messageport' }
  if (opts.current) columns['web-locks@current'] = 'web-locks@current'
  const out = []
  for (const [metric, what] of [['p50', 'latency p50'], ['p99', 'latency p99']]) {
    out.push(metricRow(get, { id: `handoff.${metric}`, label: `handoff, ${what} (floor: MessagePort)`, unit: 'ns', key: 'handoff', metric, columns }))
    for (const [floor, name] of [['waitasync', 'Atomics.waitAsync'], ['atomics-wait', 'Atomics.wait']]) {
      out.push(metricRow(get, { id: `handoff.${metric}.${floor}`, label: `handoff, ${what} (floor: ${name})`, unit: 'ns', key: 'handoff', metric, columns: { ...columns, floor } }))
    }
  }
  out.push(metricRow(get, { id: 'handoff.rate', label: 'handoffs per second (floor: MessagePort)', unit: 'ops/s', better: 'higher', key: 'handoff', metric: 'rate', columns }))
  out.push(metricRow(get, { id: 'handoff.violations', label: 'handoff: mutual-exclusion violations', unit: 'count', better: null, key: 'handoff', metric: 'violations', columns: { 'web-locks': 'web-locks', 'built-in': 'built-in', ...(opts.current ? { 'web-locks@current': 'web-locks@current' } : {}) } }))
  return out
}

module.exports = {
  section: 'handoff of one exclusive lock between 2 threads (one way: holder returns -> waiter called)',
  points,
  run,
  worker,
  rows
}
