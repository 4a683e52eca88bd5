'use strict'

// The lock manager on PostgreSQL behind openLockManager(scope, { postgres }).
// The spec's algorithms run in the database, one SQL function and one
// transaction each (schema.sql); grants and steals reach their
// agent by LISTEN/NOTIFY. Each thread that opens a scope is one agent with
// two connections of its own:
// - its session: LISTEN, the agent's life lock (a session-level advisory
//   lock that PostgreSQL releases when the session ends, however it ends),
//   and the calls, unless the user gave a pool for them;
// - its watcher, which waits for the life lock of the next agent of the
//   scope (a ring), so that a death is seen at once and swept. Any role may
//   hold or queue for that lock, and so keep it after the session ended:
//   once a second a wait looks first whether the agent's backend is still
//   there (the pid, role and start its row recorded), which no role can
//   borrow, and still holds the lock (a pooler keeps the backend of a
//   client that died, but frees its locks).
// A lost session ends the agent: its requests reject with an AbortError and
// its next request joins as a new agent. A session is lost when the server
// ends it, or when a call or a keepalive gets no answer within `keepalive`
// (a network cut); the server, for its part, ends a session that has said
// nothing for that long (idle_session_timeout), which releases its locks.
//
// Its parts: the options and the connection target (options.js), the
// schema and its migrations (schema.js), the statements of its calls
// (statements.js), the session with its ordered line of calls (session.js),
// the ring watcher (watch.js), and a record of each request with the
// notifications that grant and rob them (requests.js).

const { schemaSQL } = require('./schema.js')
const { postgresTarget, readCommitted, loadPg } = require('./options.js')
const { statements } = require('./statements.js')
const { join, end } = require('./session.js')
const { Requests, closedError, lostError } = require('./requests.js')

// A backend (see ../manager-process.js) that is its own agent.
class PostgresBackend {
  closed = false
  deadlocks = undefined // its watch for deadlocks (../deadlock.js), once it has one
  // Each open is an agent of its own (index.js reads agent.closed).
  agent = this
  kind = 'postgres'
  target
  pg
  sql
  requests = new Requests(this)
  current = null
  connecting = null
  // Calls on their way: the session's socket keeps Node running while
  // there are any, or requests that wait.
  busy = 0

  constructor (target, pg) {
    this.target = target
    this.pg = pg
    this.sql = statements(target)
  }

  get scope () {
    return this.target.scope
  }

  // The current session's, which each session has anew.
  get clientId () {
    return this.current === null ? undefined : this.current.clientId
  }

  // A request's part of the interface is its record's (requests.js).
  request (name, how, request) {
    return this.requests.request(name, how, request)
  }

  release (request) {
    return this.requests.release(request)
  }

  abort (request) {
    this.requests.abort(request)
  }

  forget (request) {
    this.requests.forget(request)
  }

  async query () {
    const session = await this.session()
    const { rows } = await this.call(session, this.sql.snapshot, [this.target.scope])
    return snapshotOf(rows, entryOf)
  }

  // The snapshot with each entry's serial, parent, client process and time
  // (see ../manager-process.js), on the same session, after the calls
  // before it. The watch for deadlocks may ask after close(): that would
  // join anew.
  async details () {
    if (this.closed) throw closedError()
    const session = await this.session()
    const { rows } = await this.call(session, this.sql.details, [this.target.scope])
    return snapshotOf(rows, detailedEntryOf)
  }

  close () {
    this.closed = true
    this.requests.dropAll(closedError())
    const session = this.current
    this.current = null
    if (session !== null) return end(this, session, true)
    if (this.connecting !== null) return this.connecting.then(() => {}, () => {})
    return undefined
  }

  // The current session, joined as a new agent if there is none.
  session () {
    if (this.current !== null) return Promise.resolve(this.current)
    if (this.connecting === null) {
      this.connecting = join(this).then((session) => {
        this.connecting = null
        return session
      }, (error) => {
        this.connecting = null
        throw error
      })
    }
    return this.connecting
  }

  // A call of the agent: after its calls made before it, on the session or
  // through the user's pool.
  call (session, statement, values) {
    const result = session.calls.ask({ ...statement, values })
    this.busy++
    this.refresh()
    const done = () => {
      this.busy--
      this.refresh()
    }
    result.then(done, done)
    return result
  }

  // Keeps Node running while calls are on their way or requests wait, as
  // the native managers do, and no longer.
  refresh () {
    const session = this.current
    const stream = session !== null && session.client.connection && session.client.connection.stream
    if (!stream || typeof stream.ref !== 'function') return
    if (this.busy > 0 || this.requests.size > 0) stream.ref()
    else stream.unref()
  }

  // The session ended or the agent was ended: every request of it is lost.
  // A session that a pooler moved to another backend leaves: the pooler
  // keeps the first backend, and with it the agent's life lock, so no sweep
  // would end the agent.
  lose (session, cause, leave = false) {
    if (session.lost) return
    session.lost = true
    if (session !== this.current) return
    this.current = null
    this.requests.dropAll(lostError(cause))
    end(this, session, leave)
  }
}

// { held, pending } from the rows of snapshot() or details() (schema.sql),
// each entry made by entry(row).
function snapshotOf (rows, entry) {
  const held = []
  const pending = []
  for (const row of rows) {
    if (row.held) held.push(entry(row))
    else pending.push(entry(row))
  }
  return { held, pending }
}

function entryOf (row) {
  return { name: row.name.toString('utf16le'), mode: row.shared ? 'shared' : 'exclusive', clientId: row.client_id }
}

// A bigint column comes as a string; local ids are below 2^53.
function detailedEntryOf (row) {
  const entry = entryOf(row)
  entry.serial = Number(row.serial)
  entry.parent = Number(row.parent)
  entry.pid = row.client_pid
  entry.host = row.client_host
  entry.elapsed = row.elapsed
  return entry
}

// Opens this thread's agent of the scope in the database: resolves once it
// has joined, with the backend (see ../manager-process.js).
async function openPostgres (target) {
  if (target.pool !== null) await readCommitted(target.pool)
  const backend = new PostgresBackend(target, loadPg())
  await backend.session()
  return backend
}

module.exports = { postgresTarget, openPostgres, schemaSQL, snapshotOf, detailedEntryOf }
