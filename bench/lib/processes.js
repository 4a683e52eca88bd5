'use strict'

// Starting the processes of a cross-process case, inside its child process,
// and waiting on them with time limits. Each runs bench/proc.js, which calls
// the case's proc(data). The child's own watchdog (lib/spawn.js) only sees
// the child's CPU, not theirs: the child prints '@@progress' whenever one of
// them reports, and every wait here has a limit past which it throws a
// HangError (reported as 'hangs') instead of waiting for ever.

const fs = require('fs')
const path = require('path')
const { fork } = require('child_process')

const PROC = path.join(__dirname, '..', 'proc.js')

class HangError extends Error {
  constructor (message) {
    super(message)
    this.name = 'HangError'
  }
}

// Nanoseconds on CLOCK_MONOTONIC (uv_hrtime), which every process on the
// host shares: a timestamp taken in one process can be subtracted from one
// taken in another.
const hostNs = () => Number(process.hrtime.bigint())

// Tells lib/spawn.js that the processes are making progress (at most
// every 200 ms).
let lastProgress = 0
function progress () {
  const now = Date.now()
  if (now - lastProgress < 200) return
  lastProgress = now
  process.stdout.write('@@progress\n')
}

// Forks one process running data.case's proc(data). proc.next(ms, what)
// resolves with its next message, or rejects: with a HangError after ms,
// or with its error if it threw or exited.
function startProcess (caseId, data) {
  const child = fork(PROC, [JSON.stringify({ case: caseId, ...data })], {
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    // Typed arrays of timestamps travel as they are.
    serialization: 'advanced'
  })
  const queue = []
  const waiting = []
  let failure = null
  let stderr = ''
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (text) => { stderr = (stderr + text).slice(-4000) })
  const fail = (error) => {
    if (!failure) failure = error
    for (const w of waiting.splice(0)) w.reject(failure)
  }
  child.on('message', (message) => {
    progress()
    if (message && message.error) return fail(new Error(`process ${data.me}: ${message.error}`))
    const w = waiting.shift()
    if (w) w.resolve(message)
    else queue.push(message)
  })
  const proc = { child, pid: child.pid, exited: false }
  proc.exit = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      proc.exited = true
      const last = stderr.trim().split('\n').filter(Boolean).slice(-1)[0]
      fail(new Error(`process ${data.me} exited (${signal || `code ${code}`}) before it finished${last ? `: ${last.slice(0, 200)}` : ''}`))
      resolve(signal || code)
    })
  })
  proc.send = (message) => child.send(message)
  proc.next = (ms, what) => {
    if (queue.length) return Promise.resolve(queue.shift())
    if (failure) return Promise.reject(failure)
    return new Promise((resolve, reject) => {
      const w = {
        resolve: (m) => { clearTimeout(timer); resolve(m) },
        reject: (e) => { clearTimeout(timer); reject(e) }
      }
      const timer = setTimeout(() => {
        waiting.splice(waiting.indexOf(w), 1)
        reject(new HangError(`${what || `process ${data.me}`}: no answer in ${(ms / 1000).toFixed(1)} s`))
      }, ms)
      waiting.push(w)
    })
  }
  return proc
}

// Starts one process per entry of `data` and resolves once each has said
// 'ready' (within readyMs: forking and loading take a while on a busy
// machine).
async function startProcesses (caseId, data, readyMs = 30000) {
  const procs = data.map((entry) => startProcess(caseId, entry))
  // Starting is their work, not this process's: 50 processes that load
  // and join on one CPU may take seconds before the first says ready.
  const starting = setInterval(progress, 500)
  try {
    await Promise.all(procs.map(async (p, i) => {
      const message = await p.next(readyMs, `process ${i} starting`)
      if (message !== 'ready') throw new Error(`process ${i} said ${JSON.stringify(message)}`)
    }))
  } catch (error) {
    await stopProcesses(procs)
    throw error
  } finally {
    clearInterval(starting)
  }
  return procs
}

// Each process exits once its channel closes (see proc.js); one that does
// not (busy, or stuck) is killed.
async function stopProcesses (procs) {
  for (const p of procs) if (!p.exited && p.child.connected) p.child.disconnect()
  const timer = setTimeout(() => { for (const p of procs) if (!p.exited) p.child.kill('SIGKILL') }, 2000)
  await Promise.all(procs.map((p) => p.exit))
  clearTimeout(timer)
}

// A little CPU work in each critical section (also the thread case's).
function work () {
  let x = 1
  for (let i = 0; i < 200; i++) x = (x * 1103515245 + 12345) | 0
  return x
}

// A contending process's side of each round: from the round's common start
// to its end, request(name, callback) again and again, with the name and
// the marker file that pick(round) gives; the callback O_EXCL-creates the
// marker (a second holder finds it there: a violation), does the same small
// work and removes it. Each round answers { round, ops, violations, cpu },
// cpu the process's CPU time (ns) from the start to the end of its loop.
function contend (request, pick) {
  let marker = null
  let stopAt = 0
  let ops = 0
  let violations = 0
  const callback = () => {
    if (hostNs() < stopAt) ops++
    violations += critical(marker)
  }
  process.on('message', async (go) => {
    stopAt = go.stopAt
    ops = 0
    violations = 0
    // All start at once: a timer to just before the start, then a spin.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, (go.startAt - hostNs()) / 1e6 - 2)))
    while (hostNs() < go.startAt) continue
    const cpu = cpuNs()
    while (hostNs() < stopAt) {
      const { name, file } = pick(go)
      marker = file
      await request(name, callback)
    }
    process.send({ round: go.round, ops, violations, cpu: cpuNs() - cpu })
  })
  process.send('ready')
}

// The process's CPU time so far (ns).
function cpuNs () {
  const { user, system } = process.cpuUsage()
  return (user + system) * 1000
}

// The critical section: O_EXCL-creates the marker, does the small work and
// removes it. Returns 1 if another process was inside (it removes the
// marker): a violation; else 0.
function critical (marker) {
  let fd
  try {
    fd = fs.openSync(marker, 'wx')
  } catch (error) {
    if (error.code !== 'EEXIST') throw error
    work()
    return 1
  }
  fs.closeSync(fd)
  work()
  fs.unlinkSync(marker)
  return 0
}

module.exports = { HangError, hostNs, cpuNs, progress, startProcess, startProcesses, stopProcesses, work, contend, critical }
