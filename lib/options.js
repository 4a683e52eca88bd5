'use strict'

// What openLockManager's managers share of their arguments: the scope, the
// messages of their errors, and the options of this package's own API (not
// the spec's dictionaries, whose unknown members WebIDL ignores): a key that
// no option has is a TypeError that names it, so that a misspelt option
// (`dri` for `dir`) is not silently ignored. A new option goes in its
// manager's list here.

const { SafeTypeError } = require('./intrinsics.js')

const { keys: ObjectKeys } = Object

const SCOPE_MAX = 100

function openFailure (message) {
  return `Failed to execute 'openLockManager': ${message}`
}

// Letters, digits, '.', '_' and '-': a file name that cannot leave its
// directory once prefixed (even '..' becomes 'web-locks...'), and a key of
// the PostgreSQL manager's tables.
function checkScope (value) {
  if (typeof value === 'string' && value.length > 0 && value.length <= SCOPE_MAX) {
    let i = 0
    for (; i < value.length; i++) {
      const c = value[i]
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
        c === '.' || c === '_' || c === '-')) break
    }
    if (i === value.length) return
  }
  throw new SafeTypeError(openFailure(`the scope must be 1 to ${SCOPE_MAX} letters, digits, '.', '_' or '-'.`))
}

// Each list with its names joined once (no method of Array is called later:
// user code may have replaced them).
function optionList (...names) {
  return { names, text: names.join(', ') }
}

const MACHINE_OPTIONS = optionList('dir', 'mode', 'size')
const POSTGRES_OPTIONS = optionList('keepalive', 'postgres', 'schema')

function isKnown (known, name) {
  for (let i = 0; i < known.names.length; i++) {
    if (known.names[i] === name) return true
  }
  return false
}

// Throws a TypeError naming the first own enumerable key of `options` that
// is not in `known` (and not undefined); what is not an object is left to
// the options' reader.
function rejectUnknown (options, known, method, what) {
  if (options === null || (typeof options !== 'object' && typeof options !== 'function')) return
  const names = ObjectKeys(options)
  for (let i = 0; i < names.length; i++) {
    const name = names[i]
    // A member that is undefined is absent, as in a WebIDL dictionary.
    if (!isKnown(known, name) && options[name] !== undefined) {
      throw new SafeTypeError(`Failed to execute '${method}': '${name}' is not an option of ${what} (its options: ${known.text}).`)
    }
  }
}

module.exports = { MACHINE_OPTIONS, POSTGRES_OPTIONS, rejectUnknown, checkScope, openFailure }
