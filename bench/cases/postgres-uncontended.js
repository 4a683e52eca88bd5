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
    impls: ['web-locks-postgres', 'pg-advisory', 'pg-update']
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

async function run ({ ops, warmupMs }, implId, ctx) {
  const place = ctx.postgres
  const admin = await pgBench.client(place, { application_name: 'web-locks-bench-admin' })
  let loop
  let counter = null
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
    await admin.end()
  }
}

function rows (get) {
  const key = 'postgres/uncontended'
  return [
    pgBench.pgRow(get, { id: 'postgres.uncontended', label: 'request+release, sync callback, 1 name (reference: advisory lock+unlock)', unit: 'ns', key, metric: 'op', reference: 'pg-advisory' }),
    pgBench.pgRow(get, { id: 'postgres.uncontended.update', label: 'request+release (reference: 2 single-row UPDATEs of an unlogged table)', unit: 'ns', key, metric: 'op', reference: 'pg-update' }),
    pgBench.pgRow(get, { id: 'postgres.uncontended.update.server', label: 'request+release: server CPU time (reference: the 2 UPDATEs)', unit: 'ns', key, metric: 'serverCpu', reference: 'pg-update' }),
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
