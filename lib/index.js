'use strict'

// The navigator.locks-shaped API over the native lock manager: WebIDL
// argument handling, the spec's validation steps, promises and AbortSignal.
// The native side decides who holds what; this file only runs callbacks and
// settles promises on this thread.

const path = require('path')
const { randomUUID } = require('crypto')
const diagnostics = require('diagnostics_channel')
const binding = require('node-gyp-build')(path.join(__dirname, '..'))

const EXCLUSIVE = 0
const SHARED = 1
const IF_AVAILABLE = 1
const STEAL = 2
const EV_GRANTED = 1
const EV_UNAVAILABLE = 2
const EV_STOLEN = 4

// The channels and payloads of Node's built-in navigator.locks, so that
// existing tooling works. A request's start and grant (or miss) payloads are
// one object, so a subscriber can pair them.
const startChannel = diagnostics.channel('locks.request.start')
const grantChannel = diagnostics.channel('locks.request.grant')
const missChannel = diagnostics.channel('locks.request.miss')
const endChannel = diagnostics.channel('locks.request.end')

// For monitorContention(): the errors this package made for stolen locks, and
// the start payloads of requests that could not be granted at once.
const stolenErrors = new WeakSet()
const queuedPayloads = new WeakSet()
const monitorContention = require('./contention.js')({
  isStolen: (error) => stolenErrors.has(error),
  wasQueued: (payload) => queuedPayloads.has(payload)
})

const promiseThen = Promise.prototype.then
const resolved = Promise.resolve()
const kToken = Symbol('web-locks')
const DEFAULT_OPTIONS = Object.freeze({ ifAvailable: false, mode: 'exclusive', signal: undefined, steal: false })

// This thread's requests, indexed by native id (small integers, reused). The
// binding's exports object is one per thread even when this file is evaluated
// more than once (test runners with per-file module registries), so the table
// lives there.
const requests = binding.requests || createRequestTable()

function createRequestTable () {
  const table = []
  binding.setup(function dispatch (id, events) {
    const request = table[id]
    if (request !== undefined) request.deliver(events)
  }, randomUUID())
  binding.requests = table
  return table
}

function stolenError () {
  const error = new DOMException("Lock broken by another request with the 'steal' option.", 'AbortError')
  stolenErrors.add(error)
  return error
}

class LockRequest {
  constructor (name, options, callback, resolve, reject) {
    this.id = -1
    this.name = name
    this.options = options
    this.mode = options.mode
    this.callback = callback
    this.signal = options.signal
    this.resolve = resolve
    this.reject = reject
    this.settled = false
    this.held = false
    this.diagnostics = undefined
    // Chained now, so that the callback runs in the async context of the
    // request() call whichever thread's release granted the lock.
    new Promise((resolve) => { this.grant = resolve }).then(run)
  }

  deliver (events) {
    const grant = this.grant
    if (events & EV_GRANTED) {
      this.held = true
      this.grant = undefined
      grant(this)
    } else if (events & EV_UNAVAILABLE) {
      requests[this.id] = undefined
      this.grant = undefined
      grant(this)
    }
    // After the grant: its callback is queued first, as in the spec.
    if (events & EV_STOLEN) this.settle(false, stolenError())
  }

  run () {
    const signal = this.signal
    if (this.held && signal !== undefined) {
      unwatch(signal, this)
      if (signal.aborted) {
        // Aborted after the grant was made but before it reached this
        // thread: the abort steps already rejected the promise.
        this.release()
        return
      }
    }
    const channel = this.held ? grantChannel : missChannel
    if (channel.hasSubscribers) channel.publish(this.diagnostics || { name: this.name, mode: this.mode })
    const callback = this.callback
    let result
    try {
      result = callback(this.held ? new Lock(kToken, this.name, this.mode) : null)
    } catch (error) {
      // As a rejected waiting promise: released in a microtask, after those
      // the callback queued.
      promiseThen.call(resolved, () => this.finish(false, error))
      return
    }
    this.wait(result)
  }

  // The spec's "resolve waiting with r", and the release upon its
  // settlement: r's then is read once and a thenable is adopted; a plain
  // value releases in a microtask, after those the callback queued. A native
  // promise is adopted with one reaction, without the wrapper promise of
  // new Promise((resolve) => resolve(r)).
  wait (result) {
    if (result === null || (typeof result !== 'object' && typeof result !== 'function')) {
      promiseThen.call(resolved, () => this.finish(true, result))
      return
    }
    let then
    try {
      then = result.then
    } catch (error) {
      promiseThen.call(resolved, () => this.finish(false, error))
      return
    }
    if (typeof then !== 'function') {
      promiseThen.call(resolved, () => this.finish(true, result))
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
    const adopt = () => {
      try {
        then.call(result, onFulfilled, onRejected)
      } catch (error) {
        onRejected(error)
      }
    }
    // The spec calls then in a microtask; for the built-in then, calling it
    // now only registers a reaction, which nothing can observe.
    if (then === promiseThen) adopt()
    else queueMicrotask(adopt)
  }

  release () {
    this.held = false
    requests[this.id] = undefined
    return binding.release(this.id)
  }

  finish (ok, value) {
    if (this.held && !this.release()) this.settle(false, stolenError())
    else this.settle(ok, value)
  }

  // Settles the request() promise; later calls are ignored, as they are by
  // the promise itself.
  settle (ok, value) {
    if (this.settled) return
    this.settled = true
    if (endChannel.hasSubscribers) {
      const { ifAvailable, steal } = this.options
      endChannel.publish({ name: this.name, mode: this.mode, ifAvailable, steal, error: ok ? undefined : value })
    }
    if (ok) this.resolve(value)
    else this.reject(value)
  }

  abort () {
    if (binding.abort(this.id)) requests[this.id] = undefined
    this.settle(false, this.signal.reason)
  }
}

// The spec adds an abort algorithm to the signal per request. One listener per
// signal over an ordered set of its waiting requests does the same, in the
// same order, without piling listeners (and Node's MaxListeners warning) on a
// signal that many requests share.
const watched = new WeakMap()

function watch (signal, request) {
  let entry = watched.get(signal)
  if (entry === undefined) {
    const requests = new Set()
    const listener = () => {
      watched.delete(signal)
      for (const waiting of requests) waiting.abort()
    }
    entry = { requests, listener }
    watched.set(signal, entry)
    signal.addEventListener('abort', listener, { once: true })
  }
  entry.requests.add(request)
}

function unwatch (signal, request) {
  const entry = watched.get(signal)
  if (entry === undefined || !entry.requests.delete(request) || entry.requests.size > 0) return
  watched.delete(signal)
  signal.removeEventListener('abort', entry.listener)
}

function run (request) {
  return request.run()
}

function toDOMString (value) {
  // A template literal is ToString: it throws a TypeError for a Symbol.
  return typeof value === 'string' ? value : `${value}`
}

const nodeAbortedGetter = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted').get

function isAbortSignal (value) {
  if (typeof value !== 'object' || value === null) return false
  try {
    nodeAbortedGetter.call(value)
    return true
  } catch {
    // A DOM environment's own AbortSignal (jsdom under a test runner).
    const Signal = globalThis.AbortSignal
    return typeof Signal === 'function' && value instanceof Signal
  }
}

// WebIDL dictionary conversion of LockOptions: members in lexicographic order.
function toLockOptions (value) {
  if (value === undefined || value === null) return DEFAULT_OPTIONS
  if (typeof value !== 'object' && typeof value !== 'function') {
    throw new TypeError("Failed to execute 'request' on 'LockManager': The provided value is not of type 'LockOptions'.")
  }
  const ifAvailable = Boolean(value.ifAvailable)
  const modeValue = value.mode
  const mode = modeValue === undefined ? 'exclusive' : toDOMString(modeValue)
  if (mode !== 'exclusive' && mode !== 'shared') {
    throw new TypeError(`Failed to execute 'request' on 'LockManager': The provided value '${mode}' is not a valid enum value of type LockMode.`)
  }
  const signal = value.signal
  if (signal !== undefined && !isAbortSignal(signal)) {
    throw new TypeError("Failed to execute 'request' on 'LockManager': member signal is not of type 'AbortSignal'.")
  }
  const steal = Boolean(value.steal)
  return { ifAvailable, mode, signal, steal }
}

function notSupported (message) {
  return new DOMException(`Failed to execute 'request' on 'LockManager': ${message}`, 'NotSupportedError')
}

function requestLock (name, options, callback) {
  const { ifAvailable, mode, signal, steal } = options
  if (name.charCodeAt(0) === 0x2d) throw notSupported("Names starting with '-' are reserved.")
  if (steal && ifAvailable) throw notSupported("The 'steal' and 'ifAvailable' options cannot be used together.")
  if (steal && mode !== 'exclusive') throw notSupported("The 'steal' option may only be used with 'exclusive' locks.")
  if (signal !== undefined && (steal || ifAvailable)) {
    throw notSupported(`The 'signal' and '${steal ? 'steal' : 'ifAvailable'}' options cannot be used together.`)
  }
  if (signal !== undefined && signal.aborted) return Promise.reject(signal.reason)

  let resolve, reject
  const promise = new Promise((res, rej) => { resolve = res; reject = rej })
  const request = new LockRequest(name, options, callback, resolve, reject)
  const result = binding.request(name, mode === 'shared' ? SHARED : EXCLUSIVE,
    (ifAvailable ? IF_AVAILABLE : 0) | (steal ? STEAL : 0))
  request.id = result >>> 1
  requests[request.id] = request
  if (startChannel.hasSubscribers) {
    request.diagnostics = { name, mode }
    if ((result & 1) === 0) queuedPayloads.add(request.diagnostics)
    startChannel.publish(request.diagnostics)
  }
  if (signal !== undefined) watch(signal, request)
  return promise
}

class LockManager {
  #brand = true

  constructor (token) {
    if (token !== kToken) throw new TypeError('Illegal constructor')
  }

  // request(name, callback) or request(name, options, callback). Every
  // failure is a rejected promise, as for any promise-returning WebIDL method.
  request (name, optionsOrCallback) {
    try {
      if (!(this !== null && typeof this === 'object' && #brand in this)) throw new TypeError('Illegal invocation')
      const argc = arguments.length
      if (argc < 2) {
        throw new TypeError(`Failed to execute 'request' on 'LockManager': 2 arguments required, but only ${argc} present.`)
      }
      name = toDOMString(name)
      const options = argc === 2 ? DEFAULT_OPTIONS : toLockOptions(optionsOrCallback)
      const callback = argc === 2 ? optionsOrCallback : arguments[2]
      if (typeof callback !== 'function') {
        throw new TypeError(`Failed to execute 'request' on 'LockManager': parameter ${argc === 2 ? 2 : 3} is not of type 'Function'.`)
      }
      return requestLock(name, options, callback)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  query () {
    try {
      if (!(this !== null && typeof this === 'object' && #brand in this)) throw new TypeError('Illegal invocation')
      return Promise.resolve(binding.query())
    } catch (error) {
      return Promise.reject(error)
    }
  }
}

class Lock {
  #name
  #mode

  constructor (token, name, mode) {
    if (token !== kToken) throw new TypeError('Illegal constructor')
    this.#name = name
    this.#mode = mode
  }

  get name () { return this.#name }

  get mode () { return this.#mode }
}

// WebIDL members are enumerable, and interfaces carry their name as a tag.
for (const [Class, members] of [[LockManager, ['request', 'query']], [Lock, ['name', 'mode']]]) {
  for (const member of members) {
    Object.defineProperty(Class.prototype, member, { enumerable: true })
  }
  Object.defineProperty(Class.prototype, Symbol.toStringTag, { value: Class.name, configurable: true })
}

const locks = new LockManager(kToken)

module.exports = { locks, LockManager, Lock, monitorContention }
