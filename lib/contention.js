'use strict'

// monitorContention(): per-name contention figures for this thread's
// requests, gathered from the locks.request.* diagnostics channels while the
// monitor is on. Each thread has its own channels, hence its own figures.
//
// A monitor counts only the requests that started while it runs, so that
// every figure is consistent (granted <= requests, a wait for every grant
// that waited). Its subscribers never look into user values (a callback's
// error may be a revoked Proxy): lib/ says how a request ended. They run
// inside diagnostics_channel, where a throw would be an uncaught exception.

const diagnostics = require('diagnostics_channel')
const {
  SafeMap, MapPrototypeGet, MapPrototypeSet, MapPrototypeForEach,
  SafeWeakMap, WeakMapPrototypeGet, WeakMapPrototypeSet, performanceNow
} = require('./intrinsics.js')

function emptyFigures () {
  return { requests: 0, granted: 0, waited: 0, waitMs: 0, maxWaitMs: 0, missed: 0, stolen: 0, aborted: 0, failed: 0 }
}

// wasQueued(start payload) -> whether that request had to wait;
// endingOf(end payload) -> { start: its start payload, ending: undefined
// (success), 'stolen', 'aborted' (by its signal) or 'failed' }.
module.exports = function createMonitorFactory ({ wasQueued, endingOf }) {
  return function monitorContention () {
    const byName = new SafeMap()
    // start payload -> [its figures, when it started]
    const started = new SafeWeakMap()
    const figures = (name) => {
      let entry = MapPrototypeGet(byName, name)
      if (entry === undefined) MapPrototypeSet(byName, name, (entry = emptyFigures()))
      return entry
    }
    const handlers = [
      ['locks.request.start', (message) => {
        const entry = figures(message.name)
        entry.requests++
        WeakMapPrototypeSet(started, message, [entry, performanceNow()])
      }],
      ['locks.request.grant', (message) => {
        const start = WeakMapPrototypeGet(started, message)
        if (start === undefined) return
        const entry = start[0]
        entry.granted++
        if (!wasQueued(message)) return
        const waitMs = performanceNow() - start[1]
        entry.waited++
        entry.waitMs += waitMs
        if (waitMs > entry.maxWaitMs) entry.maxWaitMs = waitMs
      }],
      ['locks.request.miss', (message) => {
        const start = WeakMapPrototypeGet(started, message)
        if (start !== undefined) start[0].missed++
      }],
      ['locks.request.end', (message) => {
        const ending = endingOf(message)
        const start = ending === undefined ? undefined : WeakMapPrototypeGet(started, ending.start)
        if (start === undefined || ending.ending === undefined) return
        start[0][ending.ending]++
      }]
    ]
    for (let i = 0; i < handlers.length; i++) diagnostics.subscribe(handlers[i][0], handlers[i][1])

    return {
      // A copy of the figures so far: name -> figures.
      figures () {
        const copy = new SafeMap()
        MapPrototypeForEach(byName, (entry, name) => { MapPrototypeSet(copy, name, { ...entry }) })
        return copy
      },
      stop () {
        for (let i = 0; i < handlers.length; i++) diagnostics.unsubscribe(handlers[i][0], handlers[i][1])
      }
    }
  }
}
