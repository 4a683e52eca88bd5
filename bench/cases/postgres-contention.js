'use strict'

// 50 processes contending through a PostgreSQL scope, on 1 name and on 100
// names, for a fixed time, each its own agent looping request(name) -> a
// short critical section -> release (on 100 names, a name drawn at random
// for each request): grants per second, fairness (the fewest grants any
// process got over the most any got), mutual-exclusion violations, and
// whether every process finishes: after the stop each is granted at most
// once more, so one still waiting long after (a lost wake-up leaves it, and
// everyone queued behind it, waiting for ever) makes the point 'hangs'.
// The critical section checks exclusion as in scope-contention.js: an
// O_EXCL marker file per name.
//
// Connections: the child counts the point's connections in pg_stat_activity
// (by its application_name) every 100 ms while the processes run; the most
// it saw, over the processes, must be at most 2 (an agent's session and its
// watcher).
//
// The reference does the same with PostgreSQL's own lock manager:
// pg_advisory_lock($1) / pg_advisory_unlock($1) on one pg.Client per
// process (one connection each), the key of the name.
//
// On 1 name, a second reference measures what wakes a waiter here, a
// notification, on its own: a ring of the 50 processes, each LISTENing on
// a channel of its own on one pg.Client, passes a token with pg_notify to
// the next, which runs the same critical section and passes it on. No lock
// that wakes its next holder by notification can grant faster than the
// ring passes its token (up to PostgreSQL 18, every NOTIFY signals every
// listening backend of the database, which then reads the queue).

const path = require('path')
const { open } = require('../lib/references')
const { measure } = require('../lib/measure')
const { HangError, hostNs, cpuNs, progress, startProcesses, stopProcesses, contend, critical } = require('../lib/processes')
const pgBench = require('../lib/postgres')

const PROCS = 50
const VARIANTS = [1, 100] // names
const START_MS = 500 // from the parent's go to the start: 50 processes to wake on 2 CPUs
const HANG_MS = 10000 // after the stop, all must have reported by then
// Fairness is the fewest grants of a process over the most: in a fixed
// time a FIFO queue gives some processes one more than others, which reads
// 0.88 with 7 and 8. A round lasts long enough for this many grants per
// process at the warmup's rate (up to MAX_ROUND_MS), so that one more
// costs at most 0.05.
const FAIR_GRANTS = 20
const MAX_ROUND_MS = 15000

function points (opts) {
  return VARIANTS.map((names) => ({
    key: `postgres/contention/${names}`,
    label: `postgres: ${PROCS} processes contending on ${names} name${names > 1 ? 's' : ''}`,
    params: { procs: PROCS, names, ms: opts.quick ? 1000 : 3000, hangMs: HANG_MS },
    rounds: opts.quick ? 1 : 3,
    scratch: true,
    postgres: true,
    // Starting 50 processes and their agents takes seconds on 2 CPUs.
    timeoutMs: opts.quick ? 90000 : 180000,
    impls: names === 1 ? ['web-locks-postgres', 'pg-advisory', 'pg-notify-ring'] : ['web-locks-postgres', 'pg-advisory']
  }))
}

async function run ({ procs: count, names, ms, hangMs }, implId, ctx) {
  const place = ctx.postgres
  const scope = `contention-${process.pid}`
  // The first agent makes the schema, alone; then it leaves.
  if (implId === 'web-locks-postgres') await (await open(implId, { place, scope })).close()
  const admin = await pgBench.client(place, { application_name: 'web-locks-bench-admin' })
  const started = Date.now()
  const procs = await startProcesses('postgres-contention',
    Array.from({ length: count }, (_, me) => ({ me, procs: count, impl: implId, dir: ctx.dir, scope, place })), 90000)
  const startMs = Date.now() - started
  let roundNo = 0
  async function round (m, ms) {
    const r = ++roundNo
    const startAt = hostNs() + START_MS * 1e6
    const stopAt = startAt + ms * 1e6
    const prefix = `r${r}-`
    const server = await pgBench.serverCpu(admin, place)
    for (const p of procs) p.send({ round: r, prefix, names, startAt, stopAt, dir: ctx.dir })
    // The point's connections, every 100 ms until all have reported.
    let most = await pgBench.connections(admin, place)
    let polling = true
    const poller = (async () => {
      while (polling) {
        most = Math.max(most, await pgBench.connections(admin, place))
        progress()
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    })()
    const settled = await Promise.allSettled(procs.map((p, i) => p.next(START_MS + ms + hangMs, `round ${r}, process ${i}`)))
    polling = false
    await poller
    const failed = settled.find((s) => s.status === 'rejected')
    if (failed && !(failed.reason instanceof HangError)) throw failed.reason
    if (failed) {
      const silent = settled.filter((s) => s.status === 'rejected').length
      throw new HangError(`round ${r}: ${silent} of ${count} processes still waiting ${hangMs / 1000} s after the stop` +
        await scopeState(implId, place, scope, prefix))
    }
    const results = settled.map((s) => s.value)
    const ops = results.map((x) => x.ops)
    const total = ops.reduce((a, b) => a + b, 0)
    m.rate = total / (ms / 1000)
    // Where the time goes, per grant: the server's backends (the point's
    // connections; the watchers' too) and the processes, from the start to
    // the last answer (the grants after the stop are few).
    const spent = pgBench.serverCpuSpent(server, await pgBench.serverCpu(admin, place))
    if (spent !== null && total > 0) m.serverCpu = spent / total
    if (total > 0) m.clientCpu = results.reduce((a, x) => a + x.cpu, 0) / total
    m.fairness = Math.min(...ops) / Math.max(...ops)
    m.violations = results.reduce((a, x) => a + x.violations, 0)
    m.connections = most
    m.perProcess = most / count
    m.startMs = startMs
  }
  let roundMs = ms
  const warm = async () => {
    const m = {}
    await round(m, Math.min(ms, 1000) / 2)
    if (m.rate > 0) roundMs = Math.min(MAX_ROUND_MS, Math.max(ms, Math.ceil(FAIR_GRANTS * count / m.rate * 1000)))
  }
  try {
    return await measure(async (m) => {
      await round(m, roundMs)
      m.roundMs = roundMs
    }, { ...ctx, warmup: warm })
  } finally {
    await stopProcesses(procs)
    await admin.end()
  }
}

// For a hung round: who holds and who waits on the round's names (a new
// agent of the scope looks).
async function scopeState (implId, place, scope, prefix) {
  if (implId !== 'web-locks-postgres') return ''
  try {
    const m = await open(implId, { place, scope })
    const { held, pending } = await m.query()
    await m.close()
    const mine = (list) => list.filter((l) => l.name.startsWith(prefix)).length
    return `; the scope then had ${mine(held)} holder(s) and ${mine(pending)} waiting on the round's names`
  } catch (error) {
    return `; the scope could not be queried (${error.message})`
  }
}

// In each process.
async function proc ({ me, procs, impl, scope, place }) {
  if (impl === 'pg-notify-ring') return ring({ me, procs, place })
  let request
  if (impl === 'pg-advisory') {
    const client = await pgBench.client(place)
    const lock = { name: 'bench_lock', text: 'SELECT pg_advisory_lock($1)' }
    const unlock = { name: 'bench_unlock', text: 'SELECT pg_advisory_unlock($1)' }
    const keys = new Map()
    request = async (name, callback) => {
      let key = keys.get(name)
      if (key === undefined) keys.set(name, (key = 1 + Number(name.slice(name.lastIndexOf('-') + 1))))
      await client.query({ ...lock, values: [key] })
      try {
        return callback()
      } finally {
        await client.query({ ...unlock, values: [key] })
      }
    }
  } else {
    const locks = await open(impl, { place, scope })
    request = (name, callback) => locks.request(name, callback)
  }
  contend(request, (go) => {
    const i = go.names === 1 ? 0 : Math.floor(Math.random() * go.names)
    return { name: `${go.prefix}${i}`, file: path.join(go.dir, `inside-${go.prefix}${i}`) }
  })
}

// A process of the ring (see the top): process 0 starts each round with
// the token; a process that gets it after the stop, or is told to stop,
// tells the next to stop and answers; the stop comes back to where it
// started, which has answered already. Payloads carry the round.
async function ring ({ me, procs, place }) {
  const client = await pgBench.client(place)
  const channel = (i) => `${place.schema}_ring_${i}`
  await client.query(`LISTEN "${channel(me)}"`)
  const notify = { name: 'ring_notify', text: 'SELECT pg_notify($1, $2)' }
  const pass = (round, what) => client.query({ ...notify, values: [channel((me + 1) % procs), `${round} ${what}`] })
  let go = null
  let ops = 0
  let violations = 0
  let answered = true
  let cpu = 0
  const answer = () => {
    answered = true
    process.send({ round: go.round, ops, violations, cpu: cpuNs() - cpu })
  }
  const token = () => {
    if (hostNs() >= go.stopAt) {
      answer()
      return pass(go.round, 'stop')
    }
    ops++
    violations += critical(path.join(go.dir, `inside-${go.prefix}0`))
    return pass(go.round, 'token')
  }
  // A notification of a round whose message has not come yet (a busy CPU
  // can deliver the token first) waits for that message.
  let early = null
  const notified = (payload) => {
    const [round, what] = payload.split(' ')
    if (go === null || Number(round) > go.round) {
      early = payload
      return
    }
    if (Number(round) !== go.round || answered) return
    let next
    if (what === 'stop') {
      answer()
      next = pass(go.round, 'stop')
    } else {
      next = token()
    }
    next.catch((error) => process.send({ error: error.message }))
  }
  client.on('notification', ({ payload }) => notified(payload))
  process.on('message', async (message) => {
    go = message
    ops = 0
    violations = 0
    answered = false
    cpu = cpuNs()
    if (early !== null) {
      const payload = early
      early = null
      notified(payload)
    }
    if (me !== 0) return
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, (go.startAt - hostNs()) / 1e6 - 2)))
    while (hostNs() < go.startAt) continue
    cpu = cpuNs()
    token().catch((error) => process.send({ error: error.message }))
  })
  process.send('ready')
}

function rows (get) {
  const out = []
  for (const names of VARIANTS) {
    const key = `postgres/contention/${names}`
    const what = `${PROCS} processes, ${names} name${names > 1 ? 's' : ''}`
    const row = (id, label, unit, metric, better, reference = 'pg-advisory') => {
      return pgBench.pgRow(get, { id: `postgres.contention.${names}.${id}`, label: `${what}: ${label}`, unit, key, metric, better, reference })
    }
    out.push(row('rate', 'locks per second (reference: advisory locks)', 'ops/s', 'rate', 'higher'))
    if (names === 1) out.push(row('ring', 'locks per second (reference: a NOTIFY ring, see above)', 'ops/s', 'rate', 'higher', 'pg-notify-ring'))
    out.push(row('server', 'server CPU time per grant (reference: advisory locks)', 'ns', 'serverCpu', 'lower'))
    if (names === 1) out.push(row('ring.server', 'server CPU time per grant (reference: the NOTIFY ring)', 'ns', 'serverCpu', 'lower', 'pg-notify-ring'))
    out.push(row('client', 'client CPU time per grant, all processes (reference: advisory locks)', 'ns', 'clientCpu', 'lower'))
    out.push(row('fairness', 'fairness min/max', 'ratio', 'fairness', null))
    out.push(row('round', `round length, ms (for ${FAIR_GRANTS} grants per process at the warmup's rate)`, 'count', 'roundMs', null))
    out.push(row('violations', 'violations', 'count', 'violations', null))
    out.push(row('connections', 'connections, most seen at once (pg_stat_activity)', 'count', 'connections', null))
    out.push(row('perProcess', 'connections per process', 'ratio', 'perProcess', null))
  }
  return out
}

module.exports = {
  section: `${PROCS} processes contending (each its own agent: takes the lock, O_EXCL-creates a marker, does the same small work, removes it, releases; fixed time; reference: pg_advisory_lock/unlock; on 1 name also a NOTIFY ring)`,
  table: 'postgres',
  points,
  run,
  proc,
  rows
}
