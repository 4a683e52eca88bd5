'use strict'

// A session of a PostgreSQL lock manager's agent: its connection (LISTEN,
// the agent's life lock, and the calls, unless the user gave a pool for
// them), and the ordered line of its calls.

const { randomBytes, randomUUID } = require('crypto')
const { hostname } = require('os')
const { performanceNow } = require('../intrinsics.js')
const { quoteIdentifier, connection, configure } = require('./options.js')
const { ensureSchema } = require('./schema.js')
const { BACKEND_PID } = require('./statements.js')
const { closedError, lostError } = require('./requests.js')
const { Watch } = require('./watch.js')

const PROTOCOL_VIOLATION = '08P01' // also PgBouncer's refusals

// Queries sent one at a time, in the order they were given, a list from
// first to last: pg runs one query at a time per client, and a query given
// to it while another runs draws a DeprecationWarning in recent pg 8
// releases (pg 9 refuses it). And an agent's calls so reach the database in
// the order it made them, through a pool too (whose connections would run
// them side by side): an abort before a later request of the same name.
class Line {
  send
  first = null
  last = null
  // Whether a query is on its way, and since when (or when the last
  // answer came), on a monotonic clock: the keepalive's, which a step of
  // the wall clock must not stop or set off.
  asking = false
  since = performanceNow()

  constructor (send) {
    this.send = send
  }

  // A query, after those before it, timed.
  ask (query) {
    return new Promise((resolve, reject) => {
      const entry = { query, resolve, reject, next: null }
      if (this.last === null) this.first = entry
      else this.last.next = entry
      this.last = entry
      if (!this.asking) this.askNext()
    })
  }

  askNext () {
    const entry = this.first
    this.since = performanceNow()
    if (entry === null) {
      this.asking = false
      return
    }
    this.first = entry.next
    if (this.first === null) this.last = null
    this.asking = true
    this.send(entry.query).then((result) => {
      entry.resolve(result)
      this.askNext()
    }, (error) => {
      entry.reject(error)
      this.askNext()
    })
  }
}

// One session with PostgreSQL: an agent of the scope while it lasts.
class Session {
  client
  // The queries on the session's own connection (its keepalive's), and the
  // agent's calls: the same line, or one through the user's pool.
  own
  calls
  // The channel it listens on, a name drawn at random: only roles that may
  // read the agents table can learn it, and notify it.
  channel = `web_locks_${randomBytes(16).toString('hex')}`
  keepalive = null
  agent = 0
  clientId = randomUUID()
  // The backend the agent joined on: its life lock's holder.
  pid = 0
  // The ceiling of the tokens as the session last saw it (see statements.js).
  ceiling = '0'
  // Its ring watcher (watch.js).
  watch
  lost = false

  constructor (backend, client) {
    const { pool } = backend.target
    this.client = client
    this.own = new Line((query) => client.query(query))
    this.calls = pool === null ? this.own : new Line((query) => pool.query(query))
    this.watch = new Watch(backend, this)
  }
}

// Joins the scope as a new agent of the backend, on a session of its own.
async function join (backend) {
  const { target, sql } = backend
  const client = connection(target, backend.pg.Client)
  const session = new Session(backend, client)
  client.on('error', (error) => backend.lose(session, error))
  client.on('end', () => backend.lose(session, undefined))
  client.on('notification', (message) => backend.requests.notified(session, message))
  try {
    await client.connect()
    await checkOwnSession(client, target, backend.pg.Client)
    await configure(client, target)
    await ensureSchema(client, target)
    // Each agent is a client of its own: a new clientId for each session.
    // Its process and host are for a look inside the scope (details()).
    const { rows } = await client.query(sql.join, [target.scope, session.clientId, session.channel, process.pid, hostname()])
    session.agent = rows[0].agent
    session.pid = rows[0].pid
    session.ceiling = rows[0].ceiling
    await client.query(`LISTEN ${quoteIdentifier(session.channel)}`)
    await backend.call(session, sql.sweep, [target.scope, session.agent])
  } catch (error) {
    session.lost = true
    client.end().catch(() => {})
    throw error
  }
  if (backend.closed) {
    end(backend, session, true)
    throw closedError()
  }
  // Lost while it joined (its connection ended during a call through the
  // user's pool): lose() did not end it, as it was not current yet.
  if (session.lost) {
    end(backend, session, false)
    throw lostError()
  }
  keepAlive(backend, session)
  session.watch.run()
  // In the same turn as the look at closed: a close() from now on finds the
  // session and ends it, one before it was seen above.
  backend.current = session
  backend.refresh()
  return session
}

// Throws EPOOLED if the client shares its server connection with other
// clients, as behind a pooler in transaction or statement mode. A probe,
// a second client, holds a server connection (BEGIN) while the client asks
// again for its own: two clients on one backend (the probe takes the
// client's, the one a pooler used last), or a client that moved to
// another, can only be a pooler. It runs before anything that a pooler's
// server connection would keep for the next client (settings, prepared
// statements, the life lock), and the probe ends before the watcher is.
async function checkOwnSession (client, target, Client) {
  const pid = async (c) => (await c.query(BACKEND_PID)).rows[0].pid
  const own = await pid(client)
  const probe = connection(target, Client)
  probe.on('error', () => {})
  try {
    await probe.connect()
    let probed
    try {
      await probe.query('BEGIN')
      probed = await pid(probe)
    } catch (error) {
      // PgBouncer in statement mode refuses a transaction, and ends the probe.
      if (error.code === PROTOCOL_VIOLATION) throw pooledError(error)
      throw error
    }
    if (probed === own || await pid(client) !== own) throw pooledError()
  } finally {
    // Ended in its transaction, the probe would take its server
    // connection down with it behind PgBouncer.
    await probe.query('ROLLBACK').catch(() => {})
    await probe.end().catch(() => {})
  }
}

// Every third of `keepalive`: a session whose query has had no answer for
// that long is lost (the network is cut), and one that has said nothing
// for a third of it says something, so that the server keeps it: its
// backend's pid, which tells a session that a pooler moved to another
// backend (past checkOwnSession()).
function keepAlive (backend, session) {
  const limit = backend.target.keepalive
  const line = session.own
  const timer = setInterval(() => {
    const quiet = performanceNow() - line.since
    if (line.asking && quiet > limit) {
      backend.lose(session, new Error(`web-locks: PostgreSQL did not answer for ${limit} ms`))
      const stream = session.client.connection && session.client.connection.stream
      if (stream) stream.destroy()
    } else if (!line.asking && quiet >= limit / 3) {
      line.ask(BACKEND_PID).then(({ rows }) => {
        if (rows[0].pid !== session.pid) backend.lose(session, pooledError(), true)
      }, () => {})
    }
  }, Math.ceil(limit / 3))
  timer.unref()
  session.keepalive = timer
}

// Ends a session: leaves the scope first if it can (a clean close).
async function end (backend, session, leave) {
  const { watch } = session
  session.lost = true
  clearInterval(session.keepalive)
  // A close() that is the last thing a script does still leaves.
  const stream = session.client.connection && session.client.connection.stream
  if (leave && stream && typeof stream.ref === 'function') stream.ref()
  if (watch.wakeWatch !== null) watch.wakeWatch()
  try {
    if (leave) {
      await watch.stop()
      await backend.call(session, backend.sql.leave, [session.agent])
    }
  } catch {
    // The session is gone: the ring's sweep ends the agent.
  }
  // A lost session's watcher may wait for its lock until lock_timeout: it
  // is not waited for.
  const watcher = watch.watcher === null ? undefined : watch.watcher.end().catch(() => {})
  await session.client.end().catch(() => {})
  if (leave) await watcher
}

function pooledError (cause) {
  const error = new Error('web-locks: the connection reaches PostgreSQL through a pooler in transaction or statement mode ' +
    '(PgBouncer?), which gives its server connection to other clients between statements. The lock manager\'s session ' +
    'needs a session of its own (its notifications, and its advisory lock: the proof of its agent\'s life): connect it ' +
    'directly or through session-mode pooling (PgBouncer: pool_mode = session).')
  error.code = 'EPOOLED'
  if (cause !== undefined) error.cause = cause
  return error
}

module.exports = { join, end }
