'use strict'

// Installs navigator.locks, with the LockManager and Lock globals, where the
// platform has none: none is there, or it is null (a DOM environment's
// getter may say so: happy-dom's). A platform implementation is never
// replaced (check
// `installed`, or use require('web-locks').locks directly to choose ours), and
// then the globals are left alone too, so that navigator.locks is never an
// instance of a LockManager other than the global one.

const { locks, LockManager, Lock } = require('./index.js')

function define (object, name, value, enumerable) {
  Object.defineProperty(object, name, { value, writable: true, configurable: true, enumerable })
}

if (typeof globalThis.navigator !== 'object' || globalThis.navigator === null) {
  define(globalThis, 'navigator', {}, false)
}
function missing (navigator) {
  if (!('locks' in navigator)) return true
  try {
    return navigator.locks === null || navigator.locks === undefined
  } catch {
    return false // a getter that throws is someone's: left alone
  }
}

const installed = missing(globalThis.navigator)
if (installed) {
  define(globalThis.navigator, 'locks', locks, true)
  if (!('LockManager' in globalThis)) define(globalThis, 'LockManager', LockManager, false)
  if (!('Lock' in globalThis)) define(globalThis, 'Lock', Lock, false)
}

module.exports = { installed }
