'use strict';
// The scopes the cross-process stress test (processes.js) runs on, behind
// one interface, and what each can do to its agents besides killing their
// processes:
// - machineWide(): an openLockManager(scope, { dir }) scope in shared memory;
// - postgres(): an openLockManager(scope, { postgres, schema }) scope in a
//   PostgreSQL database, with an admin connection of the driver's own that
//   ends sessions (pg_terminate_backend), the server's restart (a server
//   that test/fixtures/postgres.js started restartable) and TCP proxies
//   that cut a process off the server (test/fixtures/tcp-proxy.js).
//
// A scope:
//   options(idx)        the openLockManager options of process idx (JSON)
//   query()             the scope's query(), from an observer agent of the
//                       driver's own
//   ended(clientIds)    resolves once the manager has ended these agents
//                       (their processes or sessions are gone), within a
//                       bound; rejects with what is left otherwise
//   close()             ends everything it opened; what the scope still
//                       holds afterwards: { agents, requests } (PostgreSQL)
// and with PostgreSQL:
//   terminate(clientId) ends the agent's session from the server
//   down(), up()        the server stopped, and started again (restartable)
//   reopen()            the observer joins again, after a restart
//   cut(idx)            stops forwarding process idx's connections
//   forget(idx)         process idx is gone (its proxy closes)
//   drop()              drops the run's schema
const { Proxy } = require('../fixtures/tcp-proxy');

class ScopeFailure extends Error {}

// Rejects after ms with `what`, unless the promise settles first.
function within(promise, ms, what) {
  let timer;
  const timeout = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new ScopeFailure(`${what}: not done within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function machineWide({ openLockManager, scope, dir }) {
  const open = () => openLockManager(scope, { dir });
  let observer = await open();
  return {
    kind: 'machine-wide',
    options: async () => ({ dir }),
    query: () => observer.query(),
    // The native manager sees a death in its next operation or its
    // watchers' wake-up; opening the scope again sweeps dead processes, so
    // the model's order holds whichever did.
    async ended() {
      await observer.close();
      observer = await open();
    },
    async close() {
      await observer.close();
      return { agents: 0, requests: 0 };
    },
  };
}

// Bounds for PostgreSQL (a loaded 2-CPU machine runs the server, the driver
// and every process):
// - DEATH_BOUND_MS: from a process's or a session's end to its agent's rows
//   gone. The server ends a backend as soon as its socket closes, the watcher
//   that waits for its life lock wakes at once and sweeps it in one
//   transaction: tens of milliseconds; a ring that missed the agent sees it
//   within the watchers' slice (lib/postgres/watch.js's WATCH_SLICE_MS, 250 ms),
//   which test/postgres-ring.test.js takes away to check the ring alone.
//   10 s allows an order of magnitude more for a loaded machine.
// - SERVER_BOUND_MS: a fast shutdown, or a start (crash recovery is not
//   needed: the shutdown is clean), under load.
// - ADMIN_STATEMENT_MS: the admin connection's statements, each a lookup.
const DEATH_BOUND_MS = 10000;
const SERVER_BOUND_MS = 60000;
const ADMIN_STATEMENT_MS = 10000;
// ended() looks at the agents table this often: the sweep that removes an
// agent notifies no one but the agents whose requests it grants.
const POLL_MS = 10;

// server: { url } of a running server, with down() and up() if it
// can be restarted (test/fixtures/postgres.js, startServer({ restartable })).
// keepalive: the manager's keepalive option for the processes, if any (the
// network cut needs it to be seen).
async function postgres({ openLockManager, scope, server, schema, cut = false, keepalive }) {
  const pg = require('pg');
  const q = `"${schema.replace(/"/g, '""')}"`;
  const proxies = new Map(); // idx -> Proxy
  let admin = null;
  let observer = null;
  const open = () => within(openLockManager(scope, { postgres: server.url, schema }), DEATH_BOUND_MS, 'opening the observer');

  async function connectAdmin() {
    const client = new pg.Client({ connectionString: server.url, application_name: 'web-locks-stress-admin', statement_timeout: ADMIN_STATEMENT_MS, connectionTimeoutMillis: ADMIN_STATEMENT_MS });
    // The server's restart ends it: a new one is made after.
    client.on('error', () => {});
    await client.connect();
    return client;
  }

  function sql(text, values) {
    return within(admin.query(text, values), ADMIN_STATEMENT_MS * 2, `admin: ${text.slice(0, 60)}`);
  }

  // What the scope's agents are and what their watchers wait for, for a
  // failure's message.
  async function ring() {
    try {
      const agents = await sql(`SELECT id, client_id, pid FROM ${q}.agents WHERE scope = $1 ORDER BY id`, [scope]);
      const waits = await sql("SELECT l.pid, l.objid AS waits_for, a.state, a.wait_event_type, a.backend_start FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory' AND NOT l.granted AND l.objsubid = 2 ORDER BY l.objid");
      const backends = await sql("SELECT pid, state, client_port, left(query, 60) AS query FROM pg_stat_activity WHERE application_name = 'web-locks' ORDER BY client_port");
      return `agents: ${JSON.stringify(agents.rows)}\nwatchers waiting: ${JSON.stringify(waits.rows)}\nbackends: ${JSON.stringify(backends.rows)}`;
    } catch (error) {
      return `(the ring: ${error.message})`;
    }
  }

  admin = await connectAdmin();
  observer = await open();

  return {
    kind: 'postgres',
    restartable: typeof server.down === 'function',
    async options(idx) {
      let url = server.url;
      if (cut) {
        const through = new URL(url);
        const proxy = await Proxy.start(through.hostname, Number(through.port || 5432));
        proxies.set(idx, proxy);
        through.hostname = '127.0.0.1';
        through.port = String(proxy.port);
        url = through.href;
      }
      const options = { postgres: url, schema };
      if (keepalive !== undefined) options.keepalive = keepalive;
      return options;
    },
    query: () => within(observer.query(), DEATH_BOUND_MS, "the observer's query()"),
    // The counts in each name's row against its requests and the lock the
    // row holds: every step changes both in one transaction, so they agree
    // in any snapshot, whatever is on its way.
    async countsAgree() {
      const { rows } = await sql(`SELECT n.id, n.held, n.exclusive, n.queued, n.holder_agent,
          (SELECT count(*)::int FROM ${q}.requests r WHERE r.name_id = n.id AND r.token IS NOT NULL)
            + (n.holder_agent IS NOT NULL)::int AS held_really,
          (SELECT count(*)::int FROM ${q}.requests r WHERE r.name_id = n.id AND r.token IS NOT NULL AND NOT r.shared)
            + (n.holder_agent IS NOT NULL AND NOT n.holder_shared)::int AS exclusive_really,
          (SELECT count(*)::int FROM ${q}.requests r WHERE r.name_id = n.id AND r.token IS NULL) AS queued_really
        FROM ${q}.names n WHERE n.scope = $1`, [scope]);
      const wrong = rows.filter((r) => r.held !== r.held_really || r.queued !== r.queued_really ||
        (r.held > 0 && r.exclusive !== (r.exclusive_really > 0)));
      if (wrong.length !== 0) throw new ScopeFailure(`names whose counts disagree with their requests: ${JSON.stringify(wrong)}`);
    },
    // A bounded poll: nothing tells the driver that a sweep has removed an
    // agent (its grants are notified to their own agents only).
    async ended(clientIds, bound = DEATH_BOUND_MS) {
      const deadline = Date.now() + bound;
      for (;;) {
        const { rows } = await sql(`SELECT client_id, id, pid FROM ${q}.agents WHERE scope = $1 AND client_id = ANY ($2)`, [scope, clientIds]);
        if (rows.length === 0) return;
        if (Date.now() > deadline) {
          throw new ScopeFailure(`agents not ended within ${bound} ms of their end: ${JSON.stringify(rows)}\n${await ring()}`);
        }
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      }
    },
    // Ends the agent's session (its connection that holds its life lock)
    // from the server; returns its backend's pid.
    async terminate(clientId) {
      const { rows } = await sql(`SELECT pid FROM ${q}.agents WHERE scope = $1 AND client_id = $2`, [scope, clientId]);
      if (rows.length !== 1) throw new ScopeFailure(`no agent with clientId ${clientId} to terminate: ${JSON.stringify(rows)}`);
      const ended = await sql('SELECT pg_terminate_backend($1) AS ok', [rows[0].pid]);
      if (ended.rows[0].ok !== true) throw new ScopeFailure(`pg_terminate_backend(${rows[0].pid}) failed`);
      return rows[0].pid;
    },
    async down() {
      await within(server.down(), SERVER_BOUND_MS, 'stopping the server');
    },
    // The server again, and the admin connection anew.
    async up() {
      await within(server.up(), SERVER_BOUND_MS, 'starting the server again');
      admin.end().catch(() => {});
      admin = await connectAdmin();
    },
    // The observer anew, a new agent, after the server's restart.
    async reopen() {
      await observer.close();
      observer = await open();
    },
    // Cuts process idx off the server; returns how many connections.
    cut(idx) {
      const proxy = proxies.get(idx);
      return proxy === undefined ? 0 : proxy.cut();
    },
    // A process is gone: so is its proxy.
    forget(idx) {
      const proxy = proxies.get(idx);
      proxies.delete(idx);
      if (proxy !== undefined) return proxy.close();
      return undefined;
    },
    async close() {
      let left = { agents: -1, requests: -1 };
      try {
        await within(observer.close(), DEATH_BOUND_MS, 'closing the observer');
        const { rows } = await sql(`SELECT (SELECT count(*)::int FROM ${q}.agents WHERE scope = $1) AS agents, ` +
          `(SELECT count(*)::int FROM ${q}.requests r JOIN ${q}.names n ON n.id = r.name_id WHERE n.scope = $1) AS requests`, [scope]);
        left = rows[0];
      } finally {
        for (const proxy of proxies.values()) await proxy.close();
        proxies.clear();
        await admin.end().catch(() => {});
      }
      return left;
    },
    // Drops the schema (a server of someone else's).
    async drop() {
      const client = await connectAdmin();
      try {
        await client.query(`DROP SCHEMA IF EXISTS ${q} CASCADE`);
      } finally {
        await client.end().catch(() => {});
      }
    },
  };
}

module.exports = { machineWide, postgres, within, ScopeFailure };
