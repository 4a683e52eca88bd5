'use strict';
// The PostgreSQL manager's sweep (lib/postgres/schema.sql, sweep()): the agents
// whose sessions have ended are ended by whoever sweeps (a watcher, a
// joining agent), many at once after a server's restart. Two sweeps at
// once must not deadlock: the loser's caller would get the error (a join,
// and with it a request or openLockManager, rejected with 40P01).
//
// Made in SQL: agents of a scope of its own whose sessions are gone (rows
// that no session's life lock keeps), each with a request on one of two
// names, and two sweeps that a third connection, holding a name's row,
// makes meet: the first waits for that name with the first agent to end,
// the second ends the second agent (the other name) and waits for the
// first name with the third; given the first name, the first sweep wants
// the fourth agent's, the other name.
const assert = require('node:assert/strict');
const { api, scopeName } = require('./fixtures/util');
const { postgres } = require('./fixtures/postgres');

// How long to wait for a backend to be waiting for a lock.
const WAIT_MS = 10000;

describe('openLockManager (PostgreSQL): sweeps', function () {
  this.timeout(30000);
  const schema = `wl_sweep_${process.pid}`;
  const q = `"${schema}"`;
  let pg;
  let url;
  const clients = [];

  before(async function () {
    pg = require('pg');
    ({ url } = await postgres());
    // The schema, made as a manager makes it.
    const m = await api().openLockManager(scopeName('sweep-setup'), { postgres: url, schema });
    await m.close();
  });
  afterEach(async function () {
    for (const c of clients.splice(0)) await c.end().catch(() => {});
  });
  after(async function () {
    const c = await connect();
    await c.query(`DROP SCHEMA IF EXISTS ${q} CASCADE`);
    await c.end();
  });

  async function connect() {
    const c = new pg.Client(url);
    c.on('error', () => {});
    await c.connect();
    clients.push(c);
    return c;
  }

  // Resolves once the backend `pid` waits for a lock, or its statement
  // (`running`, if given) is done. Polled: no event says it.
  async function waiting(admin, pid, running) {
    let done = false;
    if (running) running.then(() => { done = true; }, () => { done = true; });
    const deadline = Date.now() + WAIT_MS;
    for (;;) {
      if (done) return;
      const { rows } = await admin.query('SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1', [pid]);
      if (rows.length === 1 && rows[0].wait_event_type === 'Lock') return;
      if (Date.now() > deadline) throw new Error(`backend ${pid} not waiting for a lock within ${WAIT_MS} ms`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  it('two sweeps that meet on the names of the agents they end both finish', async function () {
    const scope = scopeName('sweep');
    const admin = await connect();
    const name = (text) => Buffer.from(text, 'utf16le');
    // Four ended agents, in id order: their requests are on n1, n2, n1, n2.
    const agents = [];
    for (const n of ['n1', 'n2', 'n1', 'n2']) {
      const { rows } = await admin.query(`INSERT INTO ${q}.agents (id, scope, client_id, pid, channel) VALUES (nextval('${q}.agent_ids'), $1, $2, 0, $2) RETURNING id`, [scope, `ended-${agents.length}`]);
      const id = rows[0].id;
      await admin.query(`SELECT ${q}.request($1, 1, $2, $3, false, false, false, true)`, [id, scope, name(n)]);
      agents.push(id);
    }
    // A third connection holds n1: the first sweep waits for it with the
    // first agent's names (n1) to take; the second sweep, started next, ends
    // the second agent (n2) and waits for n1 with the third's.
    const holder = await connect();
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM ${q}.names WHERE scope = $1 AND name = $2 FOR UPDATE`, [scope, name('n1')]);
    const first = await connect();
    const second = await connect();
    const firstSweep = first.query(`SELECT ${q}.sweep($1, 0) AS ended`, [scope]);
    await waiting(admin, first.processID);
    // (Or, the first sweep having taken every agent, it finds none to end.)
    const secondSweep = second.query(`SELECT ${q}.sweep($1, 0) AS ended`, [scope]);
    await waiting(admin, second.processID, secondSweep);
    // n1 goes to the first sweep, which then wants the fourth agent's n2.
    await holder.query('COMMIT');
    const results = await Promise.allSettled([firstSweep, secondSweep]);
    const failures = results.filter((r) => r.status === 'rejected').map((r) => `${r.reason.code} ${r.reason.message}`);
    assert.deepEqual(failures, []);
    const ended = results.reduce((sum, r) => sum + r.value.rows[0].ended, 0);
    assert.equal(ended, 4);
    const left = await admin.query(`SELECT count(*)::int AS n FROM ${q}.agents WHERE scope = $1`, [scope]);
    assert.equal(left.rows[0].n, 0);
  });
});
