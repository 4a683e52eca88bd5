'use strict'

// The process-wide lock manager behind `locks`: the core's state in the
// process's own memory, shared by every thread. A backend is what the shim
// (index.js) needs of a manager: request(name, how), with the mode in bit 0
// and the flags above it, leaves in the thread's io array (IO_RESULT) the
// native request's id * 2, + 1 if the lock was free; release(id) and
// abort(id) say whether the lock was held and whether the request was still
// queued; query() gives { held, pending }; close(), if present, makes this
// thread leave the manager, and `closed` tells whether it has.

function processBackend (binding) {
  return {
    closed: false,
    request: binding.request,
    release: binding.release,
    abort: binding.abort,
    query: binding.query,
    close: undefined
  }
}

module.exports = { processBackend }
