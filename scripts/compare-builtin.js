'use strict'

// Runs the same cross-thread checks against web-locks and, on Node >= 24,
// Node's built-in navigator.locks, in one process, and prints what each does.
// Evidence for the README's "Differences from Node's built-in".
//
//   node scripts/compare-builtin.js          (with Node >= 24 for the built-in)

const { Worker } = require('worker_threads')
const path = require('path')

const PKG = path.resolve(__dirname, '..')
const ours = require(PKG).locks
const TIMEOUT_MS = 2000
const RACE_ROUNDS = 50

// A worker that takes commands: hold a lock until told to let go.
const WORKER = `
const { parentPort, workerData } = require('worker_threads')
const locks = workerData.impl === 'ours' ? require(workerData.pkg).locks : navigator.locks
const gates = new Map()
parentPort.on('message', ({ op, name }) => {
  if (op === 'hold') {
    locks.request(name, () => {
      parentPort.postMessage({ held: name })
      return new Promise((resolve) => gates.set(name, resolve))
    }).then(() => parentPort.postMessage({ done: name }), (error) => parentPort.postMessage({ rejected: name, error: error && error.name }))
  } else if (op === 'release') {
    gates.get(name)()
  }
})
`

function startWorker (impl) {
  const worker = new Worker(WORKER, { eval: true, workerData: { impl, pkg: PKG } })
  worker.next = (predicate) => new Promise((resolve) => {
    const listener = (message) => {
      if (!predicate(message)) return
      worker.off('message', listener)
      resolve(message)
    }
    worker.on('message', listener)
  })
  worker.hold = async (name) => {
    const held = worker.next((m) => m.held === name)
    worker.postMessage({ op: 'hold', name })
    await held
  }
  return worker
}

function within (promise, ms = TIMEOUT_MS) {
  let timer
  return Promise.race([
    promise.then((value) => ({ value }), (error) => ({ error })),
    new Promise((resolve) => { timer = setTimeout(() => resolve({ timeout: true }), ms) })
  ]).finally(() => clearTimeout(timer))
}

const checks = [
  ['a synchronous throw in the callback releases the lock', async (locks, impl, name) => {
    await within(locks.request(name, () => { throw new Error('boom') }))
    const free = await within(locks.request(name, { ifAvailable: true }, (lock) => lock !== null))
    return free.value === true
  }],
  ['an exclusive lock held by a worker is not granted to the main thread', async (locks, impl, name) => {
    let violations = 0
    for (let round = 0; round < RACE_ROUNDS; round++) {
      const worker = startWorker(impl)
      await worker.hold(`${name}-${round}`)
      const got = await within(locks.request(`${name}-${round}`, { ifAvailable: true }, (lock) => lock !== null))
      if (got.value !== false) violations++
      await worker.terminate()
    }
    return violations === 0 || `${violations} of ${RACE_ROUNDS} rounds granted it`
  }],
  ["query() in the main thread shows a worker's held lock", async (locks, impl, name) => {
    const worker = startWorker(impl)
    await worker.hold(name)
    const { held } = await locks.query()
    await worker.terminate()
    return held.some((info) => info.name === name)
  }],
  ["a terminated worker's lock goes to the thread waiting for it", async (locks, impl, name) => {
    const worker = startWorker(impl)
    await worker.hold(name)
    const waiting = within(locks.request(name, () => 'granted'))
    await worker.terminate()
    const result = await waiting
    return result.value === 'granted' || (result.timeout ? 'waiter never granted' : `${result.error}`)
  }],
  ["a steal from another thread rejects the holder's request with an AbortError", async (locks, impl, name) => {
    const worker = startWorker(impl)
    await worker.hold(name)
    const rejected = worker.next((m) => m.rejected === name)
    const stole = await within(locks.request(name, { steal: true }, () => 'stolen'))
    const outcome = await within(rejected)
    await worker.terminate()
    if (stole.value !== 'stolen') return 'the steal itself failed'
    return outcome.value && outcome.value.error === 'AbortError' ? true : `holder got ${outcome.timeout ? 'nothing' : outcome.value.error}`
  }],
  ['2,000 requests queued on one name are all granted', async (locks, impl, name) => {
    let release
    const holding = new Promise((resolve) => { release = resolve })
    const first = locks.request(name, () => holding)
    const queued = []
    for (let i = 0; i < 2000; i++) queued.push(locks.request(name, () => i))
    release()
    const result = await within(Promise.all([first, ...queued]), 10000)
    return result.value !== undefined || (result.timeout ? 'hangs' : `${result.error.name}: ${result.error.message}`)
  }]
]

async function main () {
  const impls = [['web-locks', 'ours', ours]]
  const builtin = globalThis.navigator && globalThis.navigator.locks
  if (builtin && builtin !== ours) impls.push(['node built-in', 'builtin', builtin])
  else console.log(`Node ${process.version} has no built-in navigator.locks: only web-locks is checked.`)
  console.log(`Node ${process.version}`)
  let n = 0
  for (const [label, check] of checks) {
    const cells = []
    for (const [, impl, locks] of impls) {
      const outcome = await check(locks, impl, `compare-${impl}-${n++}`).catch((error) => `threw ${error.name}`)
      cells.push(outcome === true ? 'yes' : outcome === false ? 'NO' : `NO (${outcome})`)
    }
    console.log(`- ${label}\n    ${impls.map(([name], i) => `${name}: ${cells[i]}`).join('\n    ')}`)
  }
}

main().then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
