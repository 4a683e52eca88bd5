'use strict'

// The addon: its exports object is one per thread, however many times lib/
// is evaluated there (test runners with per-file module registries, or
// realms), so what every copy of lib/ on the thread shares lives on it.

const fs = require('fs')
const path = require('path')
const { randomUUID } = require('crypto')
const { SafeBigInt, SafeMap, SafeSet, SafeWeakSet } = require('./intrinsics.js')
const { unsupported } = require('./platform.js')
const { IO_ID, IO_EVENTS, IO_TOKEN_LO, IO_TOKEN_HI, EV_GRANTED } = require('./events.js')

// The addon's interface that this lib/ is written for (src/binding/module.c's
// WLB_ABI).
const ABI = 1

const binding = loadBinding(path.join(__dirname, '..'))

// This thread's requests of native managers, indexed by native id (small
// integers, reused), and the Uint32Array through which the binding passes
// numbers without making JS values: a native request's result (IO_RESULT,
// read by the backends), and the id and events of the delivery it
// dispatches (IO_ID, IO_EVENTS), with a grant's fencing token in two halves
// (IO_TOKEN_LO, IO_TOKEN_HI); the backends file requests in the table
// (manager-process.js). Without a prototype, no index setter of
// Array.prototype can intercept a store. The thread's clientId in the
// process-wide manager. What the polyfills of every copy
// installed (lib/install.js). And the thread's agents of machine-wide
// managers: their backends by file (index.js's openLockManager), so that
// every copy of lib/ on the thread opens a scope as one agent, and whether
// the thread is leaving them as its process exits (and the process objects
// whose exit it listens for).
if (!Object.hasOwn(binding, 'requests')) setUp()

module.exports = binding

// The addon: a prebuilt binary that matches, or the one built at install.
// Where there is neither, say what to do rather than node-gyp-build's bare
// "No native build was found".
function loadBinding (root) {
  // Deno's Node-API does not export every libuv function the addon uses
  // (loading it would end the process), and crashes in napi_make_callback
  // from a libuv callback, which is how every grant is delivered.
  if (process.versions.deno !== undefined) {
    const unsupported = new Error(`web-locks: Deno ${process.versions.deno} cannot run this addon: its Node-API lacks libuv functions ` +
      'the addon needs, and crashes when an addon calls back into JavaScript from the event loop. Use Node.js or Bun.')
    unsupported.code = 'ENOTSUP'
    throw unsupported
  }
  const reason = unsupported(process.platform, process.arch)
  if (reason !== null) {
    const error = new Error(reason)
    error.code = 'ENOTSUP'
    throw error
  }
  let addon
  try {
    addon = require('node-gyp-build')(root)
  } catch (error) {
    if (error === null || typeof error !== 'object' || !String(error.message).startsWith('No native build was found')) throw error
    let prebuilt = []
    try {
      prebuilt = fs.readdirSync(path.join(root, 'prebuilds'))
    } catch {}
    const missing = new Error(`web-locks: no native build for ${process.platform}-${process.arch} in ${root}. ` +
      `Prebuilt binaries come for ${prebuilt.length > 0 ? prebuilt.join(', ') : 'no platform in this copy'}; ` +
      'elsewhere the addon is compiled when the package is installed, which needs a C compiler, make and Python ' +
      "(node-gyp's requirements). Install them, then run: npm rebuild web-locks " +
      "(where your project's allowScripts denies web-locks, allow it first: npm install-scripts approve web-locks)")
    missing.code = 'ENOBUILD'
    missing.cause = error
    throw missing
  }
  // A build of another version of the package (left in build/ by another
  // checkout, or a prebuild not rebuilt), which node-gyp-build may load
  // before the right one, would read requests another way. A plain `npm
  // rebuild` keeps a prebuild that loads (node-gyp-build tests only that),
  // and a process keeps the build it loaded first, even once replaced.
  if (addon.abi !== ABI) {
    let file = root
    try {
      file = require('node-gyp-build').resolve(root)
    } catch {}
    const other = new Error(`web-locks: the native build ${file} is of another version of web-locks ` +
      `(its interface ${addon.abi === undefined ? 'has no number' : `is ${addon.abi}`}; this copy's lib/ needs ${ABI}). ` +
      'Rebuild it: npm rebuild web-locks --build-from-source (in a checkout of web-locks: npm run build); ' +
      'a process that loaded it keeps it until it restarts')
    other.code = 'ENOBUILD'
    throw other
  }
  return addon
}

function setUp () {
  const table = []
  Object.setPrototypeOf(table, null)
  const clientId = randomUUID()
  const io = binding.setup(function dispatch () {
    const request = table[io[IO_ID]]
    if (request === undefined) return
    const events = io[IO_EVENTS]
    if (events & EV_GRANTED) {
      // Below 2 ** 32 (the first 4 billion grants of the manager), the low
      // half alone: no arithmetic.
      const hi = io[IO_TOKEN_HI]
      request.token = hi === 0 ? io[IO_TOKEN_LO] : wideToken(hi, io[IO_TOKEN_LO])
    }
    request.deliver(events)
  }, clientId, process.versions.bun === undefined)
  // A Number while exact (below 2 ** 53), else a BigInt.
  function wideToken (hi, lo) {
    return hi < 0x200000 ? hi * 0x100000000 + lo : (SafeBigInt(hi) << 32n) + SafeBigInt(lo)
  }
  Object.defineProperty(binding, 'io', { value: io })
  Object.defineProperty(binding, 'clientId', { value: clientId })
  Object.defineProperty(binding, 'requests', { value: table })
  Object.defineProperty(binding, 'polyfilled', { value: new SafeWeakSet() })
  Object.defineProperty(binding, 'scopes', { value: { open: new SafeMap(), exiting: false, exitHeard: new SafeWeakSet() } })
  // The process-wide manager's agent of the thread, which every copy's
  // backend shares (manager-process.js), and the watch for deadlocks'
  // state (deadlock.js), whose looks run on the binding's timer.
  Object.defineProperty(binding, 'processAgent', { value: { closed: false, clientId, scope: undefined, handle: undefined, file: undefined } })
  // (A literal with a prototype: V8 makes one without in dictionary mode,
  // whose reads cost a hash lookup, and one is read for every request. Every
  // field is its own, so none is looked up on Object.prototype.)
  const deadlocks = { watches: new SafeSet(), published: new SafeMap(), rejecting: 0, frames: undefined, tick: undefined }
  Object.defineProperty(binding, 'deadlocks', { value: deadlocks })
  binding.setTick(function tick () { deadlocks.tick() })
}
