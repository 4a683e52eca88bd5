'use strict'

// Starting the worker threads of a thread case, inside its child process.

const path = require('path')
const { Worker } = require('worker_threads')

const WORKER = path.join(__dirname, '..', 'worker.js')

// Starts one worker per entry of `data` (each gets { case, ...entry }) and
// resolves once every one has posted 'ready'. Each worker's later messages
// are in worker.messages (a queue) and worker.next() resolves with the
// next one; an error in any worker rejects every pending next().
async function startWorkers (caseId, data) {
  const workers = data.map((entry) => {
    const worker = new Worker(WORKER, { workerData: { case: caseId, ...entry } })
    const queue = []
    const waiting = []
    let failure = null
    worker.on('message', (message) => {
      if (waiting.length) waiting.shift().resolve(message)
      else queue.push(message)
    })
    const fail = (error) => {
      failure = error
      for (const w of waiting.splice(0)) w.reject(error)
    }
    worker.on('error', fail)
    worker.on('exit', (code) => fail(new Error(`a worker exited (code ${code}) before it finished`)))
    worker.next = () => {
      if (queue.length) return Promise.resolve(queue.shift())
      if (failure) return Promise.reject(failure)
      return new Promise((resolve, reject) => waiting.push({ resolve, reject }))
    }
    return worker
  })
  await Promise.all(workers.map(async (w) => {
    const message = await w.next()
    if (message !== 'ready') throw new Error(`worker said ${JSON.stringify(message)}`)
  }))
  return workers
}

module.exports = { startWorkers }
