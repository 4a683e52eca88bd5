'use strict'

// Handoff of one exclusive lock between 2 processes through a scope, under
// whichever runtime runs this file: `node bench/runtime-handoff.js`,
// `bun bench/runtime-handoff.js` (--rounds N, --handoffs N). bench.js's
// scope handoff times each handoff one way on CLOCK_MONOTONIC, which Bun's
// process.hrtime is not (it counts from the process's start); this one needs
// no clock shared by the processes. Each process asks for the lock again
// from its callback, behind the other's request, so it alternates: the
// parent times, on its own clock, from one of its grants to its next when
// the child had exactly one grant in between (the fencing tokens differ by
// 2): two handoffs, each one way (the holder's callback returns, the other
// process's starts), each woken through the other process's FIFO (by the
// thread's uv_poll under Node, by the binding's waker thread under Bun),
// plus a request() made in each callback. It prints p50 and p99 of half
// that per round, and the medians over the rounds.

const { fork } = require('child_process')
const fs = require('fs')
const os = require('os')
const path = require('path')

function percentile (sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p / 100))]
}

function median (values) {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[sorted.length >> 1]
}

function option (name, fallback) {
  const i = process.argv.indexOf(name)
  return i < 0 ? fallback : Number(process.argv[i + 1])
}

// Takes the lock `count` times, each time asking again from inside the
// callback, so that the request is queued behind the other process's before
// the release: the lock alternates. The parent also keeps each grant's time
// and token. Resolves with the last callback.
function side (locks, name, count, times, tokens) {
  return new Promise((resolve) => {
    let k = 0
    const callback = (lock) => {
      if (times !== null) {
        times[k] = Number(process.hrtime.bigint())
        tokens[k] = Number(lock.token)
      }
      if (++k < count) locks.request(name, callback)
      else resolve()
    }
    locks.request(name, callback)
  })
}

async function child () {
  const { scope, dir } = JSON.parse(process.env.WEB_LOCKS_HANDOFF)
  const locks = await require('..').openLockManager(scope, { dir })
  process.on('message', async ({ name, count }) => {
    const done = side(locks, name, count, null, null)
    process.send('queued')
    await done
    process.send('done')
  })
  process.send('ready')
}

async function parent () {
  const rounds = option('--rounds', 5)
  const count = option('--handoffs', 5000)
  const dir = fs.mkdtempSync(path.join(fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir(), 'web-locks-handoff-'))
  const scope = 'handoff'
  const locks = await require('..').openLockManager(scope, { dir })
  const other = fork(__filename, [], { env: Object.assign({}, process.env, { WEB_LOCKS_HANDOFF: JSON.stringify({ scope, dir }) }) })
  const next = () => new Promise((resolve) => other.once('message', resolve))
  await next()
  const runtime = process.versions.bun !== undefined ? `Bun ${process.versions.bun}` : `Node ${process.version}`
  const p50s = []
  const p99s = []
  for (let r = 0; r <= rounds; r++) {
    const name = `x${r}`
    const times = new Float64Array(count)
    const tokens = new Float64Array(count)
    // The child queues behind a grant of ours: then every release of ours
    // is a handoff.
    let mine
    await locks.request(name, async () => {
      const queued = next()
      other.send({ name, count })
      await queued
      mine = side(locks, name, count, times, tokens)
    })
    const done = next()
    await mine
    await done
    const halves = []
    for (let k = 1; k < count; k++) {
      if (tokens[k] - tokens[k - 1] === 2) halves.push((times[k] - times[k - 1]) / 2 / 1000)
    }
    halves.sort((a, b) => a - b)
    if (r === 0) continue // warm-up
    p50s.push(percentile(halves, 50))
    p99s.push(percentile(halves, 99))
    console.log(`${runtime}: round ${r}: ${halves.length} of ${count - 1} alternating, one way p50 ${percentile(halves, 50).toFixed(1)} µs, p99 ${percentile(halves, 99).toFixed(1)} µs`)
  }
  console.log(`${runtime}: handoff between 2 processes, one way (half a round trip), median of ${rounds} rounds: p50 ${median(p50s).toFixed(1)} µs, p99 ${median(p99s).toFixed(1)} µs`)
  other.kill()
  await locks.close()
  fs.rmSync(dir, { recursive: true, force: true })
}

;(process.env.WEB_LOCKS_HANDOFF ? child : parent)().catch((error) => {
  console.error(error)
  process.exit(1)
})
