'use strict'

// Benchmarks web-locks and, where the running Node has one (24+), Node's
// built-in navigator.locks, in the same process, and prints the ratios.
//
//   npm run bench                      # with the Node on PATH
//   /path/to/node-24/bin/node bench/bench.js
//
// Each figure is the median of ROUNDS rounds. Times are per operation.

const { Worker, isMainThread, parentPort, workerData } = require('worker_threads')
const ours = require('..').locks

const ROUNDS = 5

function implementations () {
  const impls = [{ name: 'web-locks', locks: ours }]
  const builtin = globalThis.navigator && globalThis.navigator.locks
  if (builtin && builtin !== ours) impls.push({ name: 'node built-in', locks: builtin })
  return impls
}

function lockManager (name) {
  return name === 'web-locks' ? ours : globalThis.navigator.locks
}

const now = () => process.hrtime.bigint()
const ns = (start) => Number(now() - start)

const CASE_TIMEOUT_MS = 60000

// A reference that throws or hangs on a case is reported, not fatal.
async function attempt (run) {
  let timer
  const timeout = new Promise((resolve) => {
    timer = setTimeout(() => resolve({ failed: 'hangs' }), CASE_TIMEOUT_MS)
  })
  try {
    return await Promise.race([run().then((value) => ({ value })), timeout])
  } catch (error) {
    return { failed: `${error.name}: ${error.message}`.slice(0, 40) }
  } finally {
    clearTimeout(timer)
  }
}

function median (values) {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[sorted.length >> 1]
}

async function uncontended (locks, n, callback, names) {
  const start = now()
  for (let i = 0; i < n; i++) await locks.request(names ? `n${i % names}` : 'u', callback)
  return ns(start) / n
}

// Resolves once `name` is held; the lock is kept until release() is called.
async function hold (locks, name) {
  let release, granted
  const acquired = new Promise((resolve) => { granted = resolve })
  const done = locks.request(name, () => new Promise((resolve) => {
    release = resolve
    granted()
  }))
  await acquired
  return { release: () => release(), done }
}

// n requests queued on one name behind a held lock, then drained. Also the
// cost of one request on another name while they wait.
async function queueDepth (locks, n) {
  const holder = await hold(locks, 'q')
  const start = now()
  const all = []
  for (let i = 0; i < n; i++) all.push(locks.request('q', () => {}))
  const enqueue = ns(start) / n
  const side = now()
  await locks.request('other', () => {})
  const unrelated = ns(side)
  holder.release()
  await holder.done
  const drainStart = now()
  await Promise.all(all)
  return { enqueue, drain: ns(drainStart) / n, unrelated }
}

// n distinct names held at once, then released together.
async function heldCount (locks, n) {
  let release
  const gate = new Promise((resolve) => { release = resolve })
  const start = now()
  const all = []
  for (let i = 0; i < n; i++) {
    all.push(locks.request(`h${i}`, () => gate))
  }
  await locks.request('h-probe', () => {})
  const acquire = ns(start) / n
  const side = now()
  await locks.request('other', () => {})
  const unrelated = ns(side)
  release()
  await Promise.all(all)
  return { acquire, unrelated }
}

// Two threads take one exclusive lock in turn: each re-requests as soon as
// its callback ends, so with FIFO every grant is a hand-off to the other.
async function handoff (implName, n) {
  const worker = new Worker(__filename, { workerData: { implName, n } })
  const locks = lockManager(implName)
  await new Promise((resolve) => worker.once('message', resolve))
  const start = now()
  for (let i = 0; i < n; i++) await locks.request('handoff', () => {})
  await new Promise((resolve) => worker.once('message', resolve))
  const perHandoff = ns(start) / (2 * n)
  await worker.terminate()
  return perHandoff
}

async function handoffWorker () {
  const { implName, n } = workerData
  const locks = lockManager(implName)
  parentPort.postMessage('ready')
  for (let i = 0; i < n; i++) await locks.request('handoff', () => {})
  parentPort.postMessage('done')
}

function cases () {
  const list = [
    { label: 'uncontended, sync callback', unit: 'ns/op', run: (l) => uncontended(l.locks, 20000, () => {}) },
    { label: 'uncontended, async callback', unit: 'ns/op', run: (l) => uncontended(l.locks, 20000, async () => {}) },
    { label: 'uncontended, 1,000 names', unit: 'ns/op', run: (l) => uncontended(l.locks, 20000, () => {}, 1000) }
  ]
  for (const n of [1000, 10000, 100000]) {
    list.push({ label: `queue depth ${n}: enqueue`, unit: 'ns/op', run: async (l) => (await queueDepth(l.locks, n)).enqueue })
    list.push({ label: `queue depth ${n}: grant+release`, unit: 'ns/op', run: async (l) => (await queueDepth(l.locks, n)).drain })
    list.push({ label: `queue depth ${n}: unrelated request`, unit: 'ns', run: async (l) => (await queueDepth(l.locks, n)).unrelated })
  }
  for (const n of [1000, 10000, 100000]) {
    list.push({ label: `${n} names held: acquire`, unit: 'ns/op', run: async (l) => (await heldCount(l.locks, n)).acquire })
    list.push({ label: `${n} names held: unrelated request`, unit: 'ns', run: async (l) => (await heldCount(l.locks, n)).unrelated })
  }
  list.push({ label: 'two-thread hand-off', unit: 'ns/op', run: (l) => handoff(l.name, 5000) })
  return list
}

async function main () {
  const impls = implementations()
  console.log(`Node ${process.version}, ${ROUNDS} rounds, median; lower is better`)
  if (impls.length === 1) console.log('(no built-in navigator.locks in this Node: run with Node >= 24 for ratios)')
  const header = ['case', ...impls.map((i) => `${i.name}`)]
  if (impls.length > 1) header.push('built-in / ours')
  const rows = [header]
  for (const c of cases()) {
    const medians = []
    const cells = []
    for (const impl of impls) {
      const samples = []
      let failed
      for (let r = 0; r < ROUNDS && !failed; r++) {
        const result = await attempt(() => c.run(impl))
        if (result.failed) failed = result.failed
        else samples.push(result.value)
      }
      medians.push(failed ? NaN : median(samples))
      cells.push(failed || `${Math.round(median(samples)).toLocaleString('en-US')} ${c.unit}`)
    }
    const row = [c.label, ...cells]
    if (medians.length > 1) row.push(Number.isNaN(medians[1]) ? '-' : `${(medians[1] / medians[0]).toFixed(2)}x`)
    rows.push(row)
    console.error(`  done: ${c.label}`)
  }
  const widths = header.map((_, i) => Math.max(...rows.map((r) => r[i].length)))
  for (const row of rows) console.log(row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join('  '))
}

if (isMainThread) {
  main().catch((error) => {
    console.error(error)
    process.exitCode = 1
  })
} else {
  handoffWorker()
}
