'use strict'

// The implementations a case can run against, loaded inside the child
// process (or worker thread) that measures them. Every one exposes
// request(name, callback) -> promise; web-locks and the built-in are the
// LockManager itself, so a case calls them exactly as a user would.

const path = require('path')

const IMPLS = {
  'web-locks': {
    label: 'web-locks',
    load: () => require(path.join(__dirname, '..', '..')).locks
  },
  'built-in': {
    label: "Node's built-in navigator.locks",
    load: () => {
      const locks = globalThis.navigator && globalThis.navigator.locks
      if (!locks) throw new Error(`no navigator.locks in Node ${process.version}`)
      return locks
    }
  },
  // One Mutex per name, created on first use, as a user of async-mutex would.
  'async-mutex': {
    label: 'async-mutex Mutex#runExclusive (one Mutex per name)',
    load: () => {
      const { Mutex } = require('async-mutex')
      const mutexes = new Map()
      return {
        request (name, callback) {
          let mutex = mutexes.get(name)
          if (mutex === undefined) mutexes.set(name, (mutex = new Mutex()))
          return mutex.runExclusive(callback)
        }
      }
    }
  },
  'async-lock': {
    label: 'async-lock AsyncLock#acquire (promise mode, maxPending: Infinity)',
    load: () => {
      const AsyncLock = require('async-lock')
      const lock = new AsyncLock({ maxPending: Infinity })
      return {
        // async-lock switches to its node-style callback mode for a
        // function of one parameter; the cases pass functions of none.
        request: (name, callback) => lock.acquire(name, callback)
      }
    }
  }
}

// Floors: not locks, the cost of the machinery a lock cannot avoid.
const FLOORS = {
  promise: 'await Promise.resolve() (1 thread)',
  messageport: 'MessagePort ping-pong (2 threads, one way)',
  waitasync: 'Atomics.waitAsync ping-pong (2 threads, one way)',
  'atomics-wait': 'Atomics.wait/notify ping-pong (2 threads, one way)'
}

// 'web-locks@current' is web-locks run by the Node that runs the benchmark.
function baseImpl (id) {
  return id.replace(/@.*$/, '')
}

function load (id) {
  const impl = IMPLS[baseImpl(id)]
  if (impl === undefined) throw new Error(`unknown implementation ${id}`)
  return impl.load()
}

module.exports = { IMPLS, FLOORS, load, baseImpl }
