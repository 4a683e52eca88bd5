'use strict'

// Memory per held lock and per queued request, one point per fresh
// process: node --expose-gc bench/memory.js <spec>. Everything is counted:
// the growth of the process's RSS (JS heap, native allocations, all) from
// before to after creating N held locks (N distinct names) or N requests
// queued on one name, after full GCs, divided by N. The JS heap's share
// (heapUsed) and V8's external memory are reported too.
//
// The names are made before the baseline: they are the caller's strings.

const { load } = require('./lib/references')
const { nowMs } = require('./lib/measure')

const spec = JSON.parse(process.argv[2])

function out (tag, value) {
  process.stdout.write(`@@${tag} ${JSON.stringify(value)}\n`)
}

process.on('uncaughtException', (e) => {
  out('error', { name: e.name, message: String(e.message).slice(0, 200) })
  process.exit(1)
})
process.on('unhandledRejection', (e) => {
  out('error', { name: (e && e.name) || 'Error', message: String((e && e.message) || e).slice(0, 200) })
  process.exit(1)
})

const tick = () => new Promise((resolve) => setImmediate(resolve))

async function fullGc () {
  for (let i = 0; i < 4; i++) {
    globalThis.gc()
    await tick()
  }
}

async function hold (locks, name) {
  let granted
  const acquired = new Promise((resolve) => { granted = resolve })
  locks.request(name, () => {
    granted()
    return new Promise(() => {})
  })
  await acquired
}

async function main () {
  if (typeof globalThis.gc !== 'function') throw new Error('run with --expose-gc')
  const { impl, params: { kind, n } } = spec
  const locks = load(impl)
  const names = kind === 'held' ? Array.from({ length: n }, (_, i) => `held-${i}`) : null
  globalThis.keepAlive = { names }
  // Warm up: the same operations on a few names, all released again.
  for (let i = 0; i < 2000; i++) await locks.request(`warm-${i % 100}`, () => {})
  await fullGc()
  const before = process.memoryUsage()
  const t0 = nowMs()
  let gate
  if (kind === 'held') {
    let granted = 0
    let allGranted
    const all = new Promise((resolve) => { allGranted = resolve })
    gate = new Promise(() => {})
    const callback = () => {
      if (++granted === n) allGranted()
      return gate
    }
    for (let i = 0; i < n; i++) locks.request(names[i], callback)
    await all
  } else {
    await hold(locks, 'queued')
    const callback = () => {}
    for (let i = 0; i < n; i++) locks.request('queued', callback)
    await tick()
    await tick()
  }
  const ms = nowMs() - t0
  // Keep everything a caller would keep reachable: otherwise a pure-JS lock
  // whose holder never releases is garbage, queue and all.
  globalThis.keepAlive = { locks, names, gate }
  await fullGc()
  const after = process.memoryUsage()
  const per = (key) => (after[key] - before[key]) / n
  out('result', {
    rss: per('rss'),
    heap: per('heapUsed'),
    heapTotal: per('heapTotal'),
    external: per('external') + per('arrayBuffers'),
    roundMs: ms,
    perItemNs: ms * 1e6 / n
  })
  process.exit(0)
}

main().catch((e) => {
  out('error', { name: e.name, message: String(e.message).slice(0, 200) })
  process.exit(1)
})
