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
const { domException, SafeBigInt, performanceNow } = require('../intrinsics.js')
const { SHARED, IF_AVAILABLE, STEAL, EV_GRANTED, EV_UNAVAILABLE, EV_STOLEN } = require('../events.js')
const { postgresTarget, quoteIdentifier, connection, configure, readCommitted, loadPg } = require('./options.js')
const { schemaSQL, ensureSchema } = require('./schema.js')
const { BACKEND_PID, statements } = require('./statements.js')

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
// A notification: 'r' (an agent joined), '<local id> g <token>' (a grant
// from the queue), '<local id> s' (a steal); local ids are below 2^53 and
// tokens below 2^63.
const NOTICE = /^(?:r|([1-9][0-9]{0,14}) (?:g ([1-9][0-9]{0,18})|s))$/
const TOKEN_MAX = SafeBigInt('9223372036854775807')

// PostgreSQL's SQLSTATEs that this file acts on.
const LOCK_NOT_AVAILABLE = '55P03' // a lock wait past lock_timeout
const PROTOCOL_VIOLATION = '08P01' // also PgBouncer's refusals
const AGENT_GONE = 'WLGON'

function ignore () {}

function closedError () {
  return domException('The lock manager was closed.', 'AbortError')
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

function lostError (cause) {
  const error = domException('The lock was lost: the session with PostgreSQL ended.', 'AbortError')
  if (cause !== undefined) Object.defineProperty(error, 'cause', { value: cause, configurable: true, writable: true })
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
  // This agent's requests that the database may still hold, by local id:
  // the number notifications name.
  requests = new Map()
  // The requests whose call is on its way, by local id: the session it was
  // made on, or null while it waits for one to join (then it is not sent).
  making = new Map()
  // The requests that the database queued (its answer said so) and has not
  // granted: a grant by notification is taken for these only.
  waiting = new Set()
  // Grants and steals notified before the request's answer was read (see
  // notice()), by local id: the grant's token, or that it was robbed.
  grantedEarly = new Map()
  stolenEarly = new Set()
  // The locks held in their name's row (granted at once on a free name),
  // by local id: the name's id, which their release gives.
  inRow = new Map()
  nextId = 1
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
    client.on('notification', (message) => this.notified(session, message))
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

  // A notification on the session's channel (see NOTICE). Only a role that
  // may read the agents table can learn the channel; and even so a payload
  // is acted on only if it is well-formed and expected: a grant only for a
  // request that the database queued, a steal only for a lock held or whose
  // grant is on its way. pg calls this from its parser, where a throw would
  // be uncaught: nothing here may throw.
  notified (session, { channel, payload }) {
    if (session !== this.current || channel !== session.channel || typeof payload !== 'string') return
    try {
      this.notice(session, payload)
    } catch (error) {
      this.lose(session, error)
    }
  }

  notice (session, payload) {
    const match = NOTICE.exec(payload)
    if (match === null) return
    const [, local, token] = match
    if (local === undefined) {
      session.notices++
      this.neighbourJoined(session)
      return
    }
    const id = Number(local)
    const request = this.requests.get(id)
    if (request === undefined) return
    if (token !== undefined) {
      if (SafeBigInt(token) > TOKEN_MAX) return
      // pg emits notifications before it resolves the query they came
      // with: the grant of a request whose answer is not read yet waits
      // for it, and counts only if the answer says queued.
      if (this.waiting.delete(id)) this.granted(request, token, true)
      else if (this.making.get(id) === session) this.grantedEarly.set(id, token)
    } else if (request.held) {
      this.forget(request)
      request.deliver(EV_STOLEN)
    } else if (this.making.get(id) === session) {
      // Granted (at once, or by a notification before the answer) and
      // robbed before the answer was read: the answer delivers both, the
      // grant first, as the spec orders them.
      this.stolenEarly.add(id)
    }
  }

  // A grant that the database made: the answer's token, or a notified one.
  granted (request, token, waited) {
    if (waited) request.queued()
    request.token = SafeBigInt(token)
    if (this.stolenEarly.delete(request.id)) {
      this.forget(request)
      request.deliver(EV_GRANTED | EV_STOLEN)
    } else {
      request.deliver(EV_GRANTED)
    }
  }

  request (name, how, request) {
    const id = this.nextId++
    request.id = id
    this.requests.set(id, request)
    this.refresh()
    const make = (session) => {
      if (this.requests.get(id) !== request) return // aborted or dropped meanwhile
      this.making.set(id, session)
      const values = [session.agent, id, this.target.scope, Buffer.from(name, 'utf16le'),
        (how & SHARED) !== 0, (how & IF_AVAILABLE) !== 0, (how & STEAL) !== 0, this.target.pool !== null, session.ceiling]
      this.call(session, this.sql.request, values).then(({ rows }) => {
        this.making.delete(id)
        // Its token if granted, '0' if queued, null if not available.
        const { token, in_row: inRow, ceiling } = rows[0]
        if (ceiling !== null) session.ceiling = ceiling
        if (this.requests.get(id) !== request) return
        const early = this.grantedEarly.get(id)
        this.grantedEarly.delete(id)
        if (token === null) {
          request.deliver(EV_UNAVAILABLE)
        } else if (token === '0') {
          if (early === undefined) this.waiting.add(id)
          else this.granted(request, early, true)
        } else {
          if (inRow !== null) this.inRow.set(id, inRow)
          this.granted(request, token, false)
        }
      }, (error) => {
        this.making.delete(id)
        this.failed(session, request, error)
      })
    }
    // With a session, at once; else once one has joined.
    if (this.current !== null) {
      make(this.current)
    } else {
      this.making.set(id, null)
      this.session().then(make, (error) => {
        if (this.requests.get(id) !== request) return
        this.forget(request)
        request.drop(error)
      })
    }
    // Whether it waits is known once its call is done (see queued()).
    return false
  }

  // A call for a request failed: if the session is gone, or the call's
  // outcome is not known, the session ends and every request goes; else
  // this one rejects with the error.
  failed (session, request, error) {
    // An unknown outcome: through a pool the session is still there, and
    // would keep a request that no one here waits for.
    if (!this.fromServer(error) || error.code === AGENT_GONE) {
      this.lose(session, error)
      return
    }
    if (this.requests.get(request.id) !== request) return
    this.forget(request)
    request.drop(error)
  }

  forget (request) {
    const id = request.id
    this.requests.delete(id)
    this.making.delete(id)
    this.waiting.delete(id)
    this.grantedEarly.delete(id)
    this.stolenEarly.delete(id)
    this.inRow.delete(id)
    this.refresh()
  }

  // Whether the lock was still held, or the error of a lost session: a
  // promise that never rejects. A release that fails in the database (the
  // statement cancelled, or timed out) would leave the lock held there by
  // a live agent: the session is ended instead, so that PostgreSQL frees
  // all its locks, which count as lost.
  release (request) {
    const inRow = this.inRow.get(request.id)
    this.forget(request)
    const session = this.current
    if (session === null) return Promise.resolve(lostError())
    const lost = (error) => {
      this.lose(session, error)
      return lostError(error)
    }
    if (inRow !== undefined) {
      return this.call(session, this.sql.releaseRow, [session.agent, request.id, inRow])
        .then(({ rows }) => rows.length === 1, lost)
    }
    return this.call(session, this.sql.release, [session.agent, request.id])
      .then(({ rows }) => rows[0].held === true, lost)
  }

  // Whether a call's error came from the server, which then rolled its
  // transaction back. Any other (a connection lost mid-call) leaves the
  // call's outcome unknown: it may have been made in the database or not.
  fromServer (error) {
    return error instanceof this.pg.DatabaseError
  }

  // The spec's abort steps run when the signal fires, before anything
  // requested after them: the abort call goes now, behind the request's own
  // call if it is on its way (the agent's calls reach the database in
  // order) and before any later call. A request whose call is not sent yet
  // (the session still joining) is never made. If it was granted meanwhile,
  // the grant arrives and the shim releases it (the spec's abort after a
  // grant).
  abort (request) {
    if (this.requests.get(request.id) !== request) return
    if (this.making.get(request.id) === null) this.forget(request)
    else this.abortQueued(request)
  }

  abortQueued (request) {
    const session = this.current
    if (session === null) return
    this.call(session, this.sql.abort, [session.agent, request.id]).then(({ rows }) => {
      if (rows[0].removed && this.requests.get(request.id) === request) this.forget(request)
    }, (error) => {
      // Refused by the server: still queued, and released once granted.
      // Else it may have left the queue, and nothing would end it here.
      if (!this.fromServer(error)) this.lose(session, error)
    })
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
    this.dropAll(closedError())
    const session = this.current
    this.current = null
    if (session !== null) return this.end(session, true)
    if (this.connecting !== null) return this.connecting.then(() => {}, () => {})
    return undefined
  }

  dropAll (error) {
    const dropped = [...this.requests.values()]
    this.requests.clear()
    this.making.clear()
    this.waiting.clear()
    this.grantedEarly.clear()
    this.stolenEarly.clear()
    this.inRow.clear()
    for (const request of dropped) request.drop(error)
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
    this.dropAll(lostError(cause))
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
