'use strict'

// The machine-wide lock manager behind openLockManager(scope): the core's
// state in a file (by default in /dev/shm, on macOS /var/tmp, on Windows
// %LOCALAPPDATA%) that every process opening the scope maps. The file is
// created on first use; the binding maps it once per process, and each
// thread that opens it is one agent. Linux, macOS and Windows.

const path = require('path')
const { randomUUID } = require('crypto')
const { domException, realmError, SafeTypeError, SafeRangeError } = require('./intrinsics.js')
const { agentOf, nativeBackend } = require('./manager-process.js')
const { checkScope, openFailure } = require('./options.js')

const DEFAULT_SIZE = 16 * 1024 * 1024
const DEFAULT_MODE = 0o600
const PAGE = 4096
const MIN_SIZE = 2 * PAGE
const MAX_SIZE = 2 ** 40

// What in a string that reaches C as a path would make C name another file
// than the one asked for: a NUL ends it there (Node's fs refuses such a path
// with a TypeError too), and a lone surrogate becomes U+FFFD. Or null.
function misreadInC (value) {
  for (let i = 0; i < value.length; i++) {
    const c = value[i]
    if (c === '\0') return 'null bytes'
    if (c >= '\uD800' && c <= '\uDBFF' && i + 1 < value.length && value[i + 1] >= '\uDC00' && value[i + 1] <= '\uDFFF') {
      i++
    } else if (c >= '\uD800' && c <= '\uDFFF') {
      return 'a lone surrogate (it is not well-formed UTF-16)'
    }
  }
  return null
}

// Where a scope's file goes unless `dir` says: a directory that every
// user's processes share: /dev/shm on Linux (memory, not disk); on macOS,
// which has no /dev/shm and whose $TMPDIR is one user's, /var/tmp, sticky,
// which its daily clean-up leaves alone (it empties /tmp of files not
// touched for days, which a mapped scope's file may well be: a new file at
// the path would be a second manager of the scope). On Windows, which has
// no permission bits, the user's own %LOCALAPPDATA%, which no other user
// can read or write, and no clean-up empties (src/os/win/machine.h): a
// scope there is its user's. Without it, none (null): no other directory is
// known to be the user's own there (os.tmpdir() is whatever %TEMP% says, and
// without it %SystemRoot%\temp, which every user may write).
function defaultDir (platform = process.platform, env = process.env) {
  if (platform === 'win32') return env.LOCALAPPDATA || null
  return platform === 'darwin' ? '/var/tmp' : '/dev/shm'
}

// The default directory, or a TypeError saying that `dir` is needed.
function homeDir () {
  const home = defaultDir()
  if (home === null) {
    throw new SafeTypeError(openFailure('%LOCALAPPDATA% is not set, and no other directory is known to be this user\'s own on Windows: ' +
      'give the dir option (a directory that only this user may write).'))
  }
  return home
}

// The options of openLockManager(scope, options), read once each.
// The permission bits a scope's file may have: read and write for its
// owner, and for its group and for others both or neither (the C side
// checks the same: WL__MODE_OK in src/os/machine.h).
function modeOk (mode) {
  return mode >= 0 && mode <= 0o666 && (mode & ~0o666) === 0 && (mode & 0o600) === 0o600 && (mode & 0o060) % 0o060 === 0 && (mode & 0o006) % 0o006 === 0
}

function toMachineOptions (options) {
  if (options === undefined || options === null) return { dir: homeDir(), size: DEFAULT_SIZE, mode: DEFAULT_MODE }
  if (typeof options !== 'object' && typeof options !== 'function') {
    throw new SafeTypeError(openFailure('the options must be an object.'))
  }
  const { dir = homeDir(), size = DEFAULT_SIZE, mode = DEFAULT_MODE } = options
  if (typeof dir !== 'string' || dir.length === 0) throw new SafeTypeError(openFailure('the dir option must be a non-empty string.'))
  const misread = misreadInC(dir)
  if (misread !== null) throw new SafeTypeError(openFailure(`the dir option must not contain ${misread}.`))
  if (typeof size !== 'number' || !Number.isInteger(size) || size < MIN_SIZE || size > MAX_SIZE || size % PAGE !== 0) {
    throw new SafeRangeError(openFailure(`the size option must be a whole number of ${PAGE}-byte pages from ${MIN_SIZE} to ${MAX_SIZE}.`))
  }
  if (typeof mode !== 'number' || !Number.isInteger(mode) || !modeOk(mode)) {
    throw new SafeRangeError(openFailure('the mode option must be 0o600, 0o660, 0o606 or 0o666: read and write for the owner, ' +
      'and for the group and for others both or neither (a user who may only read the file, or only write it, could hold its locks ' +
      'and stall every process of the scope).'))
  }
  return { dir, size, mode }
}

function quotaExceeded (file) {
  return domException(`The lock manager in ${file} is full.`, 'QuotaExceededError')
}

function corruptError (file) {
  const error = new Error(`web-locks: the lock manager in ${file} is corrupt; remove the file once no process uses it.`)
  error.code = 'ECORRUPT'
  return error
}

// This copy's backend (see manager-process.js) for the thread's agent of
// the manager in agent.file, which every copy of lib/ on the thread shares
// (openMachine); its errors are made in this copy's realm.
function machineBackend (binding, agent) {
  const { scopeRequest, release, abort, scopeQuery, scopeDetails, close } = binding
  const { handle, file } = agent
  const backend = nativeBackend(binding, {
    request: (name, how) => scopeRequest(handle, name, how),
    release,
    abort,
    query: () => scopeQuery(handle),
    details: () => scopeDetails(handle),
    close: () => close(handle),
    translate (error) {
      if (error !== null && typeof error === 'object' && error.code === 'ENOMEM') return quotaExceeded(file)
      if (error !== null && typeof error === 'object' && error.code === 'ECORRUPT') return corruptError(file)
      return realmError(error)
    }
  }, agent, 'machine')
  backend.file = file
  backend.failure = () => corruptError(file)
  return backend
}

// Where the scope's manager lives, and how to create it: { scope, file,
// size, mode }. Throws a TypeError or RangeError for bad arguments.
function machineTarget (scope, options) {
  checkScope(scope)
  const { dir, size, mode } = toMachineOptions(options)
  return { scope, file: path.join(path.resolve(dir), `web-locks.${scope}`), size, mode }
}

// Opens this thread's agent of the manager in target.file (see agentOf),
// for machineBackend. Throws an Error
// whose code says what is wrong with the file and whose message names it,
// or a NotSupportedError from a build without the machine-wide manager (any
// platform but Linux, macOS and Windows, or WEB_LOCKS_NO_MACHINE at install:
// binding.gyp).
function openMachine (binding, { scope, file, size, mode }) {
  if (typeof binding.open !== 'function') {
    // On Linux, macOS and Windows, only a build asked for without it lacks it.
    const why = ['linux', 'darwin', 'win32'].includes(process.platform)
      ? 'it was built with WEB_LOCKS_NO_MACHINE set; to have it, remove node_modules/web-locks/build and, without that variable, run: npm rebuild web-locks'
      : 'it needs Linux, macOS or Windows'
    throw domException(openFailure(`this build of web-locks has no machine-wide lock manager (${why}).`), 'NotSupportedError')
  }
  // Bun's loop cannot poll a descriptor; the thread that polls for it
  // (src/binding/waker-linux.c) waits with epoll, which only Linux has.
  if (process.versions.bun !== undefined && process.platform !== 'linux') {
    throw domException(openFailure('under Bun, the machine-wide lock manager runs on Linux only.'), 'NotSupportedError')
  }
  const clientId = randomUUID()
  let handle
  try {
    // Whether the thread's loop can poll the agent's FIFO, through which
    // other processes wake it: Bun aborts the process when an addon polls a
    // descriptor (uv_poll_init), and a thread of the binding's polls them
    // there (src/binding/waker-linux.c).
    handle = binding.open(file, size, mode, clientId, process.versions.bun === undefined)
  } catch (error) {
    throw realmError(error, 'web-locks: ')
  }
  return agentOf(clientId, scope, handle, file)
}

// Whether this thread's agent, opened before, may serve an open with
// target.mode too: a private open never trusts another user's file because
// a shared open came first. Throws as openMachine does.
function admitMachine (binding, agent, { mode }) {
  try {
    binding.admit(agent.handle, mode)
  } catch (error) {
    throw realmError(error, 'web-locks: ')
  }
}

module.exports = { machineTarget, openMachine, admitMachine, machineBackend, defaultDir }
