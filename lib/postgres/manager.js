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

const { randomBytes, randomUUID } = require('crypto')
const { performanceNow } = require('../intrinsics.js')
const { postgresTarget, quoteIdentifier, connection, configure, readCommitted, loadPg } = require('./options.js')
const { schemaSQL, ensureSchema } = require('./schema.js')
const { BACKEND_PID, statements } = require('./statements.js')
const { Requests, closedError, lostError } = require('./requests.js')

// The watcher waits in slices of this long: its statement holds a snapshot
// while it waits, which holds back vacuum's horizon in the database: the
// row versions that grants and releases leave behind cannot be cleaned
// meanwhile, and a lookup may step over those of its name. Each slice also
// checks again who the neighbour is: the safety net for a missed 'r'
// notification.
const WATCH_SLICE_MS = 250
// Every how many slices the watcher also looks at the backend of the agent
// it watches (the first slice of each neighbour's too): once a second. That
// look reads pg_stat_activity, the state of every backend of the server
// (some hundred µs of the server's time with hundreds of connections), and
// pg_locks, and only matters where another role took the agent's life lock.
const BACKEND_LOOK_SLICES = 4
// How often, and how long apart, close() cancels the watcher's wait.
const CANCEL_TRIES = 20
const CANCEL_WAIT_MS = 50
// PostgreSQL's SQLSTATEs that this file acts on.
const LOCK_NOT_AVAILABLE = '55P03' // a lock wait past lock_timeout
const PROTOCOL_VIOLATION = '08P01' // also PgBouncer's refusals

function ignore () {}

function pooledError (cause) {
  const error = new Error('web-locks: the connection reaches PostgreSQL through a pooler in transaction or statement mode ' +
    '(PgBouncer?), which gives its server connection to other clients between statements. The lock manager\'s session ' +
    'needs a session of its own (its notifications, and its advisory lock: the proof of its agent\'s life): connect it ' +
    'directly or through session-mode pooling (PgBouncer: pool_mode = session).')
  error.code = 'EPOOLED'
  if (cause !== undefined) error.cause = cause
  return error
}

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
  // The backend the agent joined on: its life lock's holder.
  pid = 0
  // The ceiling of the tokens as the session last saw it (see statements.js).
  ceiling = '0'
  watcher = null
  // The watcher's backend, which its wait is cancelled by: behind a pooler
  // (PgBouncer, even in session mode) a client's processID is the pooler's.
  watcherPid = 0
  watching = false
  watched = null
  // Wakes the watch loop of an agent alone, when another joins.
  wakeWatch = null
  // How many 'r' notifications it has had: one that comes while the watch
  // loop is not waiting must not be lost.
  notices = 0
  lost = false

  constructor (client, pool) {
    this.client = client
    this.own = new Line((query) => client.query(query))
    this.calls = pool === null ? this.own : new Line((query) => pool.query(query))
  }
}

class PostgresBackend {
  closed = false
  // Each open is an agent of its own (index.js reads agent.closed).
  agent = this
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

  // The current session, joined as a new agent if there is none.
  session () {
    if (this.current !== null) return Promise.resolve(this.current)
    if (this.connecting === null) {
      this.connecting = this.join().then((session) => {
        this.connecting = null
        this.current = session
        this.refresh()
        return session
      }, (error) => {
        this.connecting = null
        throw error
      })
    }
    return this.connecting
  }

  async join () {
    const client = connection(this.target, this.pg.Client)
    const session = new Session(client, this.target.pool)
    client.on('error', (error) => this.lose(session, error))
    client.on('end', () => this.lose(session, undefined))
    client.on('notification', (message) => this.requests.notified(session, message))
    try {
      await client.connect()
      await this.checkOwnSession(client)
      await configure(client, this.target)
      await ensureSchema(client, this.target)
      // Each agent is a client of its own: a new clientId for each session.
      const { rows } = await client.query(this.sql.join, [this.target.scope, randomUUID(), session.channel])
      session.agent = rows[0].agent
      session.pid = rows[0].pid
      session.ceiling = rows[0].ceiling
      await client.query(`LISTEN ${quoteIdentifier(session.channel)}`)
      await this.call(session, this.sql.sweep, [this.target.scope, session.agent])
    } catch (error) {
      session.lost = true
      client.end().catch(() => {})
      throw error
    }
    if (this.closed) {
      this.end(session, true)
      throw closedError()
    }
    this.keepAlive(session)
    this.watch(session)
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
  async checkOwnSession (client) {
    const pid = async (c) => (await c.query(BACKEND_PID)).rows[0].pid
    const own = await pid(client)
    const probe = connection(this.target, this.pg.Client)
    probe.on('error', ignore)
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
      await probe.query('ROLLBACK').catch(ignore)
      await probe.end().catch(ignore)
    }
  }

  // A call of the agent: after its calls made before it, on the session or
  // through the user's pool.
  call (session, statement, values) {
    const result = this.ask(session.calls, { ...statement, values })
    this.busy++
    this.refresh()
    const done = () => {
      this.busy--
      this.refresh()
    }
    result.then(done, done)
    return result
  }

  // A query on a line, after those before it, timed.
  ask (line, query) {
    return new Promise((resolve, reject) => {
      const entry = { query, resolve, reject, next: null }
      if (line.last === null) line.first = entry
      else line.last.next = entry
      line.last = entry
      if (!line.asking) this.askNext(line)
    })
  }

  askNext (line) {
    const entry = line.first
    line.since = performanceNow()
    if (entry === null) {
      line.asking = false
      return
    }
    line.first = entry.next
    if (line.first === null) line.last = null
    line.asking = true
    line.send(entry.query).then((result) => {
      entry.resolve(result)
      this.askNext(line)
    }, (error) => {
      entry.reject(error)
      this.askNext(line)
    })
  }

  // Every third of `keepalive`: a session whose query has had no answer for
  // that long is lost (the network is cut), and one that has said nothing
  // for a third of it says something, so that the server keeps it: its
  // backend's pid, which tells a session that a pooler moved to another
  // backend (past checkOwnSession()).
  keepAlive (session) {
    const limit = this.target.keepalive
    const line = session.own
    const timer = setInterval(() => {
      const quiet = performanceNow() - line.since
      if (line.asking && quiet > limit) {
        this.lose(session, new Error(`web-locks: PostgreSQL did not answer for ${limit} ms`))
        session.client.connection.stream.destroy()
      } else if (!line.asking && quiet >= limit / 3) {
        this.ask(line, BACKEND_PID).then(({ rows }) => {
          if (rows[0].pid !== session.pid) this.lose(session, pooledError(), true)
        }, ignore)
      }
    }, Math.ceil(limit / 3))
    timer.unref()
    session.keepalive = timer
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
    const held = []
    const pending = []
    for (const row of rows) {
      const info = { name: row.name.toString('utf16le'), mode: row.shared ? 'shared' : 'exclusive', clientId: row.client_id }
      if (row.held) held.push(info)
      else pending.push(info)
    }
    return { held, pending }
  }

  close () {
    this.closed = true
    this.requests.dropAll(closedError())
    const session = this.current
    this.current = null
    if (session !== null) return this.end(session, true)
    if (this.connecting !== null) return this.connecting.then(() => {}, () => {})
    return undefined
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
    this.end(session, leave)
  }

  // Ends a session: leaves the scope first if it can (a clean close).
  async end (session, leave) {
    session.lost = true
    clearInterval(session.keepalive)
    // A close() that is the last thing a script does still leaves.
    const stream = session.client.connection && session.client.connection.stream
    if (leave && stream && typeof stream.ref === 'function') stream.ref()
    if (session.wakeWatch !== null) session.wakeWatch()
    try {
      if (leave) {
        await this.stopWatching(session)
        await this.call(session, this.sql.leave, [session.agent])
      }
    } catch {
      // The session is gone: the ring's sweep ends the agent.
    }
    // A lost session's watcher may wait for its lock until lock_timeout: it
    // is not waited for.
    const watcher = session.watcher === null ? undefined : session.watcher.end().catch(ignore)
    await session.client.end().catch(ignore)
    if (leave) await watcher
  }

  // Cancels the watcher's wait, again if the cancel came before the wait
  // reached the server.
  async stopWatching (session) {
    for (let i = 0; i < CANCEL_TRIES && session.watching; i++) {
      await this.call(session, this.sql.cancel, [session.watcherPid])
      await Promise.race([session.watched.then(ignore, ignore), new Promise((resolve) => setTimeout(resolve, CANCEL_WAIT_MS))])
    }
  }

  // Sees the death of the next agent of the ring, and sweeps it.
  async watch (session) {
    while (!session.lost) {
      try {
        const notices = session.notices
        const { rows } = await this.call(session, this.sql.neighbour, [this.target.scope, session.agent])
        const next = rows[0].agent
        if (next === null) {
          // Alone: no watcher until there is someone to watch, unless an
          // agent joined since the lookup began.
          if (session.watcher !== null) session.watcher.end().catch(ignore)
          session.watcher = null
          if (session.notices === notices) await new Promise((resolve) => { session.wakeWatch = resolve })
          session.wakeWatch = null
          continue
        }
        if (session.watcher === null) session.watcher = await this.watcherFor(session)
        let ended
        let slices = 0
        do {
          if (session.lost) return
          ended = await this.waitFor(session, next, slices++ % BACKEND_LOOK_SLICES === 0)
        } while (ended === undefined)
        if (ended && !session.lost) await this.call(session, this.sql.sweep, [this.target.scope, session.agent])
      } catch (error) {
        if (session.lost) return
        // The watcher's connection failed: open another on the next turn.
        if (session.watcher !== null) session.watcher.end().catch(() => {})
        session.watcher = null
        await new Promise((resolve) => setTimeout(resolve, 1000).unref())
      }
    }
  }

  async watcherFor (session) {
    const watcher = connection(this.target, this.pg.Client)
    watcher.on('error', () => {})
    await watcher.connect()
    const stream = watcher.connection && watcher.connection.stream
    if (stream && typeof stream.unref === 'function') stream.unref()
    await configure(watcher, this.target)
    await watcher.query(`SET lock_timeout = ${WATCH_SLICE_MS}`)
    const { rows } = await watcher.query(BACKEND_PID)
    if (session.lost) {
      watcher.end().catch(() => {})
      throw lostError()
    }
    session.watcherPid = rows[0].pid
    return watcher
  }

  // Waits one slice for the agent `next` to end (ended() in
  // schema.sql: its life lock free, or, if `backend`, its backend
  // gone): true if it ended, false if the wait was cancelled or `next` is
  // not the neighbour any more (look again), undefined if the slice ran out
  // (wait again). An agent that joined meanwhile may have sent its 'r'
  // before the wait began, and the cancel it caused found no statement to
  // cancel: the statement's snapshot, taken when it starts, sees that join.
  async waitFor (session, next, backend) {
    session.watching = true
    session.watched = session.watcher.query({ ...this.sql.wait, values: [next, this.target.scope, session.agent, backend] })
    try {
      const { rows } = await session.watched
      return rows.length === 1
    } catch (error) {
      if (session.lost) throw error
      if (error.code === LOCK_NOT_AVAILABLE) return undefined
      // Cancelled (a new neighbour), maybe after it had the lock: hold none.
      await session.watcher.query('SELECT pg_catalog.pg_advisory_unlock_all()')
      return false
    } finally {
      session.watching = false
    }
  }

  // A new agent joined just after this one: watch it instead.
  neighbourJoined (session) {
    if (session.wakeWatch !== null) session.wakeWatch()
    else if (session.watching) this.call(session, this.sql.cancel, [session.watcherPid]).catch(() => {})
  }
}

// Opens this thread's agent of the scope in the database: resolves once it
// has joined, with the backend (see ../manager-process.js).
async function openPostgres (target) {
  if (target.pool !== null) await readCommitted(target.pool)
  const backend = new PostgresBackend(target, loadPg())
  await backend.session()
  return backend
}

module.exports = { postgresTarget, openPostgres, schemaSQL }
