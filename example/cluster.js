'use strict'

// Leader election across the processes of a `cluster`: every worker process
// asks for the same exclusive lock of one machine-wide scope; whoever holds
// it is the leader and keeps it for as long as it lives. The primary kills
// the leader with SIGKILL (no chance to clean up): the kernel tells the
// other processes, its lock is released and the next worker in line becomes
// the leader. Run: npm run example:cluster

const cluster = require('cluster')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { openLockManager } = require('..')

const WORKERS = 4
// A directory of its own, so that the example leaves nothing behind.
const DIR = process.env.EXAMPLE_DIR || fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-cluster-'))

if (cluster.isPrimary) {
  main()
    .catch((error) => {
      console.error(error)
      process.exitCode = 1
    })
    .finally(() => fs.rmSync(DIR, { recursive: true, force: true }))
} else {
  worker()
}

// The leader works (here: a heartbeat) and never returns from the callback,
// so it holds the lock until its process ends. A waiting request keeps the
// process alive.
async function worker () {
  const locks = await openLockManager('cluster-example', { dir: DIR })
  locks.request('leader', () => {
    process.send({ leader: process.pid })
    setInterval(() => {}, 1000)
    return new Promise(() => {})
  })
  process.send({ queued: process.pid })
}

async function main () {
  const workers = new Map()
  let onLeader
  let queued = 0
  let allQueued
  const everyoneQueued = new Promise((resolve) => { allQueued = resolve })
  for (let i = 0; i < WORKERS; i++) {
    const w = cluster.fork({ EXAMPLE_DIR: DIR })
    w.on('message', (message) => {
      if (message.leader !== undefined) onLeader(message.leader)
      if (message.queued !== undefined && ++queued === WORKERS) allQueued()
    })
    workers.set(w.process.pid, w)
  }
  const nextLeader = () => new Promise((resolve) => { onLeader = resolve })

  const locks = await openLockManager('cluster-example', { dir: DIR })
  const first = nextLeader()
  await everyoneQueued
  let leader = await first
  for (let round = 1; round < WORKERS; round++) {
    const { held, pending } = await locks.query()
    console.log(`leader: process ${leader} (${held.length} lock held, ${pending.length} waiting)`)
    const elected = nextLeader()
    const start = process.hrtime.bigint()
    process.kill(leader, 'SIGKILL')
    workers.delete(leader)
    leader = await elected
    const ms = Number(process.hrtime.bigint() - start) / 1e6
    console.log(`  leader killed with SIGKILL; process ${leader} took over in ${ms.toFixed(2)} ms`)
  }
  console.log(`leader: process ${leader}, the last one`)
  for (const w of workers.values()) w.process.kill('SIGKILL')
  await locks.close()
}
