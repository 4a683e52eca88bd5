'use strict'

// The ring watcher of a PostgreSQL lock manager's session: a connection of
// its own that waits for the life lock of the next agent of the scope (a
// ring), so that a death is seen at once and swept (see manager.js).

const { connection, configure } = require('./options.js')
const { BACKEND_PID } = require('./statements.js')
const { lostError } = require('./requests.js')

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
const LOCK_NOT_AVAILABLE = '55P03' // a lock wait past lock_timeout

class Watch {
  backend
  session
  // The watcher's connection, while there is an agent to watch.
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

  constructor (backend, session) {
    this.backend = backend
    this.session = session
  }

  // Sees the death of the next agent of the ring, and sweeps it.
  async run () {
    const { backend, session } = this
    const { sql, target } = backend
    while (!session.lost) {
      try {
        const notices = this.notices
        const { rows } = await backend.call(session, sql.neighbour, [target.scope, session.agent])
        const next = rows[0].agent
        if (next === null) {
          // Alone: no watcher until there is someone to watch, unless an
          // agent joined since the lookup began.
          if (this.watcher !== null) this.watcher.end().catch(() => {})
          this.watcher = null
          if (this.notices === notices) await new Promise((resolve) => { this.wakeWatch = resolve })
          this.wakeWatch = null
          continue
        }
        if (this.watcher === null) this.watcher = await this.open()
        let ended
        let slices = 0
        do {
          if (session.lost) return
          ended = await this.waitFor(next, slices++ % BACKEND_LOOK_SLICES === 0)
        } while (ended === undefined)
        if (ended && !session.lost) await backend.call(session, sql.sweep, [target.scope, session.agent])
      } catch (error) {
        if (session.lost) return
        // The watcher's connection failed: open another on the next turn.
        if (this.watcher !== null) this.watcher.end().catch(() => {})
        this.watcher = null
        await new Promise((resolve) => setTimeout(resolve, 1000).unref())
      }
    }
  }

  async open () {
    const { target, pg } = this.backend
    const watcher = connection(target, pg.Client)
    watcher.on('error', () => {})
    await watcher.connect()
    const stream = watcher.connection && watcher.connection.stream
    if (stream && typeof stream.unref === 'function') stream.unref()
    await configure(watcher, target)
    await watcher.query(`SET lock_timeout = ${WATCH_SLICE_MS}`)
    const { rows } = await watcher.query(BACKEND_PID)
    if (this.session.lost) {
      watcher.end().catch(() => {})
      throw lostError()
    }
    this.watcherPid = rows[0].pid
    return watcher
  }

  // Waits one slice for the agent `next` to end (ended() in
  // schema.sql: its life lock free, or, if `look`, its backend
  // gone): true if it ended, false if the wait was cancelled or `next` is
  // not the neighbour any more (look again), undefined if the slice ran out
  // (wait again). An agent that joined meanwhile may have sent its 'r'
  // before the wait began, and the cancel it caused found no statement to
  // cancel: the statement's snapshot, taken when it starts, sees that join.
  async waitFor (next, look) {
    const { session } = this
    const { sql, target } = this.backend
    this.watching = true
    this.watched = this.watcher.query({ ...sql.wait, values: [next, target.scope, session.agent, look] })
    try {
      const { rows } = await this.watched
      return rows.length === 1
    } catch (error) {
      if (session.lost) throw error
      if (error.code === LOCK_NOT_AVAILABLE) return undefined
      // Cancelled (a new neighbour), maybe after it had the lock: hold none.
      await this.watcher.query('SELECT pg_catalog.pg_advisory_unlock_all()')
      return false
    } finally {
      this.watching = false
    }
  }

  // A new agent joined just after this one (its 'r'): watch it instead.
  joined () {
    this.notices++
    if (this.wakeWatch !== null) this.wakeWatch()
    else if (this.watching) this.backend.call(this.session, this.backend.sql.cancel, [this.watcherPid]).catch(() => {})
  }

  // Cancels the watcher's wait, again if the cancel came before the wait
  // reached the server.
  async stop () {
    const { backend, session } = this
    for (let i = 0; i < CANCEL_TRIES && this.watching; i++) {
      await backend.call(session, backend.sql.cancel, [this.watcherPid])
      await Promise.race([this.watched.then(() => {}, () => {}), new Promise((resolve) => setTimeout(resolve, CANCEL_WAIT_MS))])
    }
  }
}

module.exports = { Watch }
