'use strict'

// Installs navigator.locks, with the LockManager and Lock globals, where the
// platform has none: none is there, or it is null (a DOM environment's
// getter may say so: happy-dom's). A platform implementation is never
// replaced (check `installed`, use require('web-locks').locks directly, or
// load web-locks/polyfill/force), and then the globals are left alone too,
// so that navigator.locks is never an instance of a LockManager other than
// the global one.
//
// What another copy of this package installed is replaced: a test runner
// may evaluate the package once per test file, each in a realm of its own,
// and give them all one navigator (jest's node environment on Node 22+).
// Each realm gets a manager whose promises, errors and classes are its own.

const install = require('./install.js')

module.exports = { installed: install(false) }
