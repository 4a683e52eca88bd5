'use strict'

// The navigator.locks-shaped API over every lock manager: WebIDL argument
// handling, the spec's validation steps, promises and AbortSignal. A manager
// is a backend behind one interface (manager-process.js says what it is):
// the process-wide one (`locks`), the machine-wide ones (openLockManager,
// manager-machine.js) and those in PostgreSQL (openLockManager with a
// `postgres` option, postgres/manager.js). The backend decides who holds
// what; this file only runs callbacks and settles promises on this thread.

const diagnostics = require('diagnostics_channel')
const binding = require('./binding.js')
const {
  ReflectApply, getter, SafePromise, nativeThen, PromisePrototypeThen, PromiseResolve, PromiseReject,
  SafeSet, SetPrototypeAdd, SetPrototypeDelete, SetPrototypeForEach, SetPrototypeGetSize,
  SafeWeakMap, WeakMapPrototypeGet, WeakMapPrototypeSet, WeakMapPrototypeDelete,
  MapPrototypeGet, MapPrototypeSet, MapPrototypeDelete, MapPrototypeForEach,
  WeakSetPrototypeAdd, WeakSetPrototypeHas,
  SymbolDispose, SymbolAsyncDispose, SafeFinalizationRegistry, FinalizationRegistryPrototypeRegister,
  FinalizationRegistryPrototypeUnregister, domException, SafeTypeError, SafeBigInt, nodeSignalPrototype, addAbortListener
} = require('./intrinsics.js')
const { processBackend, snapshotInThisRealm } = require('./manager-process.js')
const deadlock = require('./deadlock.js')
const { WAITING: DEADLOCK_WAITING, WITHDRAWN: DEADLOCK_WITHDRAWN, watching: deadlockWatching } = deadlock
const { machineTarget, openMachine, admitMachine, machineBackend } = require('./manager-machine.js')
const { postgresTarget, openPostgres, schemaSQL } = require('./postgres/manager.js')
const { MACHINE_OPTIONS, POSTGRES_OPTIONS, rejectUnknown } = require('./options.js')
const tracing = require('./tracing.js')
const {
  SHARED, IF_AVAILABLE, STEAL, EV_GRANTED, EV_UNAVAILABLE, EV_STOLEN, EV_FAILED, IO_ID, IO_EVENTS, IO_TOKEN_LO, IO_TOKEN_HI
} = require('./events.js')

// How a request that did not succeed ended, for monitorContention().
const STOLEN = 'stolen'
const ABORTED = 'aborted'
const FAILED = 'failed'

// The channels and payloads of Node's built-in navigator.locks, so that
// existing tooling works. A request's start and grant (or miss) payloads are
// one object, so a subscriber can pair them.
const startChannel = diagnostics.channel('locks.request.start')
const grantChannel = diagnostics.channel('locks.request.grant')
const missChannel = diagnostics.channel('locks.request.miss')
const endChannel = diagnostics.channel('locks.request.end')

// For monitorContention(), what the payloads themselves do not say: whether a
// started request had to wait, and for an end payload, its request's start
// payload and how it ended.
const queuedStarts = new SafeWeakMap()
const endings = new SafeWeakMap()
const monitorContention = require('./contention.js')({
  wasQueued: (start) => WeakMapPrototypeGet(queuedStarts, start) === true,
  endingOf: (end) => WeakMapPrototypeGet(endings, end)
})

const resolved = PromiseResolve()
const kToken = Symbol('web-locks')
const DEFAULT_OPTIONS = Object.freeze({ ifAvailable: false, mode: 'exclusive', signal: undefined, signalOps: undefined, steal: false })

function stolenError () {
  return domException("Lock broken by another request with the 'steal' option.", 'AbortError')
}

function closedError () {
  return domException('The lock manager was closed.', 'AbortError')
}

// Fields are declared, not assigned, so that a setter someone defines on
// Object.prototype cannot intercept them; later stores hit own properties.
class LockRequest {
  id = -1
  backend
  name
  options
  callback
  resolve = undefined
  reject = undefined
  settled = false
  held = false
  dropped = false
  diagnostics = undefined
  grant = undefined
  token = 0 // the grant's fencing token: a Number, or a BigInt if a backend makes one
  trace = undefined // while it is traced (tracing.js)
  // Made while the thread watched for deadlocks: its tie to the watch
  // (deadlock.js: its serial and parent, and whether it waits), and its
  // callback runs in its frame. One field, so that a request made while no
  // one watches costs one word more.
  deadlock = undefined

  constructor (backend, name, options, callback) {
    this.backend = backend
    this.name = name
    this.options = options
    this.callback = callback
  }

  // A backend that learns only after request() returned that the request
  // waited (the PostgreSQL one) says so before the grant, for
  // monitorContention().
  queued () {
    if (this.diagnostics !== undefined) WeakMapPrototypeSet(queuedStarts, this.diagnostics, true)
  }

  // A backend that learns only after request() returned that the request
  // waits in its queue (the PostgreSQL one) says so then, for the watch for
  // deadlocks.
  waits () {
    if (!this.settled && this.deadlock !== undefined && this.deadlock.state === 0) deadlock.waiting(this)
  }

  deliver (events) {
    const grant = this.grant
    if (events & EV_FAILED) {
      this.drop(this.backend.failure())
      return
    }
    if (this.deadlock !== undefined && this.deadlock.state === DEADLOCK_WAITING) deadlock.waited(this)
    if (events & EV_GRANTED) {
      this.held = true
      this.grant = undefined
      grant(this)
    } else if (events & EV_UNAVAILABLE) {
      this.backend.forget(this)
      this.grant = undefined
      grant(this)
    }
    // After the grant: its callback is queued first, as in the spec.
    if (events & EV_STOLEN) this.settle(false, stolenError(), STOLEN)
  }

  run () {
    if (this.dropped) return
    const { signal, signalOps } = this.options
    if (this.held && signal !== undefined) {
      unwatch(signal, this)
      let aborted
      let reason
      try {
        aborted = signalOps.aborted(signal)
        if (aborted) reason = signalOps.reason(signal)
      } catch (error) {
        // An environment's signal whose getter throws now: its error is the
        // request's, as an abort's reason would be.
        aborted = true
        reason = error
      }
      if (aborted) {
        // Aborted after the grant was made but before it reached this
        // thread (spec 4.4 step 14.1.1): released without a callback. The
        // abort steps rejected the promise, unless a replaced
        // addEventListener kept them from running.
        this.release()
        this.settle(false, reason, ABORTED)
        return
      }
    }
    const channel = this.held ? grantChannel : missChannel
    if (channel.hasSubscribers) channel.publish(this.diagnostics || { name: this.name, mode: this.options.mode })
    const callback = this.callback
    let result
    try {
      const lock = this.held ? new Lock(kToken, this.name, this.options.mode, this.token) : null
      result = this.trace === undefined ? callback(lock) : tracing.reach(this, callback, lock)
    } catch (error) {
      // As a rejected waiting promise: released in a microtask, after those
      // the callback queued.
      PromisePrototypeThen(resolved, () => this.finish(false, error))
      return
    }
    this.wait(result)
  }

  // Granted before its withdrawal as part of a deadlock reached the
  // manager: released unused.
  letGo () {
    if (!this.dropped && this.held) this.release()
  }

  // run() inside the request's frame (deadlock.js), so that what its
  // callback requests is known to be made inside its lock.
  runWithin () {
    deadlock.within(this, () => this.run())
  }

  // The spec's "resolve waiting with r", and the release upon its
  // settlement: r's then is read once and a thenable is adopted; a plain
  // value releases in a microtask, after those the callback queued. A native
  // promise is adopted with one reaction (adoptNative), without the wrapper
  // promise of new Promise((resolve) => resolve(r)); the spec calls then in
  // a microtask, but for the built-in then, calling it now only registers a
  // reaction, which nothing can observe.
  wait (result) {
    if (result === null || (typeof result !== 'object' && typeof result !== 'function')) {
      PromisePrototypeThen(resolved, () => this.finish(true, result))
      return
    }
    let then
    try {
      then = result.then
    } catch (error) {
      PromisePrototypeThen(resolved, () => this.finish(false, error))
      return
    }
    if (typeof then !== 'function') {
      PromisePrototypeThen(resolved, () => this.finish(true, result))
      return
    }
    if (then === nativeThen) {
      adoptNative(this, result)
      return
    }
    let called = false
    const onFulfilled = (value) => {
      if (called) return
      called = true
      this.wait(value)
    }
    const onRejected = (error) => {
      if (called) return
      called = true
      this.finish(false, error)
    }
    PromisePrototypeThen(resolved, () => {
      try {
        ReflectApply(then, result, [onFulfilled, onRejected])
      } catch (error) {
        onRejected(error)
      }
    })
  }

  release () {
    this.held = false
    return this.backend.release(this)
  }

  // Released, then settled: a backend whose release takes a round trip
  // settles once the lock is free.
  finish (ok, value) {
    if (!this.held) {
      this.settle(ok, value, ok ? undefined : FAILED)
      return
    }
    const held = this.release()
    if (typeof held === 'boolean') this.released(held, ok, value)
    else PromisePrototypeThen(held, (outcome) => this.released(outcome, ok, value))
  }

  released (held, ok, value) {
    if (held === true) this.settle(ok, value, ok ? undefined : FAILED)
    else if (held === false) this.settle(false, stolenError(), STOLEN)
    else this.settle(false, held, FAILED)
  }

  // Settles the request() promise; later calls are ignored, as they are by
  // the promise itself.
  settle (ok, value, ending) {
    if (this.settled) return
    this.settled = true
    if (this.deadlock !== undefined && this.deadlock.state === DEADLOCK_WAITING) deadlock.waited(this)
    if (endChannel.hasSubscribers) {
      const { ifAvailable, steal } = this.options
      const payload = { name: this.name, mode: this.options.mode, ifAvailable, steal, error: ok ? undefined : value }
      WeakMapPrototypeSet(endings, payload, { start: this.diagnostics, ending })
      endChannel.publish(payload)
    }
    if (this.trace !== undefined) tracing.settle(this, ok, value)
    if (ok) this.resolve(value)
    else this.reject(value)
  }

  // The signal's abort steps (spec 4.3): out of the queue if still there,
  // and the promise rejected with the signal's reason either way.
  // With an error: the signal could not be listened to, and that error is
  // the rejection.
  abort (error) {
    if (this.settled) return
    this.backend.abort(this)
    const { signal, signalOps } = this.options
    let reason = error
    if (reason === undefined) {
      try {
        reason = signalOps.reason(signal)
      } catch (thrown) {
        reason = thrown // an environment's getter that throws: in an abort listener, a throw would end the process
      }
    }
    this.settle(false, reason, ABORTED)
  }

  // Part of a deadlock that this thread asked to reject (deadlock.js): as
  // an abort, with the error naming the cycle.
  withdraw (error) {
    if (this.settled) return
    deadlock.waited(this)
    this.deadlock.state = DEADLOCK_WITHDRAWN
    this.backend.abort(this)
    const { signal } = this.options
    if (signal !== undefined) unwatch(signal, this)
    this.settle(false, error, ABORTED)
  }

  // Its manager was closed or found corrupt, or its agent ended (a
  // PostgreSQL session lost): the backend has dropped it (spec 2.6), so its
  // promise rejects, as after a steal, with an AbortError unless the backend
  // gives another error, and its callback never runs.
  drop (error) {
    this.backend.forget(this)
    if (this.deadlock !== undefined && this.deadlock.state === DEADLOCK_WAITING) deadlock.waited(this)
    this.dropped = true
    this.held = false
    const { signal } = this.options
    if (signal !== undefined) unwatch(signal, this)
    if (binding.scopes.exiting) return
    this.settle(false, error === undefined ? closedError() : error, FAILED)
  }
}

// One reaction, shared by every request, runs the request its promise was
// resolved with: the request itself, which is never thenable, whatever
// Object.prototype holds. (Not its id: close() frees the ids of a closed
// manager's requests, granted ones whose reaction has yet to run included.)
Object.defineProperty(LockRequest.prototype, 'then', { value: undefined })

// The deadlock watch's part is here, not in run(), which V8 inlines only
// while it is small: a request withdrawn as part of a deadlock but granted
// meanwhile is let go, and a tracked one's callback runs in its frame.
function runGranted (request) {
  const tie = request.deadlock
  if (tie === undefined) request.run()
  else if (tie.state === DEADLOCK_WITHDRAWN) request.letGo()
  else if (request.held) request.runWithin()
  else request.run()
}

// A native promise's then calls at most one of its reactions, once: no
// guard, and closures that hold only the request.
function adoptNative (request, promise) {
  try {
    PromisePrototypeThen(promise, (value) => request.wait(value), (error) => request.finish(false, error))
  } catch (error) {
    request.finish(false, error)
  }
}

// The spec adds an abort algorithm to the signal per request. One listener per
// signal over an ordered set of its waiting requests does the same, in the
// same order, without piling listeners (and Node's MaxListeners warning) on a
// signal that many requests share.
//
// The algorithms run when the signal is aborted, not when anyone dispatches
// an event named 'abort' on it (spec 4.3): such an event finds the signal not
// aborted and leaves every request as it was. The listener (a once-listener)
// is then added again after the dispatch, not during it, where it could be
// called again by the same dispatch; a signal aborted meanwhile is seen at
// once by addAbortListener, which calls a listener of an aborted signal in a
// microtask. (A reaction of a promise, not queueMicrotask: a test's fake
// timers, installed before the package loads, would hold that until ticked.)
const watched = new SafeWeakMap()

function watch (signal, request) {
  let entry = WeakMapPrototypeGet(watched, signal)
  if (entry === undefined) {
    const { signalOps } = request.options
    const waiting = new SafeSet()
    // Runs in a microtask: what the signal's own addEventListener or
    // `aborted` throws there would end the process, so it is the requests'
    // rejection instead, as a getter's throw is in the listener.
    const listen = () => {
      if (WeakMapPrototypeGet(watched, signal) !== entry) return
      try {
        // A signal whose own `aborted` property says true while its state
        // does not (a test's stub) would have addAbortListener call the
        // listener at once, again and again: it counts as aborted, as it
        // did before the listener read the state.
        if (signal.aborted) {
          abortAll(undefined)
          return
        }
        entry.listening = addAbortListener(signal, listener)
      } catch (error) {
        abortAll(error)
      }
    }
    const abortAll = (error) => {
      // (A listener left over an empty set, which could not be removed,
      // leaves a later entry of the signal alone.)
      if (WeakMapPrototypeGet(watched, signal) === entry) WeakMapPrototypeDelete(watched, signal)
      SetPrototypeForEach(waiting, (request) => request.abort(error))
    }
    const listener = () => {
      // A signal whose state cannot be read (an environment's getter that
      // throws) counts as aborted: each request then rejects with what
      // reading its reason throws, rather than wait on a broken signal.
      let aborted = true
      try {
        aborted = signalOps.aborted(signal)
      } catch {}
      if (!aborted) {
        PromisePrototypeThen(resolved, listen)
        return
      }
      abortAll(undefined)
    }
    entry = { waiting, listening: addAbortListener(signal, listener) }
    WeakMapPrototypeSet(watched, signal, entry)
  }
  SetPrototypeAdd(entry.waiting, request)
}

function unwatch (signal, request) {
  const entry = WeakMapPrototypeGet(watched, signal)
  if (entry === undefined || !SetPrototypeDelete(entry.waiting, request) || SetPrototypeGetSize(entry.waiting) > 0) return
  WeakMapPrototypeDelete(watched, signal)
  try {
    entry.listening[SymbolDispose]()
  } catch {
    // An environment's removeEventListener that throws (this runs in the
    // dispatcher): the listener stays, over an empty set.
  }
}

function toDOMString (value) {
  // A template literal is ToString: it throws a TypeError for a Symbol.
  return typeof value === 'string' ? value : `${value}`
}

// How to read a signal's state: through Node's own getters, or for a DOM
// environment's AbortSignal (jsdom or happy-dom under a test runner) through
// that class's getters, taken from its prototypes. jsdom's check the brand
// (they throw for anything else); happy-dom's read a field of the object
// (undefined for anything else), so its `aborted` must be a boolean too.
const NODE_SIGNAL = { aborted: getter(nodeSignalPrototype, 'aborted'), reason: getter(nodeSignalPrototype, 'reason') }
const foreignSignals = new SafeWeakMap()

function signalOpsOf (value) {
  if (typeof value !== 'object' || value === null) return undefined
  try {
    NODE_SIGNAL.aborted(value)
    return NODE_SIGNAL
  } catch {}
  try {
    const prototype = globalThis.AbortSignal.prototype
    let ops = WeakMapPrototypeGet(foreignSignals, prototype)
    if (ops === undefined) {
      ops = { aborted: getter(prototype, 'aborted'), reason: getter(prototype, 'reason') }
      WeakMapPrototypeSet(foreignSignals, prototype, ops)
    }
    if (ops.aborted === undefined || ops.reason === undefined) return undefined
    return typeof ops.aborted(value) === 'boolean' ? ops : undefined
  } catch {
    return undefined
  }
}

// WebIDL dictionary conversion of LockOptions: members in lexicographic order.
// `method` is the LockManager method called, for the messages.
function toLockOptions (value, method) {
  if (value === undefined || value === null) return DEFAULT_OPTIONS
  if (typeof value !== 'object' && typeof value !== 'function') {
    throw new SafeTypeError(`Failed to execute '${method}' on 'LockManager': The provided value is not of type 'LockOptions'.`)
  }
  const ifAvailable = !!value.ifAvailable
  const modeValue = value.mode
  const mode = modeValue === undefined ? 'exclusive' : toDOMString(modeValue)
  if (mode !== 'exclusive' && mode !== 'shared') {
    throw new SafeTypeError(`Failed to execute '${method}' on 'LockManager': The provided value '${mode}' is not a valid enum value of type LockMode.`)
  }
  const signal = value.signal
  const signalOps = signal === undefined ? undefined : signalOpsOf(signal)
  if (signal !== undefined && signalOps === undefined) {
    throw new SafeTypeError(`Failed to execute '${method}' on 'LockManager': member signal is not of type 'AbortSignal'.`)
  }
  const steal = !!value.steal
  return { ifAvailable, mode, signal, signalOps, steal }
}

function notSupported (method, message) {
  return domException(`Failed to execute '${method}' on 'LockManager': ${message}`, 'NotSupportedError')
}

// Request a lock (spec 4.1). The native request is the commit point: what
// can fail (including a RangeError near the stack limit) comes before it and
// leaves nothing in the manager; after it, only plain stores, which cannot.
function requestLock (backend, name, options, callback, method) {
  const { ifAvailable, mode, signal, signalOps, steal } = options
  if (name.length > 0 && name[0] === '-') throw notSupported(method, "Names starting with '-' are reserved.")
  if (steal && ifAvailable) throw notSupported(method, "The 'steal' and 'ifAvailable' options cannot be used together.")
  if (steal && mode !== 'exclusive') throw notSupported(method, "The 'steal' option may only be used with 'exclusive' locks.")
  if (signal !== undefined && (steal || ifAvailable)) {
    throw notSupported(method, `The 'signal' and '${steal ? 'steal' : 'ifAvailable'}' options cannot be used together.`)
  }
  if (signal !== undefined && signalOps.aborted(signal)) return PromiseReject(signalOps.reason(signal))

  const request = new LockRequest(backend, name, options, callback)
  return tracing.subscribed() ? tracing.traceRequest(request, makeRequest) : makeRequest(request)
}

// A request made while the thread watches for deadlocks: its parent, and
// its callback in a frame (deadlock.js). Apart from makeRequest, which V8
// inlines into request() only while it is small.
function track (request) {
  request.deadlock = deadlock.tie(request.backend.agent)
}

// Makes the request: its promise, or a throw for a request that its
// manager refused.
function makeRequest (request) {
  const { backend, name, options } = request
  const { ifAvailable, mode, signal, steal } = options
  // Chained now, so that the callback runs in the async context of the
  // request() call whichever thread's release granted the lock. Resolved
  // with nothing anyone can make thenable (see runGranted).
  const granted = new SafePromise((resolve) => { request.grant = resolve })
  // An executor that cannot run (at the stack limit) leaves its promise
  // rejected with the RangeError: that promise is then the caller's.
  if (request.grant === undefined) return granted
  PromisePrototypeThen(granted, runGranted)
  const promise = new SafePromise((resolve, reject) => {
    request.resolve = resolve
    request.reject = reject
  })
  if (request.reject === undefined) return promise
  let queued
  try {
    // The abort steps are in place before anything user-visible runs (a
    // start subscriber may abort the signal).
    if (signal !== undefined) {
      watch(signal, request)
      if (request.settled) return promise // aborted meanwhile by a replaced addEventListener
    }
    if (deadlockWatching()) track(request)
    queued = backend.request(name, (mode === 'shared' ? SHARED : 0) | (ifAvailable ? IF_AVAILABLE : 0) | (steal ? STEAL : 0), request)
  } catch (error) {
    request.settled = true // never made: its abort steps must do nothing
    if (signal !== undefined) unwatch(signal, request)
    throw error
  }
  try {
    if (startChannel.hasSubscribers) publishStart(request, queued)
    if (queued && request.deadlock !== undefined && !request.settled) deadlock.waiting(request)
  } catch {
    // Only a RangeError near the stack limit lands here (Node reports a
    // subscriber's own errors itself); the request stands without its event
    // or its watch for deadlocks.
  }
  return promise
}

// acquire(): a request whose callback hands its lock to the caller, as a
// ReleasableLock, and holds it until that lock's release(). The rest is
// request()'s: validation, queue, signal, steal, diagnostics; and its
// promise's outcome (the lock released, or why not) is what release() gives.
function acquireLock (backend, name, options) {
  // The resolvers of acquired while it is unsettled, dropped then: the
  // request, which its manager keeps as long as the lock is held, must keep
  // no path to the lock (see `unreleased`).
  let settle
  const acquired = new SafePromise((resolve, reject) => { settle = { resolve, reject } })
  if (settle === undefined) return acquired
  const state = { name, done: false }
  const callback = (granted) => {
    const { resolve } = settle
    settle = undefined
    if (granted === null) {
      resolve(null)
      return undefined
    }
    let open
    const gate = new SafePromise((resolve) => { open = resolve })
    resolve(new ReleasableLock(kToken, granted.name, granted.mode, granted.token, open, outcome, state))
    return gate
  }
  const outcome = requestLock(backend, name, options, callback, 'acquire')
  // After the request was made, a call, but one that needs less stack than
  // requestLock() just had at this depth. (It fulfils only once the lock
  // was released, or for a miss.)
  PromisePrototypeThen(outcome, undefined, (error) => {
    state.done = true
    if (settle === undefined) return // the lock was handed over: its release() tells
    const { reject } = settle
    settle = undefined
    reject(error)
  })
  return acquired
}

// A lock that acquire() gave and that nothing can release any more (its
// object was collected while held) stays held, as the lock of a callback
// whose promise never settles does, until its manager is closed or its
// thread ends; a warning says so.
const unreleased = new SafeFinalizationRegistry((state) => {
  if (state.done) return
  const { name } = state
  const shown = name.length > 100 ? `${name.slice(0, 100)}...` : name
  process.emitWarning(`The lock '${shown}' that acquire() gave was garbage-collected while held: it stays held until ` +
    'its lock manager is closed or this thread ends. Release it (await using, or release()), or use request() with a callback.',
  { code: 'WEB_LOCKS_UNRELEASED' })
})

function publishStart (request, queued) {
  const payload = { name: request.name, mode: request.options.mode }
  request.diagnostics = payload
  if (queued) WeakMapPrototypeSet(queuedStarts, payload, true)
  startChannel.publish(payload)
}

function invalidState (method) {
  return domException(`Failed to execute '${method}' on 'LockManager': The lock manager was closed.`, 'InvalidStateError')
}

// A manager's backend, or undefined for anything else (set by the class).
let backendOf

class LockManager {
  #backend

  static {
    backendOf = (manager) => (manager !== null && typeof manager === 'object' && #backend in manager ? manager.#backend : undefined)
  }

  constructor (token, backend) {
    if (token !== kToken) throw new SafeTypeError('Illegal constructor')
    this.#backend = backend
  }

  // request(name, callback) or request(name, options, callback). Every
  // failure is a rejected promise, as for any promise-returning WebIDL method.
  request (name, optionsOrCallback) {
    try {
      if (!(this !== null && typeof this === 'object' && #backend in this)) throw new SafeTypeError('Illegal invocation')
      const backend = this.#backend
      if (backend.agent.closed) throw invalidState('request')
      const argc = arguments.length
      if (argc < 2) {
        throw new SafeTypeError(`Failed to execute 'request' on 'LockManager': 2 arguments required, but only ${argc} present.`)
      }
      name = toDOMString(name)
      const options = argc === 2 ? DEFAULT_OPTIONS : toLockOptions(optionsOrCallback, 'request')
      const callback = argc === 2 ? optionsOrCallback : arguments[2]
      if (typeof callback !== 'function') {
        throw new SafeTypeError(`Failed to execute 'request' on 'LockManager': parameter ${argc === 2 ? 2 : 3} is not of type 'Function'.`)
      }
      return requestLock(backend, name, options, callback, 'request')
    } catch (error) {
      return PromiseReject(error)
    }
  }

  // Not in the spec: request() without a callback, as proposed in
  // w3c/web-locks#122, under a name of its own, since the spec's request()
  // must reject a call without a callback. acquire(name, [options]).
  acquire (name) {
    try {
      if (!(this !== null && typeof this === 'object' && #backend in this)) throw new SafeTypeError('Illegal invocation')
      const backend = this.#backend
      if (backend.agent.closed) throw invalidState('acquire')
      if (arguments.length < 1) {
        throw new SafeTypeError("Failed to execute 'acquire' on 'LockManager': 1 argument required, but only 0 present.")
      }
      name = toDOMString(name)
      // A dictionary may be a function, but a callback here is a mistake
      // that would hold the lock without ever calling it.
      const options = arguments[1]
      if (typeof options === 'function') {
        throw new SafeTypeError("Failed to execute 'acquire' on 'LockManager': parameter 2 is a function; acquire() takes no callback (request() does).")
      }
      return acquireLock(backend, name, toLockOptions(options, 'acquire'))
    } catch (error) {
      return PromiseReject(error)
    }
  }

  query () {
    try {
      if (!(this !== null && typeof this === 'object' && #backend in this)) throw new SafeTypeError('Illegal invocation')
      const backend = this.#backend
      if (backend.agent.closed) throw invalidState('query')
      const snapshot = backend.query()
      return PromiseResolve(backend.native ? snapshotInThisRealm(snapshot) : snapshot)
    } catch (error) {
      return PromiseReject(error)
    }
  }

  // Not in the spec: this thread leaves a manager it opened. The backend
  // ends its agent (spec 2.6: its requests leave their queues, its locks are
  // released) and drops every request of it that has not settled. Closing
  // twice is harmless; the process-wide manager lasts as long as the thread.
  close () {
    try {
      if (!(this !== null && typeof this === 'object' && #backend in this)) throw new SafeTypeError('Illegal invocation')
      const backend = this.#backend
      if (backend.close === undefined) {
        throw domException("Failed to execute 'close' on 'LockManager': The process-wide lock manager cannot be closed.", 'NotSupportedError')
      }
      if (backend.agent.closed) return PromiseResolve()
      return PromiseResolve(closeBackend(backend))
    } catch (error) {
      return PromiseReject(error)
    }
  }
}

// Not in the spec: rejectDeadlocks(manager, [on]). While on, a deadlock
// through one of this thread's requests of `manager` (deadlock.js) rejects
// one of them with an OperationError that names the cycle, as a test suite
// wants; by default a deadlock is only published (web-locks.deadlock), and
// its requests wait as the spec says.
function rejectDeadlocks (manager, on = true) {
  const backend = backendOf(manager)
  if (backend === undefined) throw new SafeTypeError("Failed to execute 'rejectDeadlocks': parameter 1 is not of type 'LockManager'.")
  if (typeof on !== 'boolean') throw new SafeTypeError("Failed to execute 'rejectDeadlocks': parameter 2 is not a boolean.")
  deadlock.setReject(backend, on)
}

// This thread's agents of machine-wide managers, by file, shared by every
// copy of lib/ on the thread (binding.js), so that opening a scope again
// gives the same agent until it is closed (through any copy); and this
// copy's LockManager of each, so that it gives the same object, over a
// backend of its own that makes its errors in this copy's realm.
const openScopes = binding.scopes.open
const managers = new SafeWeakMap()

// process.exit() skips the binding's cleanup hooks on the main thread: leave
// every manager then, so that the other processes need not wait to notice
// a death. (A thread's end closes its agents in the binding.)
// Their requests that still wait are left unsettled then, as every other
// promise is when a process ends: a rejection would only be reported as
// unhandled, and fail the exit. One listener per process object, whichever
// copy of lib/ added it (binding.scopes.exitHeard): one per copy would pile
// up under a fresh module registry per test file (MaxListeners warning).
// (A test environment may give a realm a process object of its own: jest's.)

// A manager's backend leaves: a scope's agent (backend.agent, with its
// file) is no longer the thread's open one; a PostgreSQL agent has none.
function closeBackend (backend) {
  const { agent } = backend
  if (agent !== undefined && MapPrototypeGet(openScopes, agent.file) === agent) MapPrototypeDelete(openScopes, agent.file)
  return backend.close()
}

function closeAgent (agent) {
  closeBackend(machineBackend(binding, agent))
}

function closeAll () {
  binding.scopes.exiting = true
  MapPrototypeForEach(openScopes, closeAgent)
}

// openLockManager(scope, [options]): this thread's agent of the lock
// manager that every process on the host opening `scope` shares, or with a
// `postgres` option, every process that opens `scope` in that database.
// Each call with `postgres` joins as a new agent.
function openLockManager (scope, options) {
  try {
    // Options may be a function, as a dictionary may (its own properties).
    const postgres = options !== null && (typeof options === 'object' || typeof options === 'function') ? options.postgres : undefined
    if (postgres !== undefined) rejectUnknown(options, POSTGRES_OPTIONS, 'openLockManager', 'a PostgreSQL lock manager')
    else rejectUnknown(options, MACHINE_OPTIONS, 'openLockManager', 'a machine-wide lock manager')
    if (postgres !== undefined) {
      const target = postgresTarget(scope, postgres, options)
      return PromisePrototypeThen(openPostgres(target), (backend) => new LockManager(kToken, backend))
    }
    const target = machineTarget(scope, options)
    let agent = MapPrototypeGet(openScopes, target.file)
    if (agent === undefined) {
      agent = openMachine(binding, target)
      MapPrototypeSet(openScopes, target.file, agent)
    } else {
      admitMachine(binding, agent, target)
    }
    if (!WeakSetPrototypeHas(binding.scopes.exitHeard, process)) {
      process.once('exit', closeAll)
      WeakSetPrototypeAdd(binding.scopes.exitHeard, process)
    }
    let manager = WeakMapPrototypeGet(managers, agent)
    if (manager === undefined) {
      manager = new LockManager(kToken, machineBackend(binding, agent))
      WeakMapPrototypeSet(managers, agent, manager)
    }
    return PromiseResolve(manager)
  } catch (error) {
    return PromiseReject(error)
  }
}

class Lock {
  #name
  #mode
  #token

  constructor (key, name, mode, token) {
    if (key !== kToken) throw new SafeTypeError('Illegal constructor')
    this.#name = name
    this.#mode = mode
    this.#token = token
  }

  get name () { return this.#name }

  get mode () { return this.#mode }

  // Not in the spec: the grant's fencing token, greater than every token
  // its manager gave before (see the README).
  get token () {
    const token = this.#token
    return typeof token === 'bigint' ? token : SafeBigInt(token)
  }
}

// Not in the spec: what acquire() gives, a Lock that its holder releases
// (w3c/web-locks#122's disposable lock). release() and
// [Symbol.asyncDispose]() release it and return one promise, of the
// request's outcome: undefined once the lock is released, or the error
// request() would reject with (an AbortError if it was stolen or its
// manager closed).
class ReleasableLock extends Lock {
  #open
  #outcome
  #released = undefined

  constructor (key, name, mode, token, open, outcome, state) {
    super(key, name, mode, token)
    this.#open = open
    this.#outcome = outcome
    FinalizationRegistryPrototypeRegister(unreleased, this, state, this)
  }

  release () {
    try {
      if (!(this !== null && typeof this === 'object' && #open in this)) throw new SafeTypeError('Illegal invocation')
      return this.#release()
    } catch (error) {
      return PromiseReject(error)
    }
  }

  [SymbolAsyncDispose] () {
    try {
      if (!(this !== null && typeof this === 'object' && #open in this)) throw new SafeTypeError('Illegal invocation')
      return this.#release()
    } catch (error) {
      return PromiseReject(error)
    }
  }

  // The request's callback returned the gate: opening it releases the lock,
  // as the settling of a callback's promise does. A new promise, so that a
  // failure nobody awaits is reported as unhandled.
  #release () {
    if (this.#released === undefined) {
      FinalizationRegistryPrototypeUnregister(unreleased, this)
      this.#open()
      this.#released = PromisePrototypeThen(this.#outcome, returnUndefined)
    }
    return this.#released
  }
}

function returnUndefined () {}

// WebIDL members are enumerable, and interfaces carry their name as a tag;
// an interface without a constructor has a length of 0 (Web IDL 3.7.1),
// whatever parameters its internal constructor takes.
for (const [Class, members] of [[LockManager, ['request', 'acquire', 'query', 'close']], [Lock, ['name', 'mode', 'token']], [ReleasableLock, ['release']]]) {
  Object.defineProperty(Class, 'length', { value: 0 })
  for (const member of members) {
    Object.defineProperty(Class.prototype, member, { enumerable: true })
  }
  Object.defineProperty(Class.prototype, Symbol.toStringTag, { value: Class.name, configurable: true })
}

const locks = new LockManager(kToken, processBackend(binding))

// The SQL that creates the PostgreSQL manager's schema (or migrates it from
// an older layout), for a database owner to run where the role that uses
// it may not.
function postgresSchema (schema, layout = 0) {
  return schemaSQL(schema, layout)
}

module.exports = { locks, LockManager, Lock, rejectDeadlocks, ReleasableLock, monitorContention, openLockManager, postgresSchema }
