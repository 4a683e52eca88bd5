'use strict'

// Shared readers with a periodic writer on one name, in one thread and in
// four (one writer thread, three reader threads): reads and writes per
// second, how long the writer waits for its turn (p50/p99), and violations
// (a reader inside while a writer is, or two writers).

const { parentPort } = require('worker_threads')
const { load } = require('../lib/references')
const { measure, nowMs, nowNs } = require('../lib/measure')
const { percentile } = require('../lib/stats')
const { startWorkers } = require('../lib/threads')
const { metricRow } = require('../lib/rows')

const IMPLS = ['web-locks', 'built-in']
const START = 0
const STOP = 1
const VIOLATIONS = 2
const READERS = 3 // readers inside
const WRITERS = 4 // writers inside
const READER_LOOPS = 4 // concurrent reader loops per reader thread
const WRITE_EVERY_MS = 1

const CONFIGS = [
  { id: '1thread', label: 'in 1 thread', threads: [{ readers: READER_LOOPS, writer: true }] },
  { id: '4threads', label: 'in 4 threads', threads: [{ readers: 0, writer: true }, ...Array(3).fill({ readers: READER_LOOPS, writer: false })] }
]

function points (opts) {
  return CONFIGS.map((c) => ({
    key: `readers/${c.id}`,
    label: `shared readers + periodic writer ${c.label}`,
    params: { config: c.id, ms: opts.quick ? 250 : 1000 },
    rounds: opts.quick ? 2 : 3,
    impls: IMPLS
  }))
}

function work () {
  let x = 1
  for (let i = 0; i < 100; i++) x = (x * 1103515245 + 12345) | 0
  return x
}

async function run ({ config, ms }, implId, ctx) {
  const sab = new SharedArrayBuffer(64)
  const i32 = new Int32Array(sab)
  const threads = CONFIGS.find((c) => c.id === config).threads
  const workers = await startWorkers('readers', threads.map((t) => ({ impl: implId, sab, ...t })))
  let roundNo = 0
  async function round (m, ms) {
    const r = ++roundNo
    const before = Atomics.load(i32, VIOLATIONS)
    Atomics.store(i32, START, r)
    Atomics.notify(i32, START)
    const t0 = nowMs()
    await new Promise((resolve) => setTimeout(resolve, ms))
    Atomics.store(i32, STOP, r)
    const elapsed = (nowMs() - t0) / 1000
    const results = await Promise.all(workers.map((w) => w.next()))
    const waits = results.flatMap((x) => Array.from(x.waits))
    m.reads = results.reduce((a, x) => a + x.reads, 0) / elapsed
    m.writes = results.reduce((a, x) => a + x.writes, 0) / elapsed
    m.writeWaitP50 = percentile(waits, 50)
    m.writeWaitP99 = percentile(waits, 99)
    m.violations = Atomics.load(i32, VIOLATIONS) - before
  }
  return measure((m) => round(m, ms), { ...ctx, warmup: () => round({}, ms / 2) })
}

function worker ({ impl, sab, readers, writer }) {
  const i32 = new Int32Array(sab)
  const locks = load(impl)
  setInterval(() => {}, 2 ** 30) // see contention.js
  const read = async () => {
    Atomics.add(i32, READERS, 1)
    if (Atomics.load(i32, WRITERS) !== 0) Atomics.add(i32, VIOLATIONS, 1)
    work()
    await null
    work()
    Atomics.sub(i32, READERS, 1)
  }
  const write = () => {
    if (Atomics.add(i32, WRITERS, 1) !== 0 || Atomics.load(i32, READERS) !== 0) Atomics.add(i32, VIOLATIONS, 1)
    work()
    Atomics.sub(i32, WRITERS, 1)
  }
  const shared = { mode: 'shared' }
  parentPort.postMessage('ready')
  ;(async () => {
    for (let r = 1; ; r++) {
      Atomics.wait(i32, START, r - 1)
      const stopped = () => Atomics.load(i32, STOP) >= r
      let reads = 0
      let writes = 0
      const waits = []
      const loops = []
      for (let k = 0; k < readers; k++) {
        loops.push((async () => {
          while (!stopped()) {
            await locks.request('rw', shared, read)
            reads++
          }
        })())
      }
      if (writer) {
        loops.push((async () => {
          while (!stopped()) {
            await new Promise((resolve) => setTimeout(resolve, WRITE_EVERY_MS))
            const t0 = nowNs()
            let granted = 0
            await locks.request('rw', () => {
              granted = nowNs()
              write()
            })
            waits.push(granted - t0)
            writes++
          }
        })())
      }
      await Promise.all(loops)
      parentPort.postMessage({ reads, writes, waits })
    }
  })()
}

function rows (get) {
  const out = []
  const columns = { 'web-locks': 'web-locks', 'built-in': 'built-in' }
  for (const c of CONFIGS) {
    const key = `readers/${c.id}`
    const what = `readers + writer ${c.label}`
    out.push(metricRow(get, { id: `readers.${c.id}.reads`, label: `${what}: reads per second`, unit: 'ops/s', better: 'higher', key, metric: 'reads', columns }))
    out.push(metricRow(get, { id: `readers.${c.id}.writes`, label: `${what}: writes per second`, unit: 'ops/s', better: 'higher', key, metric: 'writes', columns }))
    out.push(metricRow(get, { id: `readers.${c.id}.wait50`, label: `${what}: writer waits p50`, unit: 'ns', key, metric: 'writeWaitP50', columns }))
    out.push(metricRow(get, { id: `readers.${c.id}.wait99`, label: `${what}: writer waits p99`, unit: 'ns', key, metric: 'writeWaitP99', columns }))
    out.push(metricRow(get, { id: `readers.${c.id}.violations`, label: `${what}: violations`, unit: 'count', better: null, key, metric: 'violations', columns }))
  }
  return out
}

module.exports = {
  section: `shared readers (${READER_LOOPS} loops per reader thread) with a writer every ${WRITE_EVERY_MS} ms, one name`,
  points,
  run,
  worker,
  rows
}
