'use strict'

// A look inside a scope of a PostgreSQL lock manager, for
// `npx web-locks inspect --postgres <url> --schema <name> <scope>`: its held
// locks and pending requests as a manager's details() gives them, and
// whether each entry's agent is alive. It changes nothing: no join, no
// migration, no sweep; one READ ONLY transaction, on one snapshot.

const { postgresTarget, quoteIdentifier, connection, loadPg, SEARCH_PATH } = require('./options.js')
const { LAYOUT, layoutOf } = require('./schema.js')
const { snapshotOf, detailedEntryOf } = require('./manager.js')

// { held, pending } of the scope in the schema (by default web_locks) of
// the database that `postgres` reaches (a connection string, pg's config
// object or a pg.Pool, as openLockManager's option). An agent is alive as
// the schema's sweep judges it (alive() in schema.sql): false for one whose
// session has ended but that no sweep has ended yet (its locks are still
// there until one does). Rejects with ENOENT where the schema has no lock
// manager, ELAYOUT where its layout is not this version's.
async function inspectPostgres ({ postgres, schema, scope }) {
  const target = postgresTarget(scope, postgres, { schema })
  const pg = loadPg()
  const { client, done } = await connect(target, pg)
  let failure
  try {
    return await look(client, target)
  } catch (error) {
    failure = error
    throw error
  } finally {
    await done(failure)
  }
}

// A connection of its own, or one of the pool's: { client, done(error) }.
async function connect (target, pg) {
  if (target.pool !== null) {
    const client = await target.pool.connect()
    // One that failed is not given back: its transaction may be open.
    return { client, done: async (error) => client.release(error) }
  }
  const client = connection(target, pg.Client)
  client.on('error', () => {})
  try {
    await client.connect()
  } catch (error) {
    await client.end().catch(() => {})
    throw error
  }
  return { client, done: () => client.end().catch(() => {}) }
}

async function look (client, { schema, scope }) {
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
  await client.query('SELECT pg_catalog.set_config(\'search_path\', $1, true)', [SEARCH_PATH])
  const layout = await layoutOf(client, schema)
  const q = quoteIdentifier(schema)
  if (layout === 0) {
    const error = new Error(`web-locks: the database has no lock manager in the schema ${q}.`)
    error.code = 'ENOENT'
    throw error
  }
  if (layout !== LAYOUT) {
    const error = new Error(`web-locks: the schema ${q} has layout ${layout}; this version of web-locks reads layout ${LAYOUT}.`)
    error.code = 'ELAYOUT'
    throw error
  }
  const { rows } = await client.query(`SELECT d.held, d.name, d.shared, d.client_id, d.serial, d.parent, d.client_pid,
      d.client_host, d.elapsed, ${q}.alive(d.agent) AS alive
    FROM ${q}.details($1) WITH ORDINALITY d ORDER BY d.ordinality`, [scope])
  await client.query('COMMIT')
  return snapshotOf(rows, (row) => {
    const entry = detailedEntryOf(row)
    entry.alive = row.alive
    return entry
  })
}

module.exports = { inspectPostgres }
