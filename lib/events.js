'use strict'

// What the shim and a backend tell each other about a request: its mode
// (bit 0) and flags (the bits above), as the binding takes them, and the
// events a backend delivers (the binding's WL_EV_*, and its WLB_EV_FAILED:
// the request's manager was found corrupt); TRACKED, the binding's
// WLB_TRACKED (a request tracked for deadlocks: it passes its parent and
// gets its serial through io); and the slots of the binding's io array
// (src/binding/thread.h's WLB_IO_*).
module.exports = Object.freeze({
  SHARED: 1,
  IF_AVAILABLE: 2,
  STEAL: 4,
  TRACKED: 8,
  EV_GRANTED: 1,
  EV_UNAVAILABLE: 2,
  EV_STOLEN: 4,
  EV_FAILED: 8,
  IO_RESULT: 0,
  IO_ID: 1,
  IO_EVENTS: 2,
  IO_TOKEN_LO: 3,
  IO_TOKEN_HI: 4,
  IO_SERIAL_LO: 5,
  IO_SERIAL_HI: 6,
  IO_PARENT_LO: 7,
  IO_PARENT_HI: 8
})
