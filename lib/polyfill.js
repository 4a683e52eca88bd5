'use strict'

// Installs navigator.locks (and the LockManager and Lock globals) where the
// platform has none. A platform implementation is never replaced: check
// `installed`, or use require('web-locks').locks directly to choose ours.

const { locks, LockManager, Lock } = require('./index.js')

function define (object, name, value, enumerable) {
  Object.defineProperty(object, name, { value, writable: true, configurable: true, enumerable })
}

if (typeof globalThis.navigator !== 'object' || globalThis.navigator === null) {
  define(globalThis, 'navigator', {}, false)
}
const installed = !('locks' in globalThis.navigator)
if (installed) define(globalThis.navigator, 'locks', locks, true)
if (!('LockManager' in globalThis)) define(globalThis, 'LockManager', LockManager, false)
if (!('Lock' in globalThis)) define(globalThis, 'Lock', Lock, false)

module.exports = { installed }
