'use strict'

// A look inside a scope, for `npx web-locks inspect` (bin/web-locks.js):
// who holds each name, who waits for it in queue order, since when, and
// whether their processes are alive. It changes nothing: a machine-wide
// scope's file is read under its mutex without joining it (the binding's
// peek(), wl_scope_peek in src/core/scope.c: no owner record, no sweep, no
// repair), a PostgreSQL scope in one read-only transaction
// (lib/postgres/inspect.js).
//
// The document (what --json prints):
//   { scope, file | schema, host, at, held, pending, cycles }
// held and pending as a manager's details() gives them, each name's
// pending entries in queue order: { name, mode,
// clientId, serial, parent, pid, host, elapsed (ms, or null), alive
// (false: its process died and no sweep has ended its agents yet) }; at:
// when the look was taken (ISO 8601); cycles: see findCycles.

const os = require('os')
const { machineTarget } = require('./manager-machine.js')
const { findDeadlocks } = require('./deadlock.js')

// How long a look waits for a scope's mutex that another process holds.
const WAIT_MS = 5000

// An Error with a code, whose message the command prints as it is.
function failure (code, message) {
  const error = new Error(message)
  error.code = code
  return error
}

// The cycles of waits among the entries (lib/deadlock.js): each a list of
// its pending requests, { name, mode, clientId, waitsFor, serial, pid, host }.
// Only requests made by threads that watched for deadlocks carry the lock
// inside whose callback they were made (README, "Deadlocks, found and
// named"), so only their cycles are seen.
function findCycles (snapshot) {
  const byKey = new Map()
  for (const e of snapshot.pending) byKey.set(`${e.clientId}\n${e.serial}`, e)
  return findDeadlocks(snapshot).map(({ cycle, requests }) => cycle.map((step, k) => {
    const e = byKey.get(`${requests[k].clientId}\n${requests[k].serial}`)
    return { ...step, serial: e.serial, pid: e.pid, host: e.host }
  }))
}

// The binding's look at the file of a machine-wide scope, or an Error
// saying why there is none here.
function peekMachine (file, mode) {
  const binding = require('./binding.js')
  if (typeof binding.peek !== 'function') {
    throw failure('ENOTSUP', 'web-locks inspect: this build of web-locks has no machine-wide lock manager to look inside ' +
      '(a PostgreSQL scope can be inspected: --postgres <url>).')
  }
  return binding.peek(file, mode, WAIT_MS)
}

// The document of a machine-wide scope: options as openLockManager's
// (dir, mode), so that the file is the one openLockManager(scope, options)
// opens.
function inspectMachine (scope, { dir, mode = 0o600 } = {}) {
  const { file } = machineTarget(scope, { dir, mode })
  let snapshot
  try {
    snapshot = peekMachine(file, mode)
  } catch (error) {
    if (error !== null && typeof error === 'object' && error.code === 'ENOENT') {
      throw failure('ENOENT', `web-locks inspect: no scope "${scope}" at ${file} (no process has opened it there; ` +
        'another directory is given with --dir)')
    }
    throw error
  }
  const host = os.hostname()
  const entry = (e) => ({ ...e, host })
  return document({ scope, file }, host, snapshot.held.map(entry), snapshot.pending.map(entry))
}

// The document of a PostgreSQL scope (lib/postgres/inspect.js).
async function inspectPostgres (scope, { postgres, schema }) {
  const { inspectPostgres } = require('./postgres/inspect.js')
  const snapshot = await inspectPostgres({ postgres, schema, scope })
  return document({ scope, schema: schema === undefined ? 'web_locks' : schema }, null, snapshot.held, snapshot.pending)
}

function document (where, host, held, pending) {
  const snapshot = { held, pending }
  return { ...where, host, at: new Date().toISOString(), held, pending, cycles: findCycles(snapshot) }
}

// "1.2 s", "45 s", "3 min 4 s", "2 h 5 min", from milliseconds.
function duration (ms) {
  if (ms < 1000) return `${Math.round(ms)} ms`
  const s = ms / 1000
  if (s < 10) return `${s.toFixed(1)} s`
  if (s < 60) return `${Math.floor(s)} s`
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.floor(s % 60)} s`
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`
}

// Text from the file or the database as the terminal may print it: any
// user who can write a scope writes its clientIds (and a PostgreSQL
// client its host), and control characters or bidirectional marks would
// reach the terminal (escape sequences) or reorder the line.
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g
function printable (text) {
  return String(text).replace(UNPRINTABLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

function describe (entry) {
  const parts = [entry.mode.padEnd(9), `client ${printable(entry.clientId)}`, `pid ${entry.pid}`]
  if (entry.host !== undefined && entry.host !== null) parts.push(`on ${printable(entry.host)}`)
  if (entry.elapsed !== null && entry.elapsed !== undefined) parts.push(`for ${duration(entry.elapsed)}`)
  if (entry.alive === false) parts.push('dead (not yet swept)')
  return parts.join('  ')
}

// The text form: per name (sorted, so that --watch keeps each in its
// place), its holders, then its waiters in queue order.
function formatText (doc) {
  const where = doc.file !== undefined ? doc.file : `schema ${doc.schema}`
  const lines = [`scope ${printable(JSON.stringify(doc.scope))} (${printable(where)})${doc.host !== null ? ` on ${printable(doc.host)}` : ''}, at ${doc.at}`]
  const names = new Map()
  const of = (name) => {
    if (!names.has(name)) names.set(name, { held: [], pending: [] })
    return names.get(name)
  }
  for (const e of doc.held) of(e.name).held.push(e)
  for (const e of doc.pending) of(e.name).pending.push(e)
  if (names.size === 0) lines.push('no lock held, no request waiting')
  for (const name of [...names.keys()].sort()) {
    const { held, pending } = names.get(name)
    lines.push('', printable(JSON.stringify(name)))
    for (const e of held) lines.push(`  held by   ${describe(e)}`)
    pending.forEach((e, i) => lines.push(`  waiting ${String(i + 1).padEnd(2)}${describe(e)}`))
  }
  for (const cycle of doc.cycles) {
    lines.push('', `deadlock: ${cycle.map((e) => `${printable(JSON.stringify(e.name))} (${e.mode}) by client ${printable(e.clientId)} (pid ${e.pid}) waits for ${printable(e.waitsFor)}`).join('; ')}`)
  }
  return lines.join('\n') + '\n'
}

module.exports = { inspectMachine, inspectPostgres, formatText, findCycles, duration, WAIT_MS }
