'use strict';
// Adversarial review of the PostgreSQL manager's layout 3 (issue 25, item
// 3): cases that the change under review does not cover.
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { api, scopeName } = require('./fixtures/util');
const { spawnProcessAgent, terminateAll } = require('./fixtures/agent');
const { postgres, loginRole } = require('./fixtures/postgres');
const { pgbouncerBinary, startPgbouncer } = require('./fixtures/pgbouncer');
const { within } = require('./stress/scopes');
const { schemaKey } = require('../lib/postgres/options.js');
const { schemaSQL } = require('../lib/postgres/schema.js');

const PKG = path.resolve(__dirname, '..');

const ROLE = `wl_review_${process.pid}`;
const PASSWORD = 'review';
const GRANTED_MS = 3000;

describe('openLockManager (PostgreSQL): review of layout 3', function () {
  this.timeout(30000);
  let openLockManager;
  let pg;
  let url;
  let admin;
  let roleUrl;
  const closers = [];

  before(async function () {
    ({ openLockManager } = api());
    pg = require('pg');
    ({ url } = await postgres());
    admin = new pg.Client(url);
    await admin.connect();
    roleUrl = await loginRole(admin, url, ROLE, PASSWORD);
  });
  afterEach(async function () {
    await terminateAll();
    for (const close of closers.splice(0).reverse()) await close();
  });
  after(async function () {
    if (admin) {
      await admin.query(`DROP ROLE IF EXISTS ${ROLE}`);
      await admin.end();
    }
  });

  async function squatter() {
    const c = new pg.Client(roleUrl);
    c.on('error', () => {});
    await c.connect();
    closers.push(() => c.end().catch(() => {}));
    return c;
  }

  async function waitingForLock(pid) {
    const deadline = Date.now() + 10000;
    for (;;) {
      const { rows } = await admin.query('SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1', [pid]);
      if (rows.length === 1 && rows[0].wait_event_type === 'Lock') return;
      if (Date.now() > deadline) throw new Error(`backend ${pid} not waiting for a lock`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  // PgBouncer in session mode keeps the server connection of a client that
  // died (and runs DISCARD ALL on it, which frees the life lock): with a
  // login-only role queued for that lock, the dead agent's backend is still
  // there, so alive() says alive until PgBouncer closes that connection
  // (server_idle_timeout, 600 s by default), or for as long as another
  // client keeps it.
  (pgbouncerBinary() === null ? it.skip : it)('behind PgBouncer in session mode, a role queued for a killed agent\'s life lock does not keep it alive', async function () {
    const bouncer = await startPgbouncer({ pool_mode: 'session' });
    closers.push(() => bouncer.stop());
    const schema = `wl_review_bouncer_${process.pid}`;
    closers.push(() => admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
    const key = schemaKey(schema);
    const scope = scopeName('review-bouncer');
    const waiterManager = await openLockManager(scope, { postgres: url, schema });
    closers.push(() => waiterManager.close());
    const holder = await spawnProcessAgent({ scope, postgres: bouncer.url, schema });
    const held = await holder.request('x');
    await holder.granted(held);
    const { rows } = await admin.query(`SELECT id FROM "${schema}".agents WHERE scope = $1 ORDER BY id DESC LIMIT 1`, [scope]);
    const next = waiterManager.request('x', (lock) => lock.name);
    await waiterManager.query();
    const s = await squatter();
    const taken = s.query('SELECT pg_advisory_lock($1, $2)', [key, rows[0].id]);
    await waitingForLock(s.processID);
    holder.child.kill('SIGKILL');
    await taken;
    assert.equal(await within(next, GRANTED_MS, 'the grant after the agent behind PgBouncer was killed'), 'x');
  });

  // The same, seen by a sweep (a join's) rather than by the watcher.
  (pgbouncerBinary() === null ? it.skip : it)('behind PgBouncer in session mode, a sweep ends a killed agent whose life lock a role took, and no live one', async function () {
    const bouncer = await startPgbouncer({ pool_mode: 'session' });
    closers.push(() => bouncer.stop());
    const schema = `wl_review_sweep_${process.pid}`;
    closers.push(() => admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
    const key = schemaKey(schema);
    const scope = scopeName('review-sweep');
    const live = await openLockManager(scope, { postgres: bouncer.url, schema });
    closers.push(() => live.close());
    const holder = await spawnProcessAgent({ scope, postgres: bouncer.url, schema });
    await holder.query();
    const { rows } = await admin.query(`SELECT id FROM "${schema}".agents WHERE scope = $1 ORDER BY id DESC LIMIT 1`, [scope]);
    const s = await squatter();
    const taken = s.query('SELECT pg_advisory_lock($1, $2)', [key, rows[0].id]);
    await waitingForLock(s.processID);
    const sweep = `SELECT "${schema}".sweep($1, 0) AS ended`;
    assert.equal((await admin.query(sweep, [scope])).rows[0].ended, 0);
    // Its watcher, the other agent, must not sweep it first.
    await live.close();
    holder.child.kill('SIGKILL');
    await taken;
    assert.equal((await admin.query(sweep, [scope])).rows[0].ended, 1);
  });
  // A process that stops in the middle of a migration (frozen, stopped, its
  // event loop blocked) holds the layout's row of meta and the agents table
  // in an open transaction: every opener, every join and every rejoin of
  // every scope of the schema waits behind it. The server ends an idle
  // session after keepalive (idle_session_timeout), but not one idle in a
  // transaction.
  it('a process stalled in the middle of a migration keeps no one from opening for longer than its keepalive', async function () {
    const schema = `wl_review_stall_${process.pid}`;
    closers.push(() => admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
    await admin.query(schemaSQL(schema, 0, 2));
    const code = `const pg = require(${JSON.stringify(require.resolve('pg'))});
      const query = pg.Client.prototype.query;
      pg.Client.prototype.query = function (...args) {
        const result = query.apply(this, args);
        const text = typeof args[0] === 'string' ? args[0] : '';
        if (!/\\.meta WHERE .* FOR UPDATE$/.test(text)) return result;
        return result.then(() => {
          process.stdout.write('locked\\n');
          return new Promise(() => {});
        });
      };
      require(${JSON.stringify(PKG)}).openLockManager('s', { postgres: ${JSON.stringify(url)}, schema: ${JSON.stringify(schema)}, keepalive: 1000 }).catch(() => {});
      setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
    closers.push(() => child.kill('SIGKILL'));
    await within(new Promise((resolve) => child.stdout.on('data', (d) => { if (String(d).includes('locked')) resolve(); })), 10000, 'the stalled migration');
    const m = await within(openLockManager(scopeName('review-stall'), { postgres: url, schema }), 5000, 'openLockManager beside a stalled migration');
    closers.push(() => m.close());
    assert.equal(await m.request('x', (lock) => lock.name), 'x');
  });
});
