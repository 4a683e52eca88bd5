'use strict';
// openLockManager(scope, { postgres }) beside a role that may only log in:
// no privilege on the manager's schema, nor anywhere else. Advisory locks
// are the database's: any role may take any key, and pg_locks shows every
// key in use. Such a role holds the lock that openers took before layout 3
// (the schema's key and 0), and the keys of agents yet to join; and it
// queues for a live agent's life lock, read from pg_locks, which it gets
// once that agent's process is killed. None of it may keep an opener, a
// rejoin or a migration waiting, nor make a dead agent look alive: its
// locks are released and its waiters granted. Beside it, an agent that
// joined on layout 2 (as that version's code made it: a row, a life lock,
// a channel) is judged by its backend from the migration on.
const assert = require('node:assert/strict');
const { api, holdOn, only, isDOMException, scopeName } = require('./fixtures/util');
const { spawnProcessAgent, terminateAll } = require('./fixtures/agent');
const { postgres, loginRole, grantSchema } = require('./fixtures/postgres');
const { within } = require('./stress/scopes');
const { schemaKey } = require('../lib/postgres/options.js');
const { LAYOUT, schemaSQL } = require('../lib/postgres/schema.js');

const ROLE = `wl_squatter_${process.pid}`;
const PASSWORD = 'squatter';
// Opening and joining take milliseconds: a wait for a lock that the role
// holds would last as long as the role wants.
const OPEN_MS = 5000;
// The waiters of a killed agent whose life lock the role took: seen dead by
// its watcher's next look at its backend (once a second), and swept.
const GRANTED_MS = 3000;

describe('openLockManager (PostgreSQL) beside a role that may only log in, and takes advisory locks', function () {
  this.timeout(30000);
  let openLockManager;
  let pg;
  let url;
  let admin;
  let roleUrl;
  const squatters = [];
  const schemas = [];
  const opened = [];

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
    for (const m of opened.splice(0)) await m.close();
    for (const s of squatters.splice(0)) await s.end().catch(() => {});
  });
  after(async function () {
    if (admin) {
      for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.query(`DROP ROLE IF EXISTS ${ROLE}`);
      await admin.end();
    }
  });

  function schemaOf(what) {
    const schema = `wl_squat_${what}_${process.pid}`;
    schemas.push(schema);
    return schema;
  }

  async function squatter() {
    const c = new pg.Client(roleUrl);
    c.on('error', () => {});
    await c.connect();
    squatters.push(c);
    return c;
  }

  async function open(scope, schema) {
    const m = await within(openLockManager(scope, { postgres: url, schema }), OPEN_MS, `openLockManager on ${schema}`);
    opened.push(m);
    return m;
  }

  // Resolves once the backend `pid` waits for a lock. Polled: no event
  // says it.
  async function waitingForLock(pid) {
    const deadline = Date.now() + 10000;
    for (;;) {
      const { rows } = await admin.query('SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1', [pid]);
      if (rows.length === 1 && rows[0].wait_event_type === 'Lock') return;
      if (Date.now() > deadline) throw new Error(`backend ${pid} not waiting for a lock`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  it('holding the old key of the schema, and the keys of the next agents, keeps no one from creating, joining or rejoining', async function () {
    const schema = schemaOf('create');
    const key = schemaKey(schema);
    const s = await squatter();
    await s.query('SELECT pg_advisory_lock($1, 0)', [key]);
    for (let id = 1; id <= 8; id++) await s.query('SELECT pg_advisory_lock($1, $2)', [key, id]);
    const scope = scopeName('squat');
    // The schema made while the role holds the key, by several at once.
    const [a, b] = await Promise.all([open(scope, schema), open(scope, schema)]);
    const h = holdOn(a, 'x');
    await h.granted;
    const next = b.request('x', (lock) => lock.name);
    await b.query();
    // a's session ended by the server: its lock goes to b, and a joins again.
    const { rows } = await admin.query(`SELECT pid FROM "${schema}".agents WHERE client_id = $1`, [only(await a.query(), 'x').held[0].clientId]);
    await admin.query('SELECT pg_terminate_backend($1)', [rows[0].pid]);
    await assert.rejects(h.done, isDOMException('AbortError'));
    assert.equal(await within(next, OPEN_MS, 'the grant to b'), 'x');
    assert.equal(await within(a.request('y', (lock) => lock.name), OPEN_MS, 'a request that rejoins'), 'y');
    const ids = await admin.query(`SELECT id FROM "${schema}".agents WHERE scope = $1`, [scope]);
    assert.ok(ids.rows.every((row) => row.id > 8), JSON.stringify(ids.rows));
  });

  it('holding the old key of a schema of layout 2 keeps no one from migrating it', async function () {
    const schema = schemaOf('migrate');
    await admin.query(schemaSQL(schema, 0, 2));
    const s = await squatter();
    await s.query('SELECT pg_advisory_lock($1, 0)', [schemaKey(schema)]);
    const m = await open(scopeName('squat'), schema);
    assert.equal(await m.request('x', (lock) => lock.name), 'x');
    const { rows } = await admin.query(`SELECT value FROM "${schema}".meta WHERE key = 'layout'`);
    assert.equal(rows[0].value, String(LAYOUT));
  });

  it('queued for a live agent\'s life lock, read from pg_locks, keeps neither it alive once killed nor its waiter in another process waiting', async function () {
    const schema = schemaOf('life');
    const key = schemaKey(schema);
    const scope = scopeName('squat-life');
    const holder = await spawnProcessAgent({ scope, postgres: url, schema });
    const held = await holder.request('x');
    await holder.granted(held);
    // The role reads the holder's key (the only agent's so far).
    const s = await squatter();
    const keys = await s.query("SELECT objid::int AS id FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 AND objsubid = 2 AND granted", [key]);
    assert.equal(keys.rows.length, 1);
    const id = keys.rows[0].id;
    const waiter = await spawnProcessAgent({ scope, postgres: url, schema });
    const waiting = await waiter.request('x');
    await waiter.query();
    const taken = s.query('SELECT pg_advisory_lock($1, $2)', [key, id]);
    await waitingForLock(s.processID);
    // The holder is alive: a sweep does not end it.
    const swept = await admin.query(`SELECT "${schema}".sweep($1, 0) AS ended`, [scope]);
    assert.equal(swept.rows[0].ended, 0);
    assert.equal(waiter.isGranted(waiting), false);
    const killed = Date.now();
    holder.child.kill('SIGKILL');
    await within(waiter.granted(waiting), GRANTED_MS, 'the waiter\'s grant after the holder was killed');
    const ms = Date.now() - killed;
    await taken;
    assert.ok(ms < GRANTED_MS, `granted ${ms} ms after the kill`);
    const left = await admin.query(`SELECT count(*)::int AS n FROM "${schema}".agents WHERE id = $1`, [id]);
    assert.equal(left.rows[0].n, 0);
  });

  it('agents of two roles of the scope, which cannot see the start of each other\'s sessions, judge each other by pid and role', async function () {
    const schema = schemaOf('roles');
    const key = schemaKey(schema);
    const scope = scopeName('squat-roles');
    await admin.query(api().postgresSchema(schema));
    const urls = [];
    for (const role of [`${ROLE}_a`, `${ROLE}_b`]) {
      urls.push(await loginRole(admin, url, role, PASSWORD));
      await grantSchema(admin, schema, role);
    }
    try {
      const holder = await spawnProcessAgent({ scope, postgres: urls[0], schema });
      const held = await holder.request('x');
      await holder.granted(held);
      const m = await within(openLockManager(scope, { postgres: urls[1], schema }), OPEN_MS, 'openLockManager as the second role');
      opened.push(m);
      const next = m.request('x', (lock) => lock.name);
      await m.query();
      // The second role's sweep (its join's) left the first's live agent.
      assert.equal(only(await m.query(), 'x').held.length, 1);
      const { rows } = await admin.query(`SELECT id FROM "${schema}".agents WHERE scope = $1 ORDER BY id LIMIT 1`, [scope]);
      const s = await squatter();
      const taken = s.query('SELECT pg_advisory_lock($1, $2)', [key, rows[0].id]);
      await waitingForLock(s.processID);
      const other = new pg.Client(urls[1]);
      await other.connect();
      try {
        const seen = await other.query(`SELECT s.backend_start FROM "${schema}".agents a JOIN pg_stat_activity s USING (pid) WHERE a.id = $1`, [rows[0].id]);
        assert.deepEqual(seen.rows, [{ backend_start: null }]);
        assert.equal((await other.query(`SELECT "${schema}".sweep($1, 0) AS ended`, [scope])).rows[0].ended, 0);
      } finally {
        await other.end();
      }
      holder.child.kill('SIGKILL');
      assert.equal(await within(next, GRANTED_MS, 'the grant after the first role\'s agent was killed'), 'x');
      await taken;
    } finally {
      for (const m of opened.splice(0)) await m.close();
      await terminateAll();
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      for (const role of [`${ROLE}_a`, `${ROLE}_b`]) await admin.query(`DROP ROLE IF EXISTS ${role}`);
    }
  });

  it('an agent that joined on layout 2 is judged by its backend from the migration on: killed, with the role on its key, it is swept', async function () {
    const schema = schemaOf('old');
    const key = schemaKey(schema);
    const scope = scopeName('squat-old');
    await admin.query(schemaSQL(schema, 0, 2));
    // An agent of layout 2: its row, its life lock, its channel, and a lock
    // held in a name's row.
    const old = new pg.Client(url);
    old.on('error', () => {});
    await old.connect();
    try {
      const channel = `web_locks_old_${process.pid}`;
      const { rows } = await old.query(`INSERT INTO "${schema}".agents (id, scope, client_id, pid, channel)
        VALUES (nextval('"${schema}".agent_ids'), $1, 'old', pg_backend_pid(), $2) RETURNING id`, [scope, channel]);
      const id = rows[0].id;
      await old.query('SELECT pg_advisory_lock($1, $2)', [key, id]);
      await old.query(`LISTEN "${channel}"`);
      await old.query(`INSERT INTO "${schema}".names (scope, digest, name, held, exclusive, holder_agent, holder_local, holder_token, holder_shared)
        VALUES ($1, sha256($2), $2, 1, true, $3, 1, nextval('"${schema}".tokens'), false)`, [scope, Buffer.from('x', 'utf16le'), id]);
      const m = await open(scope, schema);
      const identity = await admin.query(`SELECT g.backend_start = a.backend_start AS same, g.role_id = a.usesysid AS role
        FROM "${schema}".agents g JOIN pg_stat_activity a ON a.pid = g.pid WHERE g.id = $1`, [id]);
      assert.deepEqual(identity.rows, [{ same: true, role: true }]);
      const next = m.request('x', (lock) => lock.name);
      await m.query();
      assert.deepEqual(only(await m.query(), 'x').held.map((i) => i.clientId), ['old']);
      const s = await squatter();
      const taken = s.query('SELECT pg_advisory_lock($1, $2)', [key, id]);
      await waitingForLock(s.processID);
      await admin.query('SELECT pg_terminate_backend($1)', [old.processID]);
      assert.equal(await within(next, GRANTED_MS, 'the grant after the old agent was ended'), 'x');
      await taken;
    } finally {
      await old.end().catch(() => {});
    }
  });
});
