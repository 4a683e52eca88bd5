'use strict'

// Handoff of one exclusive lock between two processes through a scope:
// latency from the moment the holder's callback returns to the moment the
// waiter's callback starts (one way), p50 and p99, on CLOCK_MONOTONIC,
// which the two processes share. As in handoff.js, each holder waits,
// inside its callback, until the other process has queued its next
// request, so that every release is a handoff.
//
// Who has queued is told through a small file in the point's directory
// (tmpfs: a pwrite in one process is seen by the next pread in the other):
// a process writes its slot after request() returns, when its request is in
// the scope's queue; the holder reads the other's slot in a loop. This wait
// is outside the timed interval, and no timestamp crosses processes while
// the lock moves: each process keeps its own callbacks' entry and exit
// times and sends them at the end of the round; the parent sorts the
// callbacks of both by entry and times each change of holder (the next
// entry minus the previous exit; a negative one is an overlap, a
// mutual-exclusion violation).
//
// proper-lockfile does the same; its waiter counts as queued once an
// attempt found the lock taken (it then retries on a timer). The floor is
// the same one-way trip as an 8-byte message through a Unix socket (a
// named pipe on Windows); --windows adds one through TCP on 127.0.0.1.

const fs = require('fs')
const path = require('path')
const { open } = require('../lib/references')
const { measure } = require('../lib/measure')
const { percentile } = require('../lib/stats')
const { hostNs, startProcesses, stopProcesses } = require('../lib/processes')
const { COLUMNS, scopeRow } = require('../lib/scope')
const { withWine } = require('../lib/wine')

const QUEUED = 0
const DONE = 1
const HOLD_MS = 100 // a holder waits this long at most for the other
const SPIN_READS = 50 // then it naps between reads
const FLOORS = ['socket', 'tcp']

function points (opts) {
  return [{
    key: 'scope/handoff',
    label: 'scope: handoff between 2 processes',
    params: { n: opts.quick ? 2000 : 5000, lockfileN: opts.quick ? 150 : 300 },
    passes: opts.quick ? 1 : 3,
    rounds: opts.quick ? 3 : 4,
    scratch: true,
    impls: opts.windows ? withWine(['web-locks-scope', ...FLOORS]) : ['web-locks-scope', 'proper-lockfile', 'socket']
  }]
}

// The changes of holder in the callbacks of both processes: holds[i] is
// a Float64Array of (entry, exit) pairs.
function handoffs (holds) {
  const all = []
  holds.forEach((h, who) => {
    for (let i = 0; i < h.length; i += 2) all.push({ entry: h[i], exit: h[i + 1], who })
  })
  all.sort((a, b) => a.entry - b.entry)
  const latencies = []
  let violations = 0
  let repeats = 0 // the same process again: the other was not queued in time
  for (let i = 1; i < all.length; i++) {
    if (all[i].entry < all[i - 1].exit) violations++
    else if (all[i].who !== all[i - 1].who) latencies.push(all[i].entry - all[i - 1].exit)
    else repeats++
  }
  const span = all.length ? all[all.length - 1].exit - all[0].entry : 0
  return { latencies, violations, repeats, span }
}

async function run ({ n, lockfileN }, implId, ctx) {
  const scope = `handoff-${process.pid}`
  const count = implId === 'proper-lockfile' ? lockfileN : n
  // One after the other: for the socket, 0 listens and 1 connects.
  const procs = []
  for (const me of [0, 1]) procs.push(...await startProcesses('scope-handoff', [{ me, impl: implId, dir: ctx.dir, scope }]))
  let roundNo = 0
  async function round (m, n) {
    const r = ++roundNo
    const signals = path.join(ctx.dir, `signals-${r}`)
    fs.writeFileSync(signals, Buffer.alloc(16))
    for (const p of procs) p.send({ round: r, name: `handoff-${r}`, n, signals })
    // A handoff takes well under 100 ms, even on a busy machine.
    const limit = 10000 + n * HOLD_MS / 4
    const results = await Promise.all(procs.map((p, i) => p.next(limit, `round ${r}, process ${i}`)))
    if (FLOORS.includes(implId)) {
      const samples = results.flatMap((x) => Array.from(x.latencies))
      m.p50 = percentile(samples, 50)
      m.p99 = percentile(samples, 99)
      m.rate = samples.length / (results[0].span / 1e9)
      m.samples = samples.length
      return
    }
    const { latencies, violations, repeats, span } = handoffs(results.map((x) => x.holds))
    m.p50 = percentile(latencies, 50)
    m.p99 = percentile(latencies, 99)
    m.rate = latencies.length / (span / 1e9)
    m.samples = latencies.length
    m.violations = violations
    m.repeats = repeats
  }
  try {
    return await measure((m) => round(m, count), { ...ctx, warmup: () => round({}, Math.max(implId === 'proper-lockfile' ? 30 : 200, count >> 3)) })
  } finally {
    await stopProcesses(procs)
  }
}

// The signal file: per process, its QUEUED and DONE slots (Int32).
function signalsOf (file) {
  const fd = fs.openSync(file, 'r+')
  const one = Buffer.alloc(4)
  const two = new Int32Array(2)
  return {
    set (me, slot, value) {
      one.writeInt32LE(value)
      fs.writeSync(fd, one, 0, 4, (me * 2 + slot) * 4)
    },
    // Whether `who` has queued a request or is done.
    ready (who) {
      fs.readSync(fd, two, 0, 8, who * 8)
      return two[QUEUED] !== 0 || two[DONE] !== 0
    },
    close: () => fs.closeSync(fd)
  }
}

// A process's side of the rounds of handoffs: its callback holds each
// grant until the other process's next request is queued (or it is done),
// HOLD_MS at most, and records when it held it. queue(name, callback,
// queued) makes one request, calls queued() once the request is in its
// manager's queue (not if it was granted at once), and gives its promise.
// Returns queued, for a manager that tells it on its own.
function handoffRounds (me, queue) {
  const other = 1 - me
  const nap = new Int32Array(new SharedArrayBuffer(4))
  let signals = null
  let holds = null
  let k = 0
  const queued = () => signals.set(me, QUEUED, 1)
  const callback = () => {
    const entry = hostNs()
    signals.set(me, QUEUED, 0)
    // Hold until the other process's next request is queued (or it is
    // done), 100 ms at most: a few reads (it is usually queued by now),
    // then 20 µs naps, so as not to keep a CPU from it.
    const until = entry + HOLD_MS * 1e6
    for (let reads = 0; !signals.ready(other) && hostNs() < until; reads++) {
      if (reads >= SPIN_READS) Atomics.wait(nap, 0, 0, 0.02)
    }
    holds[k++] = entry
    holds[k++] = hostNs()
  }
  process.on('message', async ({ round, name, n, signals: file }) => {
    signals = signalsOf(file)
    holds = new Float64Array(2 * n)
    k = 0
    for (let j = 0; j < n; j++) await queue(name, callback, queued)
    signals.set(me, DONE, 1)
    signals.close()
    process.send({ round, holds: holds.subarray(0, k) })
  })
  process.send('ready')
  return queued
}

// In each process.
async function proc ({ me, impl, dir, scope }) {
  if (FLOORS.includes(impl)) return socketProc({ me, dir, tcp: impl === 'tcp' })
  // proper-lockfile: queued once an attempt found the lock taken.
  let onBusy = null
  const locks = await open(impl, { dir, scope, onBusy: () => onBusy() })
  onBusy = handoffRounds(me, (name, callback, queued) => {
    const p = locks.request(name, callback)
    if (impl !== 'proper-lockfile') queued()
    return p
  })
}

// The floor: process 0 listens, 1 connects; each 8-byte message carries its
// send time, and is answered at once. On a Unix socket, or a named pipe on
// Windows (where a path to listen on is a pipe's name); or on TCP, its
// port told in a file of the point's directory.
async function socketProc ({ me, dir, tcp }) {
  const net = require('net')
  const portFile = path.join(dir, 'floor.port')
  const address = tcp
    ? () => ({ host: '127.0.0.1', port: me === 0 ? 0 : Number(fs.readFileSync(portFile, 'utf8')) })
    : () => ({ path: process.platform === 'win32' ? `\\\\.\\pipe\\${path.basename(dir)}` : path.join(dir, 'floor.sock') })
  let socket
  if (me === 0) {
    const connected = new Promise((resolve) => {
      const server = net.createServer(resolve).listen(address(), () => {
        if (tcp) fs.writeFileSync(portFile, String(server.address().port))
        process.send('ready')
      })
    })
    socket = await connected
  } else {
    socket = await new Promise((resolve, reject) => {
      const s = net.connect(address(), () => resolve(s))
      s.once('error', reject)
    })
    process.send('ready')
  }
  // Each message at once, not held back while the last is unacknowledged.
  if (tcp) socket.setNoDelay(true)
  socket.pause()
  process.on('message', ({ round, n }) => {
    const latencies = new Float64Array(n)
    const out = Buffer.alloc(8)
    let pending = Buffer.alloc(0)
    let sent = 0
    let k = 0
    let first = 0
    const send = () => {
      sent++
      out.writeDoubleLE(hostNs())
      socket.write(out)
    }
    const onData = (chunk) => {
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk
      for (; pending.length >= 8; pending = pending.subarray(8)) {
        const now = hostNs()
        latencies[k++] = now - pending.readDoubleLE(0)
        if (!first) first = now
        if (sent < n) send()
      }
      if (k === n) {
        socket.off('data', onData)
        socket.pause()
        process.send({ round, latencies, span: hostNs() - first })
      }
    }
    socket.on('data', onData)
    socket.resume()
    if (me === 0) send()
  })
}

function rows (get, opts) {
  const key = 'scope/handoff'
  const threads = (metric) => ({ 'process-wide': { key: 'handoff', metric } })
  const out = []
  const local = opts.windows ? 'floor: Unix socket; wine: named pipe' : 'process-wide: between 2 threads'
  for (const [metric, what] of [['p50', 'latency p50'], ['p99', 'latency p99']]) {
    out.push(scopeRow(get, { id: `scope.handoff.${metric}`, label: `handoff, ${what} (${local})`, unit: 'ns', key, metric, from: threads(metric) }))
  }
  // --windows: the same figures against the TCP floor.
  if (opts.windows) {
    for (const [metric, what] of [['p50', 'latency p50'], ['p99', 'latency p99']]) {
      const columns = { ...COLUMNS, floor: 'tcp', 'floor@wine': 'tcp@wine' }
      out.push(scopeRow(get, { id: `scope.handoff.tcp.${metric}`, label: `handoff, ${what} (floor: TCP on 127.0.0.1)`, unit: 'ns', key, metric, columns }))
    }
  }
  // No rate row: between processes, how fast the holder sees the other's
  // request queued (its naps) sets the pace, not the handoff. It is in --json.
  out.push(scopeRow(get, { id: 'scope.handoff.violations', label: 'handoff: mutual-exclusion violations', unit: 'count', better: null, key, metric: 'violations', columns: { 'web-locks': 'web-locks-scope', 'proper-lockfile': 'proper-lockfile', 'web-locks@wine': 'web-locks-scope@wine' }, from: threads('violations') }))
  return out
}

module.exports = {
  handoffRounds,
  section: 'handoff of one exclusive lock between 2 processes (one way: holder returns -> waiter called; floor: Unix socket)',
  windowsSection: 'handoff of one exclusive lock between 2 processes (one way: holder returns -> waiter called; floor: an 8-byte message between 2 processes, one way)',
  table: 'scope',
  points,
  run,
  proc,
  rows,
  handoffs,
  HOLD_MS
}
