'use strict'

// A killed holder's waiter, under whichever runtime runs this file: `node
// bench/runtime-kill.js`, `bun bench/runtime-kill.js` (--kills N). A child
// process of the same runtime takes a lock of a scope and says so; this
// process asks for the lock, then kills the child with SIGKILL and times,
// on its own clock, from the kill to its callback (no clock shared by the
// processes: Bun's process.hrtime counts from the process's start, so
// bench.js's scope/kill case cannot run under Bun). The child runs no exit
// code: only the manager can tell that it died. Prints p50, p99 and the
// slowest, against the bound of 2 s at p99.

const { fork } = require('child_process')
const fs = require('fs')
const os = require('os')
const path = require('path')

const BOUND_MS = 2000

function percentile (sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p / 100))]
}

function option (name, fallback) {
  const i = process.argv.indexOf(name)
  return i < 0 ? fallback : Number(process.argv[i + 1])
}

async function child () {
  const { scope, dir, name } = JSON.parse(process.env.WEB_LOCKS_KILL)
  const locks = await require('..').openLockManager(scope, { dir })
  locks.request(name, () => {
    process.send('held')
    return new Promise(() => {})
  })
}

// Resolves once the child holds the lock, rejects if it ends before.
function held (other) {
  return new Promise((resolve, reject) => {
    other.once('message', resolve)
    other.once('exit', (code, signal) => reject(new Error(`the holder ended (${code ?? signal}) before it held the lock`)))
  })
}

async function parent () {
  const kills = option('--kills', 50)
  const dir = fs.mkdtempSync(path.join(fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir(), 'web-locks-kill-'))
  const scope = 'kill'
  const locks = await require('..').openLockManager(scope, { dir })
  const runtime = process.versions.bun !== undefined ? `Bun ${process.versions.bun}` : `Node ${process.version}`
  const ms = []
  for (let k = 0; k <= kills; k++) {
    const name = `x${k}`
    const other = fork(__filename, [], { env: Object.assign({}, process.env, { WEB_LOCKS_KILL: JSON.stringify({ scope, dir, name }) }) })
    await held(other)
    let killed = 0
    const granted = new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`kill ${k}: not granted within ${BOUND_MS * 5} ms`)), BOUND_MS * 5)
      locks.request(name, () => {
        clearTimeout(timer)
        resolve(Number(process.hrtime.bigint() - BigInt(killed)) / 1e6)
      })
    })
    const exited = new Promise((resolve) => other.once('exit', resolve))
    killed = Number(process.hrtime.bigint())
    other.kill('SIGKILL')
    const took = await granted
    await exited
    if (k > 0) ms.push(took) // the first is a warm-up
  }
  ms.sort((a, b) => a - b)
  const p99 = percentile(ms, 99)
  console.log(`${runtime}: SIGKILL of the holder -> the waiter's callback, ${ms.length} kills: p50 ${percentile(ms, 50).toFixed(2)} ms, ` +
    `p99 ${p99.toFixed(2)} ms, slowest ${ms[ms.length - 1].toFixed(2)} ms (bound at p99: ${BOUND_MS} ms: ${p99 <= BOUND_MS ? 'met' : 'MISSED'})`)
  await locks.close()
  fs.rmSync(dir, { recursive: true, force: true })
}

;(process.env.WEB_LOCKS_KILL ? child : parent)().catch((error) => {
  console.error(error)
  process.exit(1)
})
