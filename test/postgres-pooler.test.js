'use strict';
// openLockManager(scope, { postgres }) behind a real PgBouncer
// (test/fixtures/pgbouncer.js) in front of the tests' server. In
// transaction or statement mode the manager's session is not a session:
// openLockManager rejects with EPOOLED and leaves nothing behind, and a
// session that passed that check but later finds itself on another backend
// is lost and leaves. In session mode the manager works. Pending where
// pgbouncer is not installed (apt-get install pgbouncer).
const assert = require('node:assert/strict');
const { api, holdOn, only, isDOMException, deferred, scopeName } = require('./fixtures/util');
const { postgres } = require('./fixtures/postgres');
const { pgbouncerBinary, startPgbouncer } = require('./fixtures/pgbouncer');
const { inspectPostgres } = require('../lib/postgres/inspect.js');

const INSTALLED = pgbouncerBinary() !== null;
// The wait of a watcher (lib/postgres/watch.js, waitFor(): a statement named
// after it), and what a cancelled statement fails with.
const WAIT_NAME = /_wait$/;
const QUERY_CANCELED = '57014';

function isPooled(error) {
  return error instanceof Error && error.code === 'EPOOLED' &&
    /transaction or statement mode/.test(error.message) && /session of its own/.test(error.message) &&
    /pool_mode = session/.test(error.message);
}

describe(`openLockManager (PostgreSQL) behind PgBouncer${INSTALLED ? '' : ' (pending: no pgbouncer; apt-get install pgbouncer)'}`, function () {
  this.timeout(30000);
  let openLockManager;
  let pg;
  let url;
  let admin;
  let direct;
  const bouncers = [];
  const opened = [];
  const restore = [];

  before(async function () {
    if (!INSTALLED) this.skip();
    ({ openLockManager } = api());
    pg = require('pg');
    ({ url } = await postgres());
    admin = new pg.Client(url);
    await admin.connect();
    // A direct agent, which also makes the schema.
    direct = await openLockManager(scopeName('direct'), { postgres: url });
  });
  afterEach(async function () {
    for (const undo of restore.splice(0)) undo();
    for (const m of opened.splice(0)) await m.close();
    for (const b of bouncers.splice(0)) await b.stop();
  });
  after(async function () {
    if (direct) await direct.close();
    if (admin) await admin.end();
  });

  async function bouncer(settings) {
    const b = await startPgbouncer(settings);
    bouncers.push(b);
    return b;
  }

  async function open(scope, options) {
    const m = await openLockManager(scope, options);
    opened.push(m);
    return m;
  }

  async function agentsOf(scope) {
    const { rows } = await admin.query('SELECT count(*)::int AS n FROM web_locks.agents WHERE scope = $1', [scope]);
    return rows[0].n;
  }

  // Nothing of the pooled attempt is left: no agent in the scope, and a
  // direct agent of it has its locks at once.
  async function nothingLeft(scope) {
    assert.equal(await agentsOf(scope), 0);
    const m = await open(scope, { postgres: url });
    assert.deepEqual(await m.query(), { held: [], pending: [] });
    assert.equal(await m.request('x', { ifAvailable: true }, (lock) => lock && lock.name), 'x');
    assert.equal(await agentsOf(scope), 1);
  }

  // Makes PgBouncer open `n` server connections, left idle.
  async function warm(b, n) {
    const clients = [];
    for (let i = 0; i < n; i++) {
      const c = new pg.Client(b.url);
      clients.push(c);
      await c.connect();
      await c.query('BEGIN');
    }
    const pids = await Promise.all(clients.map(async (c) => (await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid));
    assert.equal(new Set(pids).size, n);
    for (const c of clients) {
      await c.query('ROLLBACK');
      await c.end();
    }
  }

  // [what, PgBouncer's settings, how many server connections it has]
  const refusals = [
    ['transaction mode', { pool_mode: 'transaction' }, 0],
    ['statement mode (which refuses the probe\'s transaction)', { pool_mode: 'statement' }, 0],
    // The probe takes it: the session must not wait for it.
    ['transaction mode with one server connection', { pool_mode: 'transaction', default_pool_size: 1 }, 0],
    // The probe takes another than the session's, which then moves.
    ['transaction mode handing out three server connections oldest first', { pool_mode: 'transaction', server_round_robin: 1, default_pool_size: 3 }, 3],
  ];
  for (const [what, settings, servers] of refusals) {
    it(`through ${what}, openLockManager rejects with EPOOLED and leaves nothing behind`, async function () {
      const b = await bouncer(settings);
      await warm(b, servers);
      const scope = scopeName('refused');
      await assert.rejects(openLockManager(scope, { postgres: b.url }), isPooled);
      // And again, on the server connections the first attempt used.
      await assert.rejects(openLockManager(scope, { postgres: b.url }), isPooled);
      await nothingLeft(scope);
    });
  }

  // A look inside a scope is one transaction, which a pooler in
  // transaction mode keeps on one server connection.
  it('through transaction mode, inspectPostgres() reads a scope as directly', async function () {
    const b = await bouncer({ pool_mode: 'transaction', default_pool_size: 1 });
    const scope = scopeName('inspect');
    const m = await open(scope, { postgres: url });
    const h = holdOn(m, 'x');
    await h.granted;
    const shown = (look) => look.held.map((e) => [e.name, e.clientId, e.pid, e.alive]);
    const direct = await inspectPostgres({ postgres: url, scope });
    assert.deepEqual(shown(direct), [['x', only(await m.query(), 'x').held[0].clientId, process.pid, true]]);
    assert.deepEqual(shown(await inspectPostgres({ postgres: b.url, scope })), shown(direct));
    // Again, on the server connection the first look used.
    assert.deepEqual(shown(await inspectPostgres({ postgres: b.url, scope })), shown(direct));
    h.release();
    await h.done;
  });

  it('through transaction mode, a pg.Pool as the option is refused too: its session connects with the pool\'s settings', async function () {
    const b = await bouncer({ pool_mode: 'transaction' });
    const pool = new pg.Pool({ connectionString: b.url });
    try {
      const scope = scopeName('pool');
      await assert.rejects(openLockManager(scope, { postgres: pool }), isPooled);
      await nothingLeft(scope);
    } finally {
      await pool.end();
    }
  });

  it('through session mode, two agents hand a lock over', async function () {
    const b = await bouncer({ pool_mode: 'session' });
    const scope = scopeName('session');
    const first = await open(scope, { postgres: b.url });
    const second = await open(scope, { postgres: b.url });
    const h = holdOn(first, 'x');
    await h.granted;
    const next = second.request('x', (lock) => lock.name);
    await second.query();
    const { held, pending } = only(await first.query(), 'x');
    assert.equal(held.length, 1);
    assert.equal(pending.length, 1);
    h.release();
    assert.equal(await next, 'x');
    await h.done;
  });

  // The pooler gives a client a process id of its own (its cancel key), not
  // the backend's: the watcher's wait is cancelled by its backend's pid.
  it('through session mode, close() cancels its watcher\'s wait', async function () {
    const b = await bouncer({ pool_mode: 'session' });
    const scope = scopeName('cancel');
    const waiting = deferred();
    const ends = [];
    let watching = null; // the agent whose waits count: first's
    const { Client } = pg;
    const query = Client.prototype.query;
    Client.prototype.query = function (...args) {
      const result = query.apply(this, args);
      const config = args[0] !== null && typeof args[0] === 'object' ? args[0] : {};
      // The wait's values: the agent waited for, scope, the watcher's agent.
      if (typeof config.name === 'string' && WAIT_NAME.test(config.name) && config.values[2] === watching) {
        waiting.resolve();
        result.catch((error) => ends.push(error.code));
      }
      return result;
    };
    restore.push(() => { Client.prototype.query = query; });
    const first = await open(scope, { postgres: b.url });
    watching = (await admin.query('SELECT id FROM web_locks.agents WHERE scope = $1', [scope])).rows[0].id;
    await open(scope, { postgres: b.url });
    await waiting.promise;
    await first.close();
    assert.ok(ends.includes(QUERY_CANCELED), `the waits ended with ${JSON.stringify(ends)}`);
  });

  // PgBouncer's server_round_robin hands out its idle server connections
  // oldest first: with exactly two, the probe of the join check takes the
  // one the session did not use last, and the session gets its own back, so
  // the check passes; then the session's statements alternate between the
  // two, and a keepalive soon answers from the other backend.
  it('through transaction mode past the join check, the keepalive sees another backend: the locks reject with an AbortError (cause EPOOLED) and the agent leaves', async function () {
    const b = await bouncer({ pool_mode: 'transaction', server_round_robin: 1, default_pool_size: 2 });
    await warm(b, 2);
    const scope = scopeName('moved');
    // Alone in its scope: a watcher would hold one of the two server
    // connections for its waits, and the session could stay on the other.
    const m = await open(scope, { postgres: b.url, keepalive: 300 });
    const h = holdOn(m, 'x');
    await h.granted;
    await assert.rejects(h.done, (error) => isDOMException('AbortError')(error) && isPooled(error.cause));
    // It leaves once it has rejected its locks: a round trip later.
    const until = Date.now() + 5000;
    while (await agentsOf(scope) !== 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
    await nothingLeft(scope);
  });
});
