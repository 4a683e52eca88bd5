'use strict'

// The statements of a PostgreSQL lock manager's calls (the functions they
// call are in schema.sql): every object named with its schema, every value
// a parameter.

const { quoteIdentifier } = require('./options.js')
const { dollarTag } = require('./schema.js')

const BACKEND_PID = 'SELECT pg_catalog.pg_backend_pid() AS pid'

// The SQL of each call, with a statement name that is the schema's own, so
// that each connection prepares it once. Join and leave, once per agent,
// are not prepared: behind a pooler that passed checkOwnSession(), the same
// name prepared by another client on that server connection would refuse
// them (42P05), and the agent could not leave.
//
// A request on a free name, and its release, are each one update of the
// name's row (see names in schema.sql), made by the statement
// itself: as the call of a function, the update would start an executor
// of its own besides the statement's, and cost a fifth more of the server's
// time (measured with pgbench). The request statement hands a request that
// waits to queue(), one statement, and everything else to request()
// (COALESCE calls each only if what comes before it did nothing); the
// release statement processes the queue only if it has to.
//
// Built-in functions and operators are named with their schema: through a
// pool the statements run with whatever search_path the connection has,
// and another role's public.nextval(text) would match nextval('...') better
// than pg_catalog's, and run with this role's rights.
function statements (target) {
  const q = quoteIdentifier(target.schema)
  const named = (name, text) => ({ name: `web_locks_${target.key}_${name}`, text })
  const tag = dollarTag(q, 'name')
  const tokens = `${tag}${q}.tokens${tag}`
  const op = (operator) => `OPERATOR(pg_catalog.${operator})`
  return {
    // $1 scope, $2 clientId, $3 channel, $4 and $5 the client process's
    // pid and host.
    join: { text: `SELECT ${q}.join($1, $2, $3, $4, $5) AS agent, pg_catalog.pg_backend_pid() AS pid, (SELECT ceiling FROM ${q}.token_block) AS ceiling` },
    // $1 agent, $2 local id, $3 scope, $4 name, $5 shared, $6 ifAvailable,
    // $7 steal, $8 pooled, $9 the ceiling of the tokens that the session
    // last saw (it only goes up): a token below it needs no more, else
    // token_ceiling() raises it if it has to and says where it is now; $10
    // the local id of its parent, or 0 (see request() in schema.sql). The
    // token is drawn for the row's newest version: if another transaction
    // changed it, PostgreSQL evaluates the update again on that version, so
    // it follows the release before it. The hold's parent and start are
    // two more columns of the same update (details()).
    //
    // Else queue() queues it if the name's row says it waits (its update is
    // checked on the newest version of the row too, and its statement runs
    // after this one's update found the name not free: of the two, one is
    // made or neither, and then request() locks the row and decides).
    request: named('request', `WITH taken AS (
        UPDATE ${q}.names SET held = 1, exclusive = NOT $5, holder_agent = $1, holder_local = $2,
            holder_token = pg_catalog.nextval(${tokens}), holder_shared = $5, holder_parent = $10, holder_since = pg_catalog.now()
          WHERE scope ${op('=')} $3 AND digest ${op('=')} pg_catalog.sha256($4) AND held ${op('=')} 0 AND queued ${op('=')} 0
            AND NOT $7 AND NOT $8
          RETURNING holder_token, id)
      SELECT coalesce(t.holder_token,
            CASE WHEN NOT $6 AND NOT $7 AND NOT $8 THEN ${q}.queue($1, $2, $3, $4, $5, $10) END,
            ${q}.request($1, $2, $3, $4, $5, $6, $7, $8, $10)) AS token, t.id AS in_row,
          CASE WHEN t.holder_token ${op('>=')} $9 THEN ${q}.token_ceiling(t.holder_token) END AS ceiling
        FROM (SELECT) one LEFT JOIN taken t ON true`),
    // $1 agent, $2 local id, $3 the name's id: a lock held in its row.
    // Nothing is granted while locks are held (shared ones beside it).
    releaseRow: named('release_row', `WITH freed AS (
        UPDATE ${q}.names SET held = held ${op('-')} 1, holder_agent = NULL
          WHERE id ${op('=')} $3 AND holder_agent ${op('=')} $1 AND holder_local ${op('=')} $2
          RETURNING id, held, exclusive, queued, holder_token)
      SELECT CASE WHEN held ${op('=')} 0 AND queued ${op('>')} 0 THEN ${q}.process(id, holder_token, 0, exclusive) ELSE 0 END AS granted
        FROM freed`),
    release: named('release', `SELECT ${q}.remove($1, $2, true) AS held`),
    abort: named('abort', `SELECT ${q}.remove($1, $2, false) AS removed`),
    leave: { text: `SELECT ${q}.leave($1)` },
    sweep: named('sweep', `SELECT ${q}.sweep($1, $2) AS ended`),
    // The watcher's wait for agent $1's end, while it is the neighbour of
    // agent $3 of scope $2; $4: whether to look at its backend too.
    wait: named('wait', `SELECT ${q}.ended($1, $4) AS ended WHERE ${q}.neighbour($2, $3) ${op('=')} $1`),
    neighbour: named('neighbour', `SELECT ${q}.neighbour($1, $2) AS agent`),
    snapshot: named('snapshot', `SELECT held, name, shared, client_id FROM ${q}.snapshot($1)`),
    details: named('details', `SELECT held, name, shared, client_id, serial, parent, client_pid, client_host, elapsed
      FROM ${q}.details($1)`),
    cancel: named('cancel', 'SELECT pg_catalog.pg_cancel_backend($1)')
  }
}

module.exports = { BACKEND_PID, statements }
