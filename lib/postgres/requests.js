'use strict'

// The requests of a PostgreSQL lock manager's agent: a record of each, from
// request() until the database holds it no more, and the notifications that
// grant and rob them.

const { domException, SafeBigInt } = require('../intrinsics.js')
const { SHARED, IF_AVAILABLE, STEAL, EV_GRANTED, EV_UNAVAILABLE, EV_STOLEN } = require('../events.js')

// A notification: 'r' (an agent joined), '<local id> g <token>' (a grant
// from the queue), '<local id> s' (a steal); local ids are below 2^53 and
// tokens below 2^63.
const NOTICE = /^(?:r|([1-9][0-9]{0,14}) (?:g ([1-9][0-9]{0,18})|s))$/
const TOKEN_MAX = SafeBigInt('9223372036854775807')
const AGENT_GONE = 'WLGON'

// One request of the agent that the database may still hold.
class Record {
  // The shim's request (index.js): its promise, and where its grant, miss
  // or steal is delivered.
  request
  name
  // Its mode and flags (events.js).
  how
  // Where it is: 'joining' (it waits for a session to join: its call is
  // not sent), 'asking' (its call is on its way on `session`), 'queued'
  // (the database queued it, as its answer said, and has not granted it: a
  // grant by notification is taken for these only) or 'held'.
  state = 'joining'
  session = null
  // A grant and a steal notified before its answer was read (see notice()):
  // the grant's token, and whether it was robbed.
  grantedEarly = null
  stolenEarly = false
  // For a lock held in its name's row (granted at once on a free name): the
  // name's id, which its release gives.
  inRow = null

  constructor (request, name, how) {
    this.request = request
    this.name = name
    this.how = how
  }
}

// The agent's records, by local id: the number notifications name. A
// record is made by request() and removed by forget(), and nowhere else.
class Requests {
  backend
  records = new Map()
  nextId = 1

  constructor (backend) {
    this.backend = backend
  }

  get size () {
    return this.records.size
  }

  // Whether the record is still the agent's: not aborted, dropped or done.
  has (record) {
    return this.records.get(record.request.id) === record
  }

  request (name, how, request) {
    const { backend } = this
    const record = new Record(request, name, how)
    request.id = this.nextId++
    if (request.deadlock !== undefined) request.deadlock.serial = request.id
    this.records.set(request.id, record)
    backend.refresh()
    // With a session, at once; else once one has joined.
    if (backend.current !== null) {
      this.make(record, backend.current)
    } else {
      backend.session().then((session) => this.make(record, session), (error) => {
        if (!this.has(record)) return
        this.forget(request)
        request.drop(error)
      })
    }
    // Whether it waits is known once its call is done (see queued()).
    return false
  }

  make (record, session) {
    if (!this.has(record)) return // aborted or dropped meanwhile
    const { backend } = this
    const { request, how } = record
    record.state = 'asking'
    record.session = session
    const values = [session.agent, request.id, backend.target.scope, Buffer.from(record.name, 'utf16le'),
      (how & SHARED) !== 0, (how & IF_AVAILABLE) !== 0, (how & STEAL) !== 0, backend.target.pool !== null, session.ceiling,
      request.deadlock === undefined ? 0 : request.deadlock.parent]
    backend.call(session, backend.sql.request, values).then(({ rows }) => {
      // Its token if granted, '0' if queued, null if not available.
      const { token, in_row: inRow, ceiling } = rows[0]
      if (ceiling !== null) session.ceiling = ceiling
      if (!this.has(record)) return
      if (token === null) {
        request.deliver(EV_UNAVAILABLE)
      } else if (token === '0') {
        if (record.grantedEarly === null) {
          record.state = 'queued'
          request.waits()
        } else {
          this.granted(record, record.grantedEarly, true)
        }
      } else {
        record.inRow = inRow
        this.granted(record, token, false)
      }
    }, (error) => this.failed(session, record, error))
  }

  // A call for a request failed: if the session is gone, or the call's
  // outcome is not known, the session ends and every request goes; else
  // this one rejects with the error.
  failed (session, record, error) {
    // An unknown outcome: through a pool the session is still there, and
    // would keep a request that no one here waits for.
    if (!this.fromServer(error) || error.code === AGENT_GONE) {
      this.backend.lose(session, error)
      return
    }
    if (!this.has(record)) return
    this.forget(record.request)
    record.request.drop(error)
  }

  // The one place where a record is removed.
  forget (request) {
    this.records.delete(request.id)
    this.backend.refresh()
  }

  // Whether the lock was still held, or the error of a lost session: a
  // promise that never rejects. A release that fails in the database (the
  // statement cancelled, or timed out) would leave the lock held there by
  // a live agent: the session is ended instead, so that PostgreSQL frees
  // all its locks, which count as lost.
  release (request) {
    const { backend } = this
    const record = this.records.get(request.id)
    const inRow = record === undefined ? null : record.inRow
    this.forget(request)
    const session = backend.current
    if (session === null) return Promise.resolve(lostError())
    const lost = (error) => {
      backend.lose(session, error)
      return lostError(error)
    }
    if (inRow !== null) {
      return backend.call(session, backend.sql.releaseRow, [session.agent, request.id, inRow])
        .then(({ rows }) => rows.length === 1, lost)
    }
    return backend.call(session, backend.sql.release, [session.agent, request.id])
      .then(({ rows }) => rows[0].held === true, lost)
  }

  // Whether a call's error came from the server, which then rolled its
  // transaction back. Any other (a connection lost mid-call) leaves the
  // call's outcome unknown: it may have been made in the database or not.
  fromServer (error) {
    return error instanceof this.backend.pg.DatabaseError
  }

  // The spec's abort steps run when the signal fires, before anything
  // requested after them: the abort call goes now, behind the request's own
  // call if it is on its way (the agent's calls reach the database in
  // order) and before any later call. A request whose call is not sent yet
  // (the session still joining) is never made. If it was granted meanwhile,
  // the grant arrives and the shim releases it (the spec's abort after a
  // grant).
  abort (request) {
    const record = this.records.get(request.id)
    if (record === undefined) return
    if (record.state === 'joining') this.forget(request)
    else this.abortQueued(record)
  }

  abortQueued (record) {
    const { backend } = this
    const session = backend.current
    if (session === null) return
    backend.call(session, backend.sql.abort, [session.agent, record.request.id]).then(({ rows }) => {
      if (rows[0].removed && this.has(record)) this.forget(record.request)
    }, (error) => {
      // Refused by the server: still queued, and released once granted.
      // Else it may have left the queue, and nothing would end it here.
      if (!this.fromServer(error)) backend.lose(session, error)
    })
  }

  // Every request goes, rejected with the error.
  dropAll (error) {
    const dropped = [...this.records.values()]
    for (const { request } of dropped) this.forget(request)
    for (const { request } of dropped) request.drop(error)
  }

  // A notification on the session's channel (see NOTICE). Only a role that
  // may read the agents table can learn the channel; and even so a payload
  // is acted on only if it is well-formed and expected: a grant only for a
  // request that the database queued, a steal only for a lock held or whose
  // grant is on its way. pg calls this from its parser, where a throw would
  // be uncaught: nothing here may throw.
  notified (session, { channel, payload }) {
    if (session !== this.backend.current || channel !== session.channel || typeof payload !== 'string') return
    try {
      this.notice(session, payload)
    } catch (error) {
      this.backend.lose(session, error)
    }
  }

  notice (session, payload) {
    const match = NOTICE.exec(payload)
    if (match === null) return
    const [, local, token] = match
    if (local === undefined) {
      session.watch.joined()
      return
    }
    const record = this.records.get(Number(local))
    if (record === undefined) return
    const asking = record.state === 'asking' && record.session === session
    if (token !== undefined) {
      if (SafeBigInt(token) > TOKEN_MAX) return
      // pg emits notifications before it resolves the query they came
      // with: the grant of a request whose answer is not read yet waits
      // for it, and counts only if the answer says queued.
      if (record.state === 'queued') this.granted(record, token, true)
      else if (asking) record.grantedEarly = token
    } else if (record.state === 'held') {
      this.forget(record.request)
      record.request.deliver(EV_STOLEN)
    } else if (asking) {
      // Granted (at once, or by a notification before the answer) and
      // robbed before the answer was read: the answer delivers both, the
      // grant first, as the spec orders them.
      record.stolenEarly = true
    }
  }

  // A grant that the database made: the answer's token, or a notified one.
  granted (record, token, waited) {
    const { request } = record
    if (waited) request.queued()
    request.token = SafeBigInt(token)
    if (record.stolenEarly) {
      this.forget(request)
      request.deliver(EV_GRANTED | EV_STOLEN)
    } else {
      record.state = 'held'
      request.deliver(EV_GRANTED)
    }
  }
}

function closedError () {
  return domException('The lock manager was closed.', 'AbortError')
}

function lostError (cause) {
  const error = domException('The lock was lost: the session with PostgreSQL ended.', 'AbortError')
  if (cause !== undefined) Object.defineProperty(error, 'cause', { value: cause, configurable: true, writable: true })
  return error
}

module.exports = { Requests, closedError, lostError }
