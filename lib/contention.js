'use strict'

// monitorContention(): per-name contention figures for this thread's
// requests, gathered from the locks.request.* diagnostics channels while the
// monitor is on. Each thread has its own channels, hence its own figures.

const diagnostics = require('diagnostics_channel')
const { performance } = require('perf_hooks')

function emptyFigures () {
  return { requests: 0, granted: 0, waited: 0, waitMs: 0, maxWaitMs: 0, missed: 0, stolen: 0, aborted: 0, failed: 0 }
}

module.exports = function createMonitorFactory ({ isStolen, wasQueued }) {
  return function monitorContention () {
    const byName = new Map()
    const startedAt = new WeakMap()
    const figures = (name) => {
      let entry = byName.get(name)
      if (entry === undefined) byName.set(name, (entry = emptyFigures()))
      return entry
    }
    const handlers = {
      'locks.request.start' (message) {
        figures(message.name).requests++
        startedAt.set(message, performance.now())
      },
      'locks.request.grant' (message) {
        const entry = figures(message.name)
        entry.granted++
        if (!wasQueued(message)) return
        const waitMs = performance.now() - startedAt.get(message)
        entry.waited++
        entry.waitMs += waitMs
        if (waitMs > entry.maxWaitMs) entry.maxWaitMs = waitMs
      },
      'locks.request.miss' (message) {
        figures(message.name).missed++
      },
      'locks.request.end' ({ name, error }) {
        if (error === undefined) return
        const entry = figures(name)
        if (isStolen(error)) entry.stolen++
        else if (error instanceof DOMException && error.name === 'AbortError') entry.aborted++
        else entry.failed++
      }
    }
    for (const [channel, handler] of Object.entries(handlers)) diagnostics.subscribe(channel, handler)

    return {
      // A copy of the figures so far: name -> figures.
      figures () {
        return new Map([...byName].map(([name, entry]) => [name, { ...entry }]))
      },
      stop () {
        for (const [channel, handler] of Object.entries(handlers)) diagnostics.unsubscribe(channel, handler)
      }
    }
  }
}
