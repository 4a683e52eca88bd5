'use strict'

// The options of openLockManager(scope, { postgres }): where the scope's
// manager lives (its target), and the connections to it, with their
// settings.

const { SafeTypeError, SafeRangeError } = require('../intrinsics.js')
const { checkScope, openFailure: fail } = require('../options.js')

const DEFAULT_SCHEMA = 'web_locks'
const DEFAULT_KEEPALIVE_MS = 10000
const MIN_KEEPALIVE_MS = 300
const IDENTIFIER_MAX = 63
// The search_path of the session, the watcher and the schema's SQL: another
// role's functions and operators in a schema of the role's own path (public)
// cannot match a call there. The statements name every built-in with its
// schema anyway: a pool's connections have the path their user gave them.
const SEARCH_PATH = 'pg_catalog, pg_temp'
// PostgreSQL's SQLSTATE for a setting that the server does not have.
const UNDEFINED_SETTING = '42704'

function quoteIdentifier (name) {
  return `"${name.replace(/"/g, '""')}"`
}

// The schema's advisory key: the first half of its agents' life locks.
// FNV-1a of its UTF-8 bytes.
function schemaKey (schema) {
  let h = 0x811c9dc5
  for (const byte of Buffer.from(schema, 'utf8')) {
    h ^= byte
    h = Math.imul(h, 0x01000193) >>> 0
  }
  return (h & 0x7fffffff) || 1
}

// The connection settings of openLockManager's `postgres` option: a
// connection string, pg's config object, or a pg.Pool (then the calls go
// through it and the session and watcher use its settings). A pg.Client is
// one connection, which cannot be both the session and the watcher.
function toConnection (value) {
  if (typeof value === 'string') return { config: { connectionString: value }, pool: null }
  if (value !== null && typeof value === 'object') {
    if (typeof value.query === 'function' && typeof value.connect === 'function') {
      if (value.options === null || typeof value.options !== 'object') {
        throw new SafeTypeError(fail('the postgres option is a pg.Client, one connection: give its config object, or a pg.Pool.'))
      }
      return { config: settingsOf(value.options), pool: value }
    }
    return { config: settingsOf(value), pool: null }
  }
  throw new SafeTypeError(fail('the postgres option must be a connection string, a pg config object or a pg.Pool.'))
}

// A copy of connection settings with every property of their own, those
// that are not enumerable too: pg-pool keeps the password (a string, or a
// function that gives one) out of its options' enumerable properties, which
// a spread would drop. (pg hides it again in each client it makes.)
function settingsOf (options) {
  const config = {}
  for (const key of Object.getOwnPropertyNames(options)) config[key] = options[key]
  return config
}

function toKeepalive (value = DEFAULT_KEEPALIVE_MS) {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < MIN_KEEPALIVE_MS || value > 2 ** 31 - 1) {
    throw new SafeRangeError(fail(`the keepalive option must be a whole number of milliseconds from ${MIN_KEEPALIVE_MS}.`))
  }
  return value
}

// Where the scope's manager lives: { scope, schema, key, config, pool,
// keepalive }, from the options, whose `postgres` the caller has read.
// Throws a TypeError or RangeError for bad arguments.
function postgresTarget (scope, postgres, options) {
  checkScope(scope)
  const schema = toSchema(options.schema)
  const { config, pool } = toConnection(postgres)
  const keepalive = toKeepalive(options.keepalive)
  return { scope, schema, key: schemaKey(schema), config, pool, keepalive }
}

// A schema name: any identifier PostgreSQL takes (it is always quoted).
function toSchema (value = DEFAULT_SCHEMA) {
  if (typeof value !== 'string' || value.length === 0 || Buffer.byteLength(value) > IDENTIFIER_MAX || value.includes('\0')) {
    throw new SafeTypeError(`web-locks: the schema must be a name of 1 to ${IDENTIFIER_MAX} bytes.`)
  }
  return value
}

// A connection of its own to the target (Client: pg's).
function connection (target, Client) {
  const { config, keepalive } = target
  return new Client({ application_name: 'web-locks', connectionTimeoutMillis: keepalive, ...config, keepAlive: true })
}

// The server ends the session once it has said nothing for `keepalive`
// (PostgreSQL 14 and later; older servers rely on TCP keepalives), or
// been idle that long in a transaction (a migration's), gives
// up on an unanswered send as soon, and sees a closed connection during a
// long statement within a second. And the statements run at READ
// COMMITTED whatever the role's or the database's default: they rely on
// it (see readCommitted()); with the search_path of SEARCH_PATH.
async function configure (client, target) {
  const ms = target.keepalive
  const settings = [['search_path', SEARCH_PATH], ['default_transaction_isolation', 'read committed'],
    // And one idle in a transaction: a migration's, whose locks keep
    // every join of the schema waiting.
    ['idle_session_timeout', ms], ['idle_in_transaction_session_timeout', ms], ['tcp_user_timeout', ms],
    // A watcher whose process died stops waiting for its lock.
    ['client_connection_check_interval', Math.min(ms, 1000)],
    ['tcp_keepalives_idle', Math.max(1, Math.floor(ms / 2000))],
    ['tcp_keepalives_interval', Math.max(1, Math.floor(ms / 6000))], ['tcp_keepalives_count', 3]]
  for (const [name, value] of settings) {
    try {
      await client.query('SELECT pg_catalog.set_config($1, $2, false)', [name, String(value)])
    } catch (error) {
      if (error.code !== UNDEFINED_SETTING) throw error
    }
  }
}

// The statements rely on READ COMMITTED: a statement that waited for a
// name's row reads its newest version (at REPEATABLE READ it would fail
// with a serialization error: a release failing so ends the session). The
// session sets it; a pool's connections must have it.
async function readCommitted (pool) {
  const { rows } = await pool.query("SELECT pg_catalog.current_setting('transaction_isolation') AS level")
  if (rows[0].level !== 'read committed') {
    const error = new Error(`web-locks: the pool's connections run transactions at ${rows[0].level.toUpperCase()}; ` +
      'the lock manager\'s statements need READ COMMITTED (PostgreSQL\'s default): give a pool whose connections use it ' +
      '(default_transaction_isolation), or a connection string.')
    error.code = 'EISOLATION'
    throw error
  }
}

function loadPg () {
  try {
    return require('pg')
  } catch (error) {
    if (error !== null && typeof error === 'object' && error.code === 'MODULE_NOT_FOUND') {
      const missing = new Error("web-locks: the postgres option needs the 'pg' package: npm install pg")
      missing.code = 'MODULE_NOT_FOUND'
      throw missing
    }
    throw error
  }
}

module.exports = { SEARCH_PATH, quoteIdentifier, schemaKey, postgresTarget, toSchema, connection, configure, readCommitted, loadPg }
