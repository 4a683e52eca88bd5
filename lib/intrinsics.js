'use strict'

// The builtins lib/ relies on, taken once when the package loads, so that
// code that replaces a global or a prototype method afterwards (or pollutes
// Object.prototype) cannot reach into a request in flight. DOMException and
// AbortSignal are taken from Node's own modules, not from the globals, which
// a DOM environment (jsdom under jest) may have replaced before we load;
// the polyfill then chooses the realm's DOMException (useDOMException).

const { atob } = require('buffer')
const { addAbortListener } = require('events')
const { performance } = require('perf_hooks')
const { transferableAbortController } = require('util')

const { apply: ReflectApply, getOwnPropertyDescriptor, getPrototypeOf } = Reflect
// uncurryThis(f)(self, ...args) is f.call(self, ...args), with nothing
// looked up at call time.
const uncurryThis = Function.prototype.bind.bind(Function.prototype.call)

// The getter of `name` on prototype or the nearest prototype above it that
// has the property (a DOM environment may define it on a base class:
// happy-dom), or undefined if none has.
function getter (prototype, name) {
  for (let p = prototype; p !== null; p = getPrototypeOf(p)) {
    const descriptor = getOwnPropertyDescriptor(p, name)
    if (descriptor !== undefined) return typeof descriptor.get === 'function' ? uncurryThis(descriptor.get) : undefined
  }
  return undefined
}

function nodeDOMException () {
  try {
    atob('~')
  } catch (error) {
    return getPrototypeOf(error).constructor
  }
}

// The class of the DOMExceptions this copy of the package makes: Node's,
// or the one the polyfill found in its realm when it loaded, so that test
// code under jsdom or happy-dom sees `error instanceof DOMException`.
const NodeDOMException = nodeDOMException()
let DOMExceptionClass = NodeDOMException

// An environment's class passed the check below with one name, but may
// throw for another, or later: then Node's makes the error, since this
// runs where a throw would end the process (a steal's AbortError is made
// in the addon's dispatcher).
function domException (message, name) {
  if (DOMExceptionClass !== NodeDOMException) {
    try {
      return new DOMExceptionClass(message, name)
    } catch {}
  }
  return new NodeDOMException(message, name)
}

// Adopts Class if it makes DOMExceptions as the spec's constructor does.
function useDOMException (Class) {
  if (typeof Class !== 'function' || Class === DOMExceptionClass) return
  try {
    const error = new Class('m', 'NotSupportedError')
    if (error.message === 'm' && error.name === 'NotSupportedError') DOMExceptionClass = Class
  } catch {}
}

const SafeError = Error
const SafeTypeError = TypeError
const SafeRangeError = RangeError

// An error the addon threw, made again in this realm (the addon makes its
// objects in the realm that first loaded it): the same kind, message and
// code, and the addon's error as its cause.
function realmError (error, prefix = '') {
  if (error === null || typeof error !== 'object') return error
  try {
    const { name, message, code } = error
    const text = `${prefix}${message}`
    const options = { cause: error }
    const Class = name === 'TypeError' ? SafeTypeError : name === 'RangeError' ? SafeRangeError : SafeError
    const copy = new Class(text, options)
    if (code !== undefined) copy.code = code
    return copy
  } catch {
    return error
  }
}

// Node's AbortSignal.prototype; where util has no transferableAbortController
// (Bun), the global AbortController's, as this package finds it at load.
const nodeSignalPrototype = getPrototypeOf(typeof transferableAbortController === 'function'
  ? transferableAbortController().signal
  : new AbortController().signal)

module.exports = {
  ReflectApply,
  ObjectDefineProperty: Object.defineProperty,
  getter,
  SafePromise: Promise,
  nativeThen: Promise.prototype.then,
  PromisePrototypeThen: uncurryThis(Promise.prototype.then),
  PromiseResolve: Promise.resolve.bind(Promise),
  PromiseReject: Promise.reject.bind(Promise),
  SafeMap: Map,
  MapPrototypeGet: uncurryThis(Map.prototype.get),
  MapPrototypeSet: uncurryThis(Map.prototype.set),
  MapPrototypeDelete: uncurryThis(Map.prototype.delete),
  MapPrototypeForEach: uncurryThis(Map.prototype.forEach),
  SafeSet: Set,
  SafeWeakRef: WeakRef,
  SetPrototypeAdd: uncurryThis(Set.prototype.add),
  SetPrototypeDelete: uncurryThis(Set.prototype.delete),
  SetPrototypeForEach: uncurryThis(Set.prototype.forEach),
  SetPrototypeGetSize: getter(Set.prototype, 'size'),
  SafeWeakMap: WeakMap,
  WeakMapPrototypeGet: uncurryThis(WeakMap.prototype.get),
  WeakMapPrototypeSet: uncurryThis(WeakMap.prototype.set),
  WeakMapPrototypeDelete: uncurryThis(WeakMap.prototype.delete),
  SafeWeakSet: WeakSet,
  WeakSetPrototypeAdd: uncurryThis(WeakSet.prototype.add),
  WeakSetPrototypeHas: uncurryThis(WeakSet.prototype.has),
  SymbolDispose: Symbol.dispose,
  SymbolAsyncDispose: Symbol.asyncDispose,
  SafeFinalizationRegistry: FinalizationRegistry,
  FinalizationRegistryPrototypeRegister: uncurryThis(FinalizationRegistry.prototype.register),
  FinalizationRegistryPrototypeUnregister: uncurryThis(FinalizationRegistry.prototype.unregister),
  domException,
  useDOMException,
  realmError,
  SafeTypeError,
  SafeRangeError,
  SafeBigInt: BigInt,
  nodeSignalPrototype,
  // Listens once to a signal's abort event in a way that another listener's
  // stopImmediatePropagation() cannot cancel; returns a disposable.
  addAbortListener,
  performanceNow: ReflectApply.bind(undefined, performance.now, performance, [])
}
