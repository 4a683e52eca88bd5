'use strict'

// The options of this package's own API (not the spec's dictionaries, whose
// unknown members WebIDL ignores): a key that no option has is a TypeError
// that names it, so that a misspelt option (`dri` for `dir`) is not
// silently ignored. A new option goes in its manager's list here.

const { SafeTypeError } = require('./intrinsics.js')

const { keys: ObjectKeys } = Object

// Each list with its names joined once (no method of Array is called later:
// user code may have replaced them).
function optionList (...names) {
  return { names, text: names.join(', ') }
}

const HOST_OPTIONS = optionList('dir', 'mode', 'size')
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

module.exports = { HOST_OPTIONS, POSTGRES_OPTIONS, rejectUnknown }
