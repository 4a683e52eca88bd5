'use strict'

// The schema of a PostgreSQL lock manager: its tables, made and changed by
// the numbered migrations (migrations/NNN-*.sql), and its functions
// (schema.sql), which run the spec's algorithms; made or migrated on a
// session's first join.

const fs = require('fs')
const path = require('path')
const { SafeRangeError } = require('../intrinsics.js')
const { SEARCH_PATH, quoteIdentifier, schemaKey, toSchema } = require('./options.js')

// The number of the last migration (migrations/).
const LAYOUT = 5
// PostgreSQL's SQLSTATEs that this file acts on.
const INSUFFICIENT_PRIVILEGE = '42501'
// What a creation of the schema meets when another one was made at the same
// moment (the second waits for the first's catalog rows, then fails), and a
// deadlock with an older version's migration: look at the layout again.
const MADE_MEANWHILE = new Set(['23505', '42P06', '42P07', '42710', '42723', '40P01'])
const ENSURE_TRIES = 3

// A dollar-quote tag that the text does not contain, so that it cannot
// end a string quoted with it.
function dollarTag (text, base) {
  let tag = `$${base}$`
  for (let i = 0; text.includes(tag); i++) tag = `$${base}${i}$`
  return tag
}

// The SQL that takes a schema from layout `from` (0: none) to `to` (by
// default this version's): the migrations in between
// (migrations/NNN-*.sql takes it to layout NNN), then, at this
// version's layout, the functions re-created (schema.sql). Run as
// one query, it is one transaction, with the search_path of SEARCH_PATH.
// The name is in it as a quoted identifier, also inside function bodies and
// the names of sequences given as strings ('@schema@.tokens'): these are
// dollar-quoted with tags that the name does not contain, so that no quote
// or dollar in a name ends them.
function schemaSQL (value, from = 0, to = LAYOUT) {
  const schema = toSchema(value)
  if (!Number.isInteger(from) || from < 0 || from > to || !Number.isInteger(to) || to > LAYOUT) {
    throw new SafeRangeError(`web-locks: layouts go from 0 to ${LAYOUT}.`)
  }
  const name = quoteIdentifier(schema)
  const body = dollarTag(name, 'body')
  const string = dollarTag(name, 'name')
  const dir = path.join(__dirname, 'migrations')
  const parts = [`SELECT pg_catalog.set_config('search_path', '${SEARCH_PATH}', true);\n`]
  for (const file of fs.readdirSync(dir).sort()) {
    const layout = Number(file.slice(0, 3))
    if (layout > from && layout <= to) parts.push(fs.readFileSync(path.join(dir, file), 'utf8'))
  }
  if (to === LAYOUT) parts.push(fs.readFileSync(path.join(__dirname, 'schema.sql'), 'utf8'))
  const text = parts.join('\n')
  // (Replaced by functions: a replacement string would read '$$' in them.)
  return text.replaceAll('$$', () => body)
    .replace(/'@schema@\.(\w+)'/g, (_, object) => `${string}${name}.${object}${string}`)
    .replaceAll('@schema@', () => name).replaceAll('@key@', () => String(schemaKey(schema)))
}

// What to grant, in SQL, where the role may not create or use the schema,
// or what to run where it may not migrate it from `layout` (its owner can).
async function privilegeError (client, schema, layout, cause) {
  let role = 'the role'
  let database = 'the database'
  try {
    const { rows } = await client.query('SELECT pg_catalog.quote_ident(current_user) AS role, pg_catalog.quote_ident(pg_catalog.current_database()) AS database')
    role = rows[0].role
    database = rows[0].database
  } catch {}
  const q = quoteIdentifier(schema)
  if (layout > 0) {
    const error = new Error(`web-locks: the schema ${q} has layout ${layout}, which ${role} may not migrate to layout ${LAYOUT} ` +
      `(${cause.message}): have its owner open a lock manager on it once, or run the SQL of ` +
      `require('web-locks').postgresSchema(${JSON.stringify(schema)}, ${layout}).`)
    error.code = 'EACCES'
    error.cause = cause
    return error
  }
  const error = new Error(`web-locks: ${role} may not create or use the schema ${q} (${cause.message}). ` +
    `Either GRANT CREATE ON DATABASE ${database} TO ${role}; or have the database's owner run the SQL of ` +
    `require('web-locks').postgresSchema(${JSON.stringify(schema)}) and then GRANT USAGE ON SCHEMA ${q} TO ${role}; ` +
    `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${q} TO ${role}; ` +
    `GRANT USAGE, UPDATE ON ALL SEQUENCES IN SCHEMA ${q} TO ${role};`)
  error.code = 'EACCES'
  error.cause = cause
  return error
}

// The schema's layout, 0 if it has none yet.
async function layoutOf (client, schema) {
  const { rows } = await client.query('SELECT pg_catalog.to_regclass(pg_catalog.format(\'%I.meta\', $1::pg_catalog.text)) IS NOT NULL AS present', [schema])
  if (!rows[0].present) return 0
  const meta = await client.query(`SELECT value FROM ${quoteIdentifier(schema)}.meta WHERE key OPERATOR(pg_catalog.=) 'layout'`)
  return meta.rows.length === 0 ? 0 : Number(meta.rows[0].value)
}

// Creates or migrates the schema from `layout` (what layoutOf() read), once,
// whoever else is starting, under no lock that a role without rights on the
// schema could take (an advisory lock, which any role can hold, would keep
// every opener waiting). Made from nothing as one transaction: of two at
// once, the second fails on a duplicate in the catalog, and ensureSchema()
// looks again. Migrated in a transaction that locks the layout's row of
// meta first, which only roles that may update the schema's tables can,
// and reads the layout there, in its newest version; then the agents
// table, as join() does, so that no agent joins meanwhile.
async function migrate (client, target, layout) {
  if (layout === 0) {
    await client.query(schemaSQL(target.schema))
    return LAYOUT
  }
  const q = quoteIdentifier(target.schema)
  await client.query('BEGIN')
  try {
    const { rows } = await client.query(`SELECT value FROM ${q}.meta WHERE key OPERATOR(pg_catalog.=) 'layout' FOR UPDATE`)
    const now = rows.length === 0 ? 0 : Number(rows[0].value)
    if (now < LAYOUT) {
      await client.query(`LOCK TABLE ${q}.agents IN SHARE UPDATE EXCLUSIVE MODE`)
      await client.query(schemaSQL(target.schema, now))
    }
    await client.query('COMMIT')
    return Math.max(now, LAYOUT)
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {})
    throw error
  }
}

async function ensureSchema (client, target) {
  let layout = 0
  for (let tries = 1; ; tries++) {
    try {
      layout = await layoutOf(client, target.schema)
      if (layout < LAYOUT) layout = await migrate(client, target, layout)
      break
    } catch (error) {
      if (error.code === INSUFFICIENT_PRIVILEGE) throw await privilegeError(client, target.schema, layout, error)
      if (!MADE_MEANWHILE.has(error.code) || tries === ENSURE_TRIES) throw error
    }
  }
  if (layout !== LAYOUT) {
    const error = new Error(`web-locks: the schema ${quoteIdentifier(target.schema)} has layout ${layout}; this version of web-locks uses layout ${LAYOUT}.`)
    error.code = 'ELAYOUT'
    throw error
  }
}

module.exports = { LAYOUT, dollarTag, schemaSQL, layoutOf, ensureSchema }
