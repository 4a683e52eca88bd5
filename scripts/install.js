#!/usr/bin/env node
'use strict'

// The package's install script. Where web-locks cannot run, it says so and
// fails, instead of starting a compiler that cannot build it; elsewhere it
// is node-gyp-build's: the prebuilt binary if one matches, else node-gyp.
// WEB_LOCKS_NO_MACHINE (any non-empty value) asks for the addon without the
// machine-wide manager, and WEB_LOCKS_OS=posix on Linux for the one that
// macOS has (its tests: npm run test:posix); no prebuilt binary is either:
// it is then compiled (binding.gyp reads them), and node-gyp-build loads
// that build before any prebuilt one.

const { unsupported, unbuildable, buildAskedBy } = require('../lib/platform.js')

const reason = unsupported(process.platform, process.arch) || unbuildable(process.platform, process.env)
if (reason !== null) {
  console.error(reason)
  process.exit(1)
}
if (buildAskedBy(process.env).length > 0) process.env.npm_config_build_from_source = 'true'
require('node-gyp-build/bin.js')
