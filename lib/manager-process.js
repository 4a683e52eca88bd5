'use strict'

// The process-wide lock manager behind `locks`: the core's state in the
// process's own memory, shared by every thread.
//
// A backend is what the shim (index.js) needs of a manager:
// - request(name, how, request): makes the request (how: the mode in bit 0,
//   the flags above it, events.js), gives request.id a number and, if the
//   request is tracked for deadlocks (request.deadlock, a tie: deadlock.js),
//   makes it with the tie's parent (the serial of the agent's lock inside
//   whose callback it was made, or 0) and sets the tie's serial (a number
//   that no other request of the agent has, below 2^53); and returns
//   whether the request is known to wait. It calls request.deliver(events)
//   later for a grant (request.token set first), a miss or a steal, or a
//   failure of the manager (then backend.failure() is the error). A
//   native backend files the request in the thread's table
//   (binding.requests) under its slot's id, for the deliveries the binding
//   dispatches.
// - release(request): whether the lock was still held (false: stolen), or a
//   promise that never rejects, of that or of the error to reject the
//   request with (its agent was lost).
// - abort(request): takes the request out of its queue if it is still
//   there; if it was granted meanwhile, the grant still comes (the shim
//   then releases it). It never throws: it runs in an abort listener.
// - forget(request): the request is done with (a miss, or dropped).
// - details(): the same as query() (or a promise of it), each entry with
//   its request's serial and parent, its process's pid, and for how long
//   (ms) it has been held or pending (null where the manager keeps no
//   times): for the watch for deadlocks and a look inside a scope.
// - query(): { held, pending }, or a promise of it. A native backend's
//   (native: true) is the addon's own objects, which the shim copies into
//   its realm (snapshotInThisRealm): a scope's agent is shared by every
//   copy of lib/ on the thread, in whichever realm each was loaded.
// - close(), if present: this thread leaves the manager; every request of
//   it that is not done gets request.drop(). May return a promise.
// - agent: the agent it is of, whose closed says whether it has left, and
//   for the tracing channel (tracing.js), the agent's clientId (undefined
//   while a PostgreSQL agent joins) and the scope (undefined for `locks`).
// - kind: 'process', 'machine' or 'postgres'.

const { TRACKED, IO_RESULT, IO_SERIAL_LO, IO_SERIAL_HI, IO_PARENT_LO, IO_PARENT_HI } = require('./events.js')
const { PromiseResolve, ObjectDefineProperty, realmError } = require('./intrinsics.js')

// The addon makes its objects in the realm that first loaded it (its
// exports are one per thread); a snapshot is copied into the realm of the
// copy of lib/ whose query() asked (a test file's, under jest), as its
// promises and errors are: a snapshot of this realm is kept as it is (the
// addon defines its entries too). Entries
// are defined, not assigned, so that no index setter of Array.prototype
// sees them; names stay the addon's strings (one per name).
const ArrayPrototype = Array.prototype
const { getPrototypeOf } = Reflect

function infosInThisRealm (infos) {
  const copy = []
  for (let i = 0; i < infos.length; i++) {
    const { name, mode, clientId } = infos[i]
    ObjectDefineProperty(copy, i, { __proto__: null, value: { name, mode, clientId }, writable: true, enumerable: true, configurable: true })
  }
  return copy
}

function snapshotInThisRealm (snapshot) {
  const { held, pending } = snapshot
  if (getPrototypeOf(held) === ArrayPrototype) return snapshot
  return { held: infosInThisRealm(held), pending: infosInThisRealm(pending) }
}

// A backend on the core: the native calls `ops` ({ request(name, how),
// release(id), abort(id), query(), details(), close() if the agent can leave, and
// translate(error), which makes what the addon throws an error of this
// copy's realm }) of the binding whose table and io the requests go
// through, for `agent` (an agent of the thread: { closed, clientId }, and
// a scope's name, handle and file) of a manager of kind `kind`: a
// machine-wide scope's is shared by every copy of lib/ on the thread that
// opened it, each with a backend of its own, which makes its errors in its
// own realm. The agent holds nothing of any copy
// (anything made in a realm keeps that realm alive): whether it has left
// is its own plain property, which every request reads (index.js), so
// that leaving through one copy closes it for all.
function agentOf (clientId, scope, handle, file) {
  return { closed: false, clientId, scope, handle, file }
}

function nativeBackend ({ requests, io }, ops, agent, kind) {
  const backend = {
    agent,
    kind,
    native: true,
    deadlocks: undefined, // its watch for deadlocks (deadlock.js), once it has one
    request (name, how, request) {
      // Only a tracked request passes a parent and gets a serial: one made
      // while no one watches costs the binding nothing more.
      const tie = request.deadlock
      if (tie !== undefined) {
        io[IO_PARENT_LO] = tie.parent % 0x100000000
        io[IO_PARENT_HI] = tie.parent / 0x100000000
        how |= TRACKED
      }
      try {
        ops.request(name, how)
      } catch (error) {
        throw ops.translate(error)
      }
      // The slot's id * 2, + 1 if the lock was free.
      const result = io[IO_RESULT]
      const id = result >>> 1
      request.id = id
      if (tie !== undefined) tie.serial = io[IO_SERIAL_HI] * 0x100000000 + io[IO_SERIAL_LO]
      requests[id] = request
      return (result & 1) === 0
    },
    // A manager found corrupt fails every call: a release's error is the
    // request's rejection, and an abort's is left to the failure that
    // every request of the manager is then delivered.
    release (request) {
      requests[request.id] = undefined
      if (agent.closed) return false
      try {
        return ops.release(request.id)
      } catch (error) {
        return PromiseResolve(ops.translate(error))
      }
    },
    abort (request) {
      if (agent.closed) return
      try {
        if (ops.abort(request.id)) requests[request.id] = undefined
      } catch {}
    },
    forget (request) {
      requests[request.id] = undefined
    },
    query () {
      try {
        return ops.query()
      } catch (error) {
        throw ops.translate(error)
      }
    },
    details () {
      try {
        return ops.details()
      } catch (error) {
        throw ops.translate(error)
      }
    },
    close: undefined
  }
  if (ops.close !== undefined) {
    // close() frees the slots of this agent's requests, made through any
    // copy of lib/: their ids, and so the table's entries, go (the same ids
    // may be reused by other managers' requests at once).
    backend.close = () => {
      if (agent.closed) return
      agent.closed = true
      ops.close()
      for (let id = 0; id < requests.length; id++) {
        const request = requests[id]
        if (request !== undefined && request.backend.agent === agent) request.drop()
      }
    }
  }
  return backend
}

function processBackend (binding) {
  const { request, release, abort, query, details } = binding
  return nativeBackend(binding, { request, release, abort, query, details, translate: realmError }, binding.processAgent, 'process')
}

module.exports = { agentOf, nativeBackend, processBackend, snapshotInThisRealm }
