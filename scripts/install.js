#!/usr/bin/env node
'use strict'

// The package's install script. Where web-locks cannot run, it says so and
// fails, instead of starting a compiler that cannot build it; elsewhere it
// is node-gyp-build's: the prebuilt binary if one matches, else node-gyp.

const { unsupported } = require('../lib/platform.js')

const reason = unsupported(process.platform, process.arch)
if (reason !== null) {
  console.error(reason)
  process.exit(1)
}
require('node-gyp-build/bin.js')
