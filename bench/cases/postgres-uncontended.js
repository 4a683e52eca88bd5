'use strict'

// Uncontended request/release through a PostgreSQL scope, in one process:
// each request is awaited before the next, so the lock is always free when
// asked for. A request is one call (one transaction) to the database and
// its release another; the shim settles the request once the release is
// done. The reference is the least a lock held across two statements can
// cost on the same server: pg_advisory_lock($1) and pg_advisory_unlock($1),
// prepared, awaited one after the other on one pg.Client (two round trips,
// no table written, nothing to flush at commit). Both run in the same
// child process type, against the same server, in the same run.
//
// A second reference is the least a lock whose state is a row of a table
// costs, as web-locks' is (its queue, holders and tokens, which advisory
// locks do not have): two single-row UPDATEs of an unlogged table,
// prepared, each its own transaction, on one pg.Client.
//
// A third is web-locks' own two statements, as its manager sends them (the
// request that updates a free name's row, and that row's release), replayed
// on one pg.Client: what web-locks costs without its JavaScript (the shim,
// the ordered line of calls, the request's record), which the difference
// from web-locks' figure is.
//
// The child also counts the statements web-locks sends per request+release
// (pg.Client#query, which the manager's connections use): round trips.
// And, for both, where the time goes: the CPU time per request+release of
// the server's backends (of the point's connections, where /proc shows
// them) and of the client process; the rest of the time is waiting.

const { measure, nowNs, warmup } = require('../lib/measure')
const { open } = require('../lib/references')
const pgBench = require('../lib/postgres')
const { cpuNs } = require('../lib/processes')

function points (opts) {
  return [{
    key: 'postgres/uncontended',
    label: 'postgres: uncontended, 1 name',
    params: { ops: opts.quick ? 500 : 2000, warmupMs: opts.quick ? 300 : 600 },
    passes: opts.quick ? 1 : 3,
    rounds: opts.quick ? 3 : 4,
    postgres: true,
    impls: ['web-locks-postgres', 'pg-advisory', 'pg-update', 'pg-statements']
  }]
}

// Counts the statements all pg.Clients of this process send.
function countQueries () {
  const { Client } = require('pg')
  const counter = { n: 0 }
  const query = Client.prototype.query
  Client.prototype.query = function (...args) {
    counter.n++
    return query.apply(this, args)
  }
  return counter
}

// A reference's loop: n times its two statements, one after the other on
// client c; the time per pair.
function pairs (c, first, second) {
  return async (n) => {
    const t0 = nowNs()
    for (let i = 0; i < n; i++) {
      await c.query(first)
      await c.query(second)
    }
    return (nowNs() - t0) / n
  }
}

// web-locks' request (on a free name) and release statements, as a manager
// on `place` sends them: made by two requests of its own (the second one
// is in the name's row), caught on their way to pg.
async function ownStatements (place) {
  const { Client } = require('pg')
  const sent = []
  const query = Client.prototype.query
  Client.prototype.query = function (config, ...rest) {
    if (config !== null && typeof config === 'object' && typeof config.name === 'string') sent.push(config)
    return query.call(this, config, ...rest)
  }
  let locks
  try {
    locks = await open('web-locks-postgres', { place, scope: `statements-${process.pid}` })
    await locks.request('n0', () => {})
    await locks.request('n0', () => {})
  } finally {
    Client.prototype.query = query
  }
  const last = (suffix) => sent.findLast((q) => q.name.endsWith(suffix))
  const request = last('_request')
  const release = last('_release_row')
  if (request === undefined || release === undefined) throw new Error('web-locks sent no request and release_row statements')
  return { locks, request: { ...request, values: [...request.values] }, release: { ...release, values: [...release.values] } }
}

// The replay of ownStatements' two: the release gives the name's id that
// the request's answer says, and the ceiling of the tokens is raised as
// the manager raises it (a stale one would cost a call every request).
function replay (c, request, release) {
  return async (n) => {
    const t0 = nowNs()
    for (let i = 0; i < n; i++) {
      const { rows } = await c.query(request)
      const { token, in_row: inRow, ceiling } = rows[0]
      if (token === null || token === '0' || inRow === null) throw new Error('the replayed request was not granted in its row')
      if (ceiling !== null) request.values[8] = ceiling
      release.values[2] = inRow
      await c.query(release)
    }
    return (nowNs() - t0) / n
  }
}

async function run ({ ops, warmupMs }, implId, ctx) {
  const place = ctx.postgres
  const admin = await pgBench.client(place, { application_name: 'web-locks-bench-admin' })
  let loop
  let counter = null
  let closeAlso = async () => {}
  if (implId === 'pg-advisory') {
    const c = await pgBench.client(place)
    loop = pairs(c, { name: 'bench_lock', text: 'SELECT pg_advisory_lock($1)', values: [42] },
      { name: 'bench_unlock', text: 'SELECT pg_advisory_unlock($1)', values: [42] })
  } else if (implId === 'pg-update') {
    const c = await pgBench.client(place)
    const table = `"${place.schema}".floor`
    await c.query(`CREATE SCHEMA IF NOT EXISTS "${place.schema}"`)
    await c.query(`CREATE UNLOGGED TABLE ${table} (id integer PRIMARY KEY, n bigint NOT NULL)`)
    await c.query(`INSERT INTO ${table} VALUES (1, 0)`)
    loop = pairs(c, { name: 'bench_take', text: `UPDATE ${table} SET n = n + 1 WHERE id = $1`, values: [1] },
      { name: 'bench_give', text: `UPDATE ${table} SET n = n - 1 WHERE id = $1`, values: [1] })
  } else if (implId === 'pg-statements') {
    // The manager stays open, alone in its scope (no watcher), so that its
    // agent, whose id the statements carry, is there.
    const own = await ownStatements(place)
    closeAlso = () => own.locks.close()
    const c = await pgBench.client(place)
    loop = replay(c, own.request, own.release)
  } else {
    counter = countQueries()
    const locks = await open(implId, { place, scope: `uncontended-${process.pid}` })
    const callback = () => {}
    loop = async (n) => {
      const t0 = nowNs()
      for (let i = 0; i < n; i++) await locks.request('n0', callback)
      return (nowNs() - t0) / n
    }
  }
  try {
    return await measure(async (m) => {
      const before = counter && counter.n
      const server = await pgBench.serverCpu(admin, place)
      const client = cpuNs()
      m.op = await loop(ops)
      m.clientCpu = (cpuNs() - client) / ops
      const spent = pgBench.serverCpuSpent(server, await pgBench.serverCpu(admin, place))
      if (spent !== null) m.serverCpu = spent / ops
      if (counter) m.calls = (counter.n - before) / ops
    }, { ...ctx, warmup: () => warmup(loop, warmupMs) })
  } finally {
    await closeAlso()
    await admin.end()
  }
}

function rows (get) {
  const key = 'postgres/uncontended'
  return [
    pgBench.pgRow(get, { id: 'postgres.uncontended', label: 'request+release, sync callback, 1 name (reference: advisory lock+unlock)', unit: 'ns', key, metric: 'op', reference: 'pg-advisory' }),
    pgBench.pgRow(get, { id: 'postgres.uncontended.update', label: 'request+release (reference: 2 single-row UPDATEs of an unlogged table)', unit: 'ns', key, metric: 'op', reference: 'pg-update' }),
    pgBench.pgRow(get, { id: 'postgres.uncontended.update.server', label: 'request+release: server CPU time (reference: the 2 UPDATEs)', unit: 'ns', key, metric: 'serverCpu', reference: 'pg-update' }),
    pgBench.pgRow(get, { id: 'postgres.uncontended.statements', label: 'request+release (reference: its 2 statements replayed on a pg.Client)', unit: 'ns', key, metric: 'op', reference: 'pg-statements' }),
    pgBench.pgRow(get, { id: 'postgres.uncontended.statements.server', label: 'request+release: server CPU time (reference: its 2 statements replayed)', unit: 'ns', key, metric: 'serverCpu', reference: 'pg-statements' }),
    pgBench.pgRow(get, { id: 'postgres.uncontended.statements.client', label: 'request+release: client CPU time (reference: its 2 statements replayed)', unit: 'ns', key, metric: 'clientCpu', reference: 'pg-statements' }),
    pgBench.pgRow(get, { id: 'postgres.uncontended.server', label: 'request+release: server CPU time (reference: advisory lock+unlock)', unit: 'ns', key, metric: 'serverCpu', reference: 'pg-advisory' }),
    pgBench.pgRow(get, { id: 'postgres.uncontended.client', label: 'request+release: client CPU time (reference: advisory lock+unlock)', unit: 'ns', key, metric: 'clientCpu', reference: 'pg-advisory' }),
    pgBench.pgRow(get, { id: 'postgres.uncontended.calls', label: 'request+release: statements sent (round trips)', unit: 'ratio', better: null, key, metric: 'calls' })
  ]
}

module.exports = {
  section: '1 process: uncontended request/release (time per request, awaited one at a time; reference: pg_advisory_lock + pg_advisory_unlock, prepared, on one pg.Client)',
  table: 'postgres',
  points,
  run,
  rows
}
