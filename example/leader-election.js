'use strict'

// Leader election across worker_threads: every worker asks for the same
// exclusive lock; whoever holds it is the leader and keeps it for as long as
// it lives. When the leader is terminated, its lock is released and the next
// worker in line becomes the leader. Run: npm run example

const { Worker, isMainThread, parentPort, threadId } = require('worker_threads')
const { locks } = require('..')

const WORKERS = 4

if (isMainThread) {
  main().catch((error) => {
    console.error(error)
    process.exitCode = 1
  })
} else {
  // The leader works (here: a heartbeat) and never returns from the callback,
  // so it holds the lock until its thread ends. A waiting request keeps its
  // worker alive; a held lock alone would not.
  locks.request('leader', () => {
    parentPort.postMessage({ leader: threadId })
    setInterval(() => {}, 1000)
    return new Promise(() => {})
  })
  parentPort.postMessage({ queued: threadId })
}

async function main () {
  const workers = new Map()
  let onLeader
  let queued = 0
  let allQueued
  const everyoneQueued = new Promise((resolve) => { allQueued = resolve })

  for (let i = 0; i < WORKERS; i++) {
    const worker = new Worker(__filename)
    workers.set(worker.threadId, worker)
    worker.on('message', (message) => {
      if (message.leader !== undefined) onLeader(message.leader)
      if (message.queued !== undefined && ++queued === WORKERS) allQueued()
    })
  }
  const nextLeader = () => new Promise((resolve) => { onLeader = resolve })

  const first = nextLeader()
  await everyoneQueued
  let leader = await first
  for (let round = 1; round < WORKERS; round++) {
    const { held, pending } = await locks.query()
    console.log(`leader: worker ${leader} (${held.length} lock held, ${pending.length} workers waiting)`)
    const elected = nextLeader()
    const start = process.hrtime.bigint()
    await workers.get(leader).terminate()
    workers.delete(leader)
    leader = await elected
    const ms = Number(process.hrtime.bigint() - start) / 1e6
    console.log(`  leader terminated; worker ${leader} took over in ${ms.toFixed(2)} ms`)
  }
  console.log(`leader: worker ${leader}, the last one`)
  for (const worker of workers.values()) await worker.terminate()
  const { held, pending } = await locks.query()
  console.log(`all workers gone: ${held.length} held, ${pending.length} pending`)
}
