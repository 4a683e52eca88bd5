'use strict'
// require('web-locks/polyfill/force'), also for resolvers that ignore "exports".
module.exports = require('../lib/polyfill-force.js')
