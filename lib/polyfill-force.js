'use strict'

// web-locks/polyfill/force: as web-locks/polyfill, but replaces a platform's
// navigator.locks too (Node 24+ has an experimental one), with the
// LockManager and Lock globals to match.

const install = require('./install.js')

module.exports = { installed: install(true) }
