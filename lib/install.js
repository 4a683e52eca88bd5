'use strict'

// What web-locks/polyfill and web-locks/polyfill/force do, in the realm that
// loads them.

const binding = require('./binding.js')
const { locks, LockManager, Lock } = require('./index.js')
const { useDOMException, WeakSetPrototypeAdd, WeakSetPrototypeHas } = require('./intrinsics.js')

function define (object, name, value, enumerable) {
  Object.defineProperty(object, name, { value, writable: true, configurable: true, enumerable })
}

// Whether navigator.locks is absent, null, or put there by a polyfill of
// this package (in any realm of this thread).
function replaceable (navigator) {
  try {
    if (!('locks' in navigator)) return true
    const current = navigator.locks
    return current === null || current === undefined || WeakSetPrototypeHas(binding.polyfilled, current)
  } catch {
    return false // a getter that throws is someone's: left alone
  }
}

// A global that is missing, or a class a polyfill of this package defined.
function defineClass (name, Class, force) {
  if (force || !(name in globalThis) || WeakSetPrototypeHas(binding.polyfilled, globalThis[name])) {
    define(globalThis, name, Class, false)
    WeakSetPrototypeAdd(binding.polyfilled, Class)
  }
}

module.exports = function install (force) {
  // The errors this copy makes are this realm's DOMExceptions (jsdom's or
  // happy-dom's in a DOM environment), whatever the global is later.
  let Class
  try {
    Class = globalThis.DOMException
  } catch {} // a getter that throws: Node's DOMException
  useDOMException(Class)
  let navigator
  try {
    navigator = globalThis.navigator
  } catch {
    return false // a getter that throws is someone's: left alone
  }
  if (typeof navigator !== 'object' || navigator === null) {
    navigator = {}
    define(globalThis, 'navigator', navigator, false)
  }
  if (!force && !replaceable(navigator)) return false
  define(navigator, 'locks', locks, true)
  WeakSetPrototypeAdd(binding.polyfilled, locks)
  defineClass('LockManager', LockManager, force)
  defineClass('Lock', Lock, force)
  return true
}
