'use strict'

// N requests queued on one name of a PostgreSQL scope (N = 1k, 10k, 100k),
// behind a lock that another agent holds, from a few agents (4, each a
// session of its own, all in the child): what a request costs to enqueue,
// and what a grant + release costs while the queue is that long.
//
// - enqueue: from the first request() to the moment every request call is
//   done (each agent's last call is an ifAvailable request on the name,
//   answered 'not available' once the calls before it on its session are
//   done), over N: wall time per request, with the 4 sessions' calls in
//   flight together.
// - grant+release: the holder releases; each grant runs a callback that
//   returns at once, whose release grants the next request, and so on: the
//   time from the holder's release to the K-th callback, over K (K = 500 at
//   every N: the queue stays at least N - 500 long). The rest of
//   the queue then leaves with its agents (close()), untimed. The agents
//   are new in each round (a fresh name too), and settle before the timing.
//
// The growth exponent of each over N (log-log slope) says whether a
// request's cost depends on the length of the queue: 0 is flat.

const { open } = require('../lib/references')
const { measure, nowNs } = require('../lib/measure')
const { HangError, progress } = require('../lib/processes')
const { growthRow, shortSize } = require('../lib/rows')
const pgBench = require('../lib/postgres')

const AGENTS = 4
const DRAIN_LIMIT_MS = 120000
// Grants timed per round, the same at every N: a grant's cost also depends
// on how many grants came before it on the name (the dead row versions they
// leave, which vacuum cannot remove while any transaction of the database,
// such as an agent's watcher waiting on its neighbour's life lock, is older
// than them), so a different count per size would be measured as growth.
const GRANTS = 500

function sizes (opts) {
  return opts.quick ? [1e3, 1e4] : [1e3, 1e4, 1e5]
}

function points (opts) {
  return sizes(opts).map((n) => ({
    key: `postgres/queue/${n}`,
    label: `postgres: ${shortSize(n)} queued on one name`,
    series: 'postgres-queue',
    size: n,
    params: { n, grants: GRANTS },
    rounds: opts.quick ? 2 : 3,
    work: n,
    scale: ['enqueue'],
    postgres: true,
    timeoutMs: n >= 1e5 ? 300000 : opts.quick ? 60000 : 120000,
    impls: ['web-locks-postgres']
  }))
}

async function run ({ n, grants }, implId, ctx) {
  const place = ctx.postgres
  const scope = `queue-${process.pid}`
  const admin = await pgBench.client(place, { application_name: 'web-locks-bench-admin' })
  const schema = `"${place.schema}"`
  let roundNo = 0
  async function round (m, n, grants) {
    const name = `q-${++roundNo}`
    const holder = await open(implId, { place, scope })
    const agents = []
    for (let i = 0; i < AGENTS; i++) agents.push(await open(implId, { place, scope }))
    // Each join re-forms the ring of watchers (a few calls on the sessions,
    // then the previous round's leaving agents are swept): let it settle.
    await new Promise((resolve) => setTimeout(resolve, 200))
    await Promise.all([holder, ...agents].map((a) => a.query()))
    try {
      let release
      const held = new Promise((resolve) => {
        holder.request(name, () => new Promise((resolve2) => { release = resolve2; resolve() })).catch(() => {})
      })
      await held
      let granted = 0
      let drained
      const done = new Promise((resolve) => { drained = resolve })
      // Each grant tells lib/spawn.js that the child is not idle (its CPU
      // alone may not show it when grants are slow); the drain has its own
      // time limit, past which it is a hang (a lost wake-up).
      const callback = () => {
        progress()
        if (++granted === grants) drained(nowNs())
      }
      const t0 = nowNs()
      for (let i = 0; i < n; i++) agents[i % AGENTS].request(name, callback).catch(() => {})
      await Promise.all(agents.map((a) => a.request(name, { ifAvailable: true }, () => {})))
      m.enqueue = (nowNs() - t0) / n
      const { rows } = await admin.query(`SELECT count(*)::int AS queued FROM ${schema}.requests r JOIN ${schema}.names s ON s.id = r.name_id ` +
        'WHERE s.scope = $1 AND r.token IS NULL', [scope])
      m.queued = rows[0].queued
      const t1 = nowNs()
      release()
      let timer
      const limit = new Promise((resolve, reject) => {
        timer = setTimeout(() => reject(new HangError(`grant+release: ${granted} of ${grants} granted in ${DRAIN_LIMIT_MS / 1000} s`)), DRAIN_LIMIT_MS)
      })
      try {
        m.drain = ((await Promise.race([done, limit])) - t1) / grants
      } finally {
        clearTimeout(timer)
      }
    } finally {
      for (const a of [holder, ...agents]) await a.close()
    }
  }
  try {
    return await measure((m) => round(m, n, grants), { ...ctx, warmup: () => round({}, 200, 100) })
  } finally {
    await admin.end()
  }
}

function rows (get, opts) {
  const ns = sizes(opts)
  const keyOf = (n) => `postgres/queue/${n}`
  const out = []
  for (const n of ns) {
    for (const [metric, what] of [['enqueue', 'request() each, until its call is done'], ['drain', 'grant+release each, while the queue is long']]) {
      out.push(pgBench.pgRow(get, { id: `postgres.queue.${n}.${metric}`, label: `${shortSize(n)} queued on 1 name: ${what}`, unit: 'ns', key: keyOf(n), metric }))
    }
  }
  const range = `${shortSize(ns[0])}-${shortSize(ns[ns.length - 1])}`
  for (const [metric, what] of [['enqueue', 'enqueue'], ['drain', 'grant+release']]) {
    out.push(growthRow(get, { id: `postgres.queue.growth.${metric}`, label: `growth exponent ${range}: ${what}`, sizes: ns, keyOf, metric, columns: { 'web-locks': 'web-locks-postgres' } }))
  }
  return out
}

module.exports = {
  section: `N requests queued on one name behind a held lock, from ${AGENTS} agents (time per request; growth exponent: 0 = flat, 1 = linear in N)`,
  table: 'postgres',
  points,
  run,
  rows
}
