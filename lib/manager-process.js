'use strict'

// The process-wide lock manager behind `locks`: the core's state in the
// process's own memory, shared by every thread.
//
// A backend is what the shim (index.js) needs of a manager:
// - request(name, how, request): makes the request (how: the mode in bit 0,
//   the flags above it, events.js). A native backend returns its slot's
//   id * 2, + 1 if the lock was free, and the shim files the request in the
//   thread's table (binding.requests) under that id, for the deliveries the
//   binding dispatches; another returns -1, having given request.id a
//   number of its own. Either calls request.deliver(events) later for a
//   grant (request.token set first), a miss or a steal.
// - release(request): whether the lock was still held (false: stolen), or a
//   promise that never rejects, of that or of the error to reject the
//   request with (its agent was lost).
// - abort(request): whether the request was still queued and is now gone;
//   false if that is not known yet (the backend then forgets it itself).
// - forget(request): the request is done with (a miss, or dropped).
// - query(): { held, pending }, or a promise of it.
// - close(), if present: this thread leaves the manager; every request of
//   it that is not done gets request.drop(). May return a promise.
// - closed: whether it has.

function processBackend (binding) {
  const { requests, io } = binding
  return {
    closed: false,
    request (name, how) {
      binding.request(name, how)
      return io[0]
    },
    release (request) {
      requests[request.id] = undefined
      return binding.release(request.id)
    },
    abort (request) {
      if (!binding.abort(request.id)) return false
      requests[request.id] = undefined
      return true
    },
    forget (request) {
      requests[request.id] = undefined
    },
    query: binding.query,
    close: undefined
  }
}

module.exports = { processBackend }
