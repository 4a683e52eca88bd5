'use strict'

// The implementations a case can run against, loaded inside the child
// process (or worker thread) that measures them. Every one exposes
// request(name, callback) -> promise; web-locks and the built-in are the
// LockManager itself, so a case calls them exactly as a user would. The
// cross-process ones (web-locks-scope, proper-lockfile) need a place on
// the host: open(id, { dir, scope }) gives them one.

const fs = require('fs')
const path = require('path')

// proper-lockfile's retries, as a user who wants to wait (not fail) would
// set them: a first retry after 1-2 ms, backing off to 16 ms, forever.
// Its other options keep their defaults: stale 10 s (the least it allows
// is 2 s), which is how long a dead holder's lock stays taken.
const LOCKFILE_RETRIES = { forever: true, minTimeout: 1, maxTimeout: 16, factor: 2, randomize: true }

// The package measured: this repository, or the packed package that
// --windows measures on both sides (lib/wine.js).
const PKG = process.env.WEB_LOCKS_BENCH_PKG || path.join(__dirname, '..', '..')

const IMPLS = {
  'web-locks': {
    label: 'web-locks',
    load: () => require(PKG).locks
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
  },
  'web-locks-scope': {
    label: 'web-locks openLockManager(scope) (machine-wide; a fresh scope per point, its file in /dev/shm)',
    open: ({ dir, scope }) => require(PKG).openLockManager(scope, { dir })
  },
  'proper-lockfile': {
    label: 'proper-lockfile lock()/release() on a file per name in /dev/shm (mkdir lock; retries 1-16 ms, forever; stale 10 s)',
    open: ({ dir, stale, onBusy }) => lockfileManager(dir, { stale, onBusy })
  },
  // The PostgreSQL cases (cases/postgres-*.js, lib/postgres.js): `place` is
  // the point's server, schema and application_name.
  'web-locks-postgres': {
    label: 'web-locks openLockManager(scope, { postgres, schema }) (an agent: a session and a watcher connection; a fresh schema per point)',
    open: ({ place, scope }) => require('./postgres').openManager(place, scope)
  },
  'pg-advisory': {
    label: 'pg_advisory_lock($1) then pg_advisory_unlock($1), prepared statements on one pg.Client (node-postgres) per process'
  },
  'pg-update': {
    label: 'UPDATE of one row of an unlogged table, twice (prepared, each its own transaction) on one pg.Client'
  },
  'pg-statements': {
    label: 'web-locks\' own two statements (a request on a free name, its release), as its manager sends them, replayed on one pg.Client: the lock without the package\'s JavaScript'
  },
  'pg-notify-ring': {
    label: 'LISTEN/NOTIFY in a ring of the processes: each passes a token to the next with SELECT pg_notify($1, $2) on one pg.Client'
  },
  'pg-notify': {
    label: 'LISTEN/NOTIFY between 2 processes: SELECT pg_notify($1, $2) (prepared) on one pg.Client, the other\'s notification event; one way'
  }
}

// proper-lockfile behind request(name, callback): lock the name's file,
// run the callback, release, as a user of it writes a critical section.
// onBusy, when given, is told each time an attempt finds the lock taken
// (through its documented fs option): the cases use it to know that a
// waiter is waiting.
function lockfileManager (dir, { stale, onBusy } = {}) {
  const lockfile = require('proper-lockfile')
  const options = { retries: LOCKFILE_RETRIES }
  if (stale !== undefined) options.stale = stale
  if (onBusy) {
    options.fs = {
      __proto__: fs,
      mkdir (file, callback) {
        fs.mkdir(file, (error) => {
          if (error && error.code === 'EEXIST') onBusy()
          callback(error)
        })
      }
    }
  }
  const files = new Map()
  // proper-lockfile locks an existing file (it resolves its real path).
  const fileOf = (name) => {
    let file = files.get(name)
    if (file === undefined) {
      file = path.join(dir, `lockfile-${encodeURIComponent(name)}`)
      fs.closeSync(fs.openSync(file, 'a'))
      files.set(name, file)
    }
    return file
  }
  return {
    async request (name, callback) {
      const release = await lockfile.lock(fileOf(name), options)
      try {
        return await callback()
      } finally {
        await release()
      }
    }
  }
}

// Floors: not locks, the cost of the machinery a lock cannot avoid.
const FLOORS = {
  promise: 'await Promise.resolve() (1 thread)',
  messageport: 'MessagePort ping-pong (2 threads, one way)',
  waitasync: 'Atomics.waitAsync ping-pong (2 threads, one way)',
  'atomics-wait': 'Atomics.wait/notify ping-pong (2 threads, one way)',
  socket: 'Unix socket ping-pong (a named pipe on Windows; 2 processes, one way)',
  tcp: 'TCP ping-pong on 127.0.0.1 (2 processes, one way; --windows)'
}

// 'web-locks@current' is web-locks run by the Node that runs the benchmark;
// 'x@wine' is x under Windows's node.exe, run by wine (--windows).
function baseImpl (id) {
  return id.replace(/@.*$/, '')
}

function load (id) {
  const impl = IMPLS[baseImpl(id)]
  if (impl === undefined) throw new Error(`unknown implementation ${id}`)
  if (!impl.load) throw new Error(`${id} needs a place: open() it`)
  return impl.load()
}

// Any implementation, the cross-process ones in `where` ({ dir, scope,
// and for proper-lockfile stale and onBusy }): resolves with its
// request(name, callback).
async function open (id, where) {
  const impl = IMPLS[baseImpl(id)]
  if (impl === undefined) throw new Error(`unknown implementation ${id}`)
  return impl.open ? impl.open(where) : impl.load()
}

module.exports = { IMPLS, FLOORS, PKG, load, open, baseImpl, LOCKFILE_RETRIES }
