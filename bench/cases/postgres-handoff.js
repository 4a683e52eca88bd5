'use strict'

// Handoff of one exclusive lock between two processes through a PostgreSQL
// scope, one way: from the moment the holder's callback returns (process A)
// to the moment the waiter's callback starts (process B), p50 and p99, on
// CLOCK_MONOTONIC, which the two processes share. In between: A's shim
// sends the release call; the database runs it (release, process the
// queue: the waiter's grant, pg_notify) and commits; B's session receives
// the notification, and B's shim runs the callback. That is one
// notification from one process to another, behind one statement.
//
// The reference is that alone: a raw LISTEN/NOTIFY trip between two
// processes, one way: A takes the time and sends SELECT pg_notify(channel,
// time) (prepared) on its pg.Client; B's 'notification' event takes the
// time; B then answers the same way, and so on (the round trip, A's send to
// A's receipt of the answer, is on its own row: twice the one-way trip).
// Like the Unix-socket floor of the scope handoff, each message carries its
// send time.
//
// As in scope-handoff.js, each holder waits inside its callback until the
// other process's next request is queued, so that every release is a
// handoff, told through a 16-byte file of the point's directory. A request
// is in the database's queue once its call is done, not when request()
// returns: the waiter says so after a query() of its manager, which goes on
// the same session after the request call. The timestamps of both
// processes' callbacks are merged as there (an overlap is a violation).

const fs = require('fs')
const path = require('path')
const { open } = require('../lib/references')
const { measure } = require('../lib/measure')
const { percentile } = require('../lib/stats')
const { hostNs, progress, startProcesses, stopProcesses } = require('../lib/processes')
const { handoffs, handoffRounds, HOLD_MS } = require('./scope-handoff')
const pgBench = require('../lib/postgres')

function points (opts) {
  return [{
    key: 'postgres/handoff',
    label: 'postgres: handoff between 2 processes',
    params: { n: opts.quick ? 300 : 1000 },
    passes: opts.quick ? 1 : 3,
    rounds: opts.quick ? 3 : 4,
    scratch: true,
    postgres: true,
    impls: ['web-locks-postgres', 'pg-notify']
  }]
}

async function run ({ n }, implId, ctx) {
  const place = ctx.postgres
  const admin = await pgBench.client(place, { application_name: 'web-locks-bench-admin' })
  const scope = `handoff-${process.pid}`
  // One after the other: the first creates the schema.
  const procs = []
  for (const me of [0, 1]) procs.push(...await startProcesses('postgres-handoff', [{ me, impl: implId, dir: ctx.dir, scope, place }]))
  let roundNo = 0
  async function round (m, n) {
    const r = ++roundNo
    const signals = path.join(ctx.dir, `signals-${r}`)
    fs.writeFileSync(signals, Buffer.alloc(16))
    const go = { round: r, name: `handoff-${r}`, n, signals }
    const server = await pgBench.serverCpu(admin, place)
    if (implId === 'pg-notify') {
      // Process 1 listens for the round's messages before 0 sends the first.
      procs[1].send(go)
      await procs[1].next(10000, `round ${r}, process 1 arming`)
      procs[0].send(go)
    } else {
      for (const p of procs) p.send(go)
    }
    const limit = 20000 + n * HOLD_MS / 4
    // A round of handoffs through the database takes seconds, during which
    // this process waits: it tells lib/spawn.js it is not idle; a round that
    // does not end is caught by the limit of p.next (a HangError).
    const ticker = setInterval(progress, 1000)
    let results
    try {
      results = await Promise.all(procs.map((p, i) => p.next(limit, `round ${r}, process ${i}`)))
    } finally {
      clearInterval(ticker)
    }
    // Per hand-off (2n: each process takes the lock n times), or per
    // message for the reference (each process sends n): a hand-off's
    // statements are a release that grants, a request that queues, and the
    // query() after it by which its process knows it waits.
    const spent = pgBench.serverCpuSpent(server, await pgBench.serverCpu(admin, place))
    if (spent !== null) m.serverCpu = spent / (2 * n)
    if (implId === 'pg-notify') {
      const samples = results.flatMap((x) => Array.from(x.latencies))
      m.p50 = percentile(samples, 50)
      m.p99 = percentile(samples, 99)
      m.rtt = percentile(results[0].rtts, 50)
      m.samples = samples.length
      return
    }
    const { latencies, violations, repeats } = handoffs(results.map((x) => x.holds))
    m.p50 = percentile(latencies, 50)
    m.p99 = percentile(latencies, 99)
    m.samples = latencies.length
    m.violations = violations
    m.repeats = repeats
  }
  try {
    return await measure((m) => round(m, n), { ...ctx, warmup: () => round({}, Math.max(50, n >> 3)) })
  } finally {
    await stopProcesses(procs)
    await admin.end()
  }
}

// In each process.
async function proc ({ me, impl, scope, place }) {
  if (impl === 'pg-notify') return notifyProc({ me, place })
  const locks = await open(impl, { place, scope })
  handoffRounds(me, async (name, callback, queued) => {
    let entered = false
    const p = locks.request(name, () => {
      entered = true
      callback()
    })
    // Its call is done once query()'s, which follows it, is: queued there,
    // unless it was granted at once (its callback ran or will run first,
    // and then the other process is not holding).
    await locks.query()
    if (!entered) queued()
    return p
  })
}

// The reference: process 0 notifies 1, which answers; each message carries
// its send time. Process 0 also times each round trip.
async function notifyProc ({ me, place }) {
  const client = await pgBench.client(place)
  const channel = (who) => `${place.schema}_${who}`
  await client.query(`LISTEN "${channel(me)}"`)
  const notify = { name: 'bench_notify', text: 'SELECT pg_notify($1, $2)' }
  const to = channel(1 - me)
  process.on('message', ({ round, n }) => {
    const latencies = new Float64Array(n)
    const rtts = new Float64Array(n)
    let sent = 0
    let k = 0
    let lastSent = 0
    const send = () => {
      sent++
      lastSent = hostNs()
      client.query({ ...notify, values: [to, String(lastSent)] }).catch(() => {})
    }
    const onNotification = (message) => {
      const now = hostNs()
      latencies[k] = now - Number(message.payload)
      if (me === 0) rtts[k] = now - lastSent
      k++
      if (sent < n) send()
      if (k === n) {
        client.off('notification', onNotification)
        process.send({ round, latencies, rtts })
      }
    }
    client.on('notification', onNotification)
    if (me === 0) send()
    else process.send('armed')
  })
  process.send('ready')
}

function rows (get) {
  const key = 'postgres/handoff'
  const out = []
  for (const [metric, what] of [['p50', 'p50'], ['p99', 'p99']]) {
    out.push(pgRow(get, `postgres.handoff.${metric}`, `handoff, one way, ${what} (reference: NOTIFY -> the other process's notification event)`, 'ns', key, metric))
  }
  out.push(pgRow(get, 'postgres.handoff.rtt', 'NOTIFY round trip, p50 (process 0 -> 1 -> 0)', 'ns', key, 'rtt', { reference: 'pg-notify' }))
  // The target: the hand-off's p50 against the round trip.
  const p50 = out[0]
  const rtt = out[out.length - 1]
  out.push({ ...p50, id: 'postgres.handoff.p50.rtt', label: 'handoff, one way, p50 (reference: NOTIFY round trip, p50)', cells: { ...p50.cells, reference: rtt.cells.reference } })
  out.push(pgRow(get, 'postgres.handoff.server', 'handoff: server CPU time per handoff: release, next request, its query() (reference: per NOTIFY)', 'ns', key, 'serverCpu'))
  out.push({ ...pgRow(get, 'postgres.handoff.violations', 'handoff: mutual-exclusion violations', 'count', key, 'violations', { reference: null }), better: null })
  return out
}

function pgRow (get, id, label, unit, key, metric, { reference = 'pg-notify' } = {}) {
  const row = pgBench.pgRow(get, { id, label, unit, key, metric, reference })
  // The round trip is the reference's only.
  if (metric === 'rtt') {
    row.cells = row.cells.reference ? { reference: row.cells.reference } : {}
    row.better = null
  }
  return row
}

module.exports = {
  section: 'handoff of one exclusive lock between 2 processes (one way: holder returns -> waiter called; reference: LISTEN/NOTIFY between 2 processes, one way)',
  table: 'postgres',
  points,
  run,
  proc,
  rows
}
