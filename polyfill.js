'use strict'
// require('web-locks/polyfill'), also for resolvers that ignore "exports".
module.exports = require('./lib/polyfill.js')
