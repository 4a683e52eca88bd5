'use strict';
// What the PostgreSQL manager tells of a scope beyond query() (layout 4,
// issue 27): its backend's details() (each entry's serial, parent, client
// process and host, and for how long it has been held or pending, on the
// server's clock), for the watch for deadlocks; and inspectPostgres()
// (lib/postgres/inspect.js), the read-only look of `web-locks inspect`,
// which also says whether each entry's agent is alive. The backend is
// driven directly here, with requests that carry a parent, as the shim
// (lib/index.js) makes them.
const assert = require('node:assert/strict');
const os = require('node:os');
const { api, holdOn, only, scopeName } = require('./fixtures/util');
const { spawnProcessAgent, terminateAll } = require('./fixtures/agent');
const { postgres, loginRole } = require('./fixtures/postgres');
const { postgresTarget, openPostgres } = require('../lib/postgres/manager.js');
const { inspectPostgres } = require('../lib/postgres/inspect.js');
const { LAYOUT, schemaSQL } = require('../lib/postgres/schema.js');
const { schemaKey } = require('../lib/postgres/options.js');
const { EV_GRANTED } = require('../lib/events.js');

// How long a killed client's backend may take to go.
const GONE_MS = 10000;

describe('openLockManager (PostgreSQL): details and inspect', function () {
  this.timeout(30000);
  const schema = `wl_details_${process.pid}`;
  const q = `"${schema}"`;
  let openLockManager;
  let pg;
  let url;
  let admin;
  const backends = [];
  const opened = [];

  before(async function () {
    ({ openLockManager } = api());
    pg = require('pg');
    ({ url } = await postgres());
    admin = new pg.Client(url);
    await admin.connect();
  });
  afterEach(async function () {
    await terminateAll();
    for (const b of backends.splice(0)) await b.close();
    for (const m of opened.splice(0)) await m.close();
  });
  after(async function () {
    if (admin) {
      await admin.query(`DROP SCHEMA IF EXISTS ${q} CASCADE`);
      await admin.end();
    }
  });

  async function backendOf(scope, options = {}) {
    const b = await openPostgres(postgresTarget(scope, url, { schema, ...options }));
    backends.push(b);
    return b;
  }

  async function open(scope, options = {}) {
    const m = await openLockManager(scope, { postgres: url, schema, ...options });
    opened.push(m);
    return m;
  }

  // A request as the shim makes them (lib/index.js): made inside the lock
  // whose serial is `parent` (0: none); `granted` resolves at its grant.
  function request(backend, name, parent = 0) {
    let granted;
    let dropped;
    const r = {
      // Tracked, as while the thread watches for deadlocks (deadlock.js).
      deadlock: { serial: 0, parent, state: 0 },
      get serial() {
        return this.deadlock.serial;
      },
      id: 0,
      token: 0,
      granted: new Promise((resolve, reject) => {
        granted = resolve;
        dropped = reject;
      }),
      deliver(events) {
        if (events & EV_GRANTED) granted();
      },
      queued() {},
      waits() {},
      drop(error) {
        dropped(error);
      },
    };
    backend.request(name, 0, r);
    return r;
  }

  // Whether agent `backend`'s lock `r` is held in its name's row (in the
  // schema `s`).
  async function inRow(backend, r, s = q) {
    const { rows } = await admin.query(`SELECT count(*)::int AS n FROM ${s}.names
      WHERE holder_agent = $1 AND holder_local = $2`, [backend.current.agent, r.serial]);
    return rows[0].n === 1;
  }

  // Every row of the schema's tables, and its counters.
  async function contents() {
    const tables = ['meta', 'agents', 'names', 'requests', 'token_block', 'token_live'];
    const state = {};
    for (const table of tables) state[table] = (await admin.query(`SELECT * FROM ${q}.${table} t ORDER BY t::text`)).rows;
    for (const sequence of ['tokens', 'agent_ids']) {
      state[sequence] = (await admin.query(`SELECT last_value, is_called FROM ${q}.${sequence}`)).rows;
    }
    return state;
  }

  // Resolves once agent `agentId`'s backend is gone. Polled: no event says it.
  async function backendGone(agentId) {
    const deadline = Date.now() + GONE_MS;
    for (;;) {
      const { rows } = await admin.query(`SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE pid = (SELECT pid FROM ${q}.agents WHERE id = $1)`, [agentId]);
      if (rows[0].n === 0) return;
      if (Date.now() > deadline) throw new Error(`the backend of agent ${agentId} is still there after ${GONE_MS} ms`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  it('details() gives each held lock and pending request its serial, parent, client process, host and time', async function () {
    const scope = scopeName('details');
    const a = await backendOf(scope);
    const b = await backendOf(scope);
    const started = performance.now();
    // y: the first lock on a new name, a row of requests; x: a lock on a
    // free name, held in the name's row, made inside y.
    const y = request(a, 'y');
    await y.granted;
    const first = request(a, 'x');
    await first.granted;
    assert.equal(await a.release(first), true);
    const x = request(a, 'x', y.serial);
    await x.granted;
    assert.ok(await inRow(a, x));
    // z held by b, and two requests queued for x: b's inside z, a's inside y.
    const z = request(b, 'z');
    await z.granted;
    const bx = request(b, 'x', z.serial);
    await b.details();
    const ax = request(a, 'x', y.serial);
    const details = await a.details();
    const took = performance.now() - started;
    const clients = { [a.clientId]: 'a', [b.clientId]: 'b' };
    const shown = (entries) => entries.map((e) => [e.name, clients[e.clientId], e.serial, e.parent]);
    assert.deepEqual(shown(details.held), [['y', 'a', y.serial, 0], ['x', 'a', x.serial, y.serial], ['z', 'b', z.serial, 0]]);
    assert.deepEqual(shown(details.pending), [['x', 'b', bx.serial, z.serial], ['x', 'a', ax.serial, y.serial]]);
    for (const e of [...details.held, ...details.pending]) {
      assert.equal(e.pid, process.pid);
      assert.equal(e.host, os.hostname());
      assert.equal(typeof e.elapsed, 'number');
      assert.ok(e.elapsed >= 0 && e.elapsed <= took + 1000, `${e.name}: ${e.elapsed} ms`);
      assert.equal(e.mode, 'exclusive');
    }
    // Held or pending since it was made: y's first, a's x last.
    const [ey, ex] = details.held;
    const [ebx, eax] = details.pending;
    assert.ok(ey.elapsed >= ex.elapsed && ex.elapsed >= ebx.elapsed && ebx.elapsed >= eax.elapsed,
      JSON.stringify([ey, ex, ebx, eax].map((e) => e.elapsed)));
    // The server's clock goes on.
    const later = await a.details();
    assert.ok(later.held[0].elapsed > ey.elapsed);
    // x goes to b's request, held since its grant: for less long than z.
    assert.equal(await a.release(x), true);
    await bx.granted;
    const granted = await b.details();
    const bxHeld = granted.held.find((e) => e.serial === bx.serial && e.clientId === b.clientId);
    const zHeld = granted.held.find((e) => e.serial === z.serial && e.clientId === b.clientId);
    assert.equal(bxHeld.parent, z.serial);
    assert.ok(bxHeld.elapsed < zHeld.elapsed, `${bxHeld.elapsed} < ${zHeld.elapsed}`);
    assert.deepEqual(granted.pending.map((e) => [e.serial, e.parent]), [[ax.serial, y.serial]]);
    // query() is as before.
    assert.deepEqual(only(await a.query(), 'x').held, [{ name: 'x', mode: 'exclusive', clientId: b.clientId }]);
    // A closed backend does not join again (and sweep) to answer.
    await a.close();
    const ids = `SELECT last_value FROM ${q}.agent_ids`;
    const last = (await admin.query(ids)).rows[0].last_value;
    await assert.rejects(a.details(), { name: 'AbortError' });
    assert.equal((await admin.query(ids)).rows[0].last_value, last);
  });

  it('inspectPostgres() shows a live agent\'s locks and requests, alive, and changes nothing, even for a role that may only read', async function () {
    const scope = scopeName('inspect');
    const m = await open(scope);
    const other = await open(scope);
    const h = holdOn(m, 'x', { mode: 'shared' });
    await h.granted;
    const waiting = other.request('x', () => {});
    await other.query();
    const clientIds = (await m.query()).held.concat((await m.query()).pending).map((e) => e.clientId);
    const before = await contents();
    const look = await inspectPostgres({ postgres: url, schema, scope });
    assert.deepEqual(await contents(), before);
    const shown = (e) => [e.name, e.mode, e.clientId, e.parent, e.pid, e.host, e.alive, typeof e.serial, typeof e.elapsed];
    assert.deepEqual(look.held.map(shown), [['x', 'shared', clientIds[0], 0, process.pid, os.hostname(), true, 'number', 'number']]);
    assert.deepEqual(look.pending.map(shown), [['x', 'exclusive', clientIds[1], 0, process.pid, os.hostname(), true, 'number', 'number']]);
    // As a role that may read the schema's tables and nothing more: no
    // write is needed, nor made.
    const role = `wl_reader_${process.pid}`;
    const reader = await loginRole(admin, url, role, 'reader');
    try {
      await admin.query(`GRANT USAGE ON SCHEMA ${q} TO ${role}; GRANT SELECT ON ALL TABLES IN SCHEMA ${q} TO ${role}`);
      const read = await inspectPostgres({ postgres: reader, schema, scope });
      assert.deepEqual(read.held.map(shown), look.held.map(shown));
      assert.deepEqual(read.pending.map(shown), look.pending.map(shown));
      // A pool's connection, given back.
      const pool = new pg.Pool({ connectionString: reader, max: 1 });
      try {
        const pooled = await inspectPostgres({ postgres: pool, schema, scope });
        assert.deepEqual(pooled.held.map(shown), look.held.map(shown));
        assert.equal(pool.idleCount, 1);
      } finally {
        await pool.end();
      }
    } finally {
      await admin.query(`DROP OWNED BY ${role}; DROP ROLE ${role}`);
    }
    assert.deepEqual(await contents(), before);
    h.release();
    await h.done;
    await waiting;
    assert.deepEqual(await inspectPostgres({ postgres: url, schema, scope }), { held: [], pending: [] });
  });

  it('inspectPostgres() shows the locks of an agent whose process was killed as not alive until a sweep ends it', async function () {
    const scope = scopeName('inspect-killed');
    // Alone in its scope: no watcher sees its death, and no one sweeps.
    const agent = await spawnProcessAgent({ scope, postgres: url, schema });
    const id = await agent.request('x');
    await agent.granted(id);
    const clientId = await agent.clientId();
    const { rows } = await admin.query(`SELECT id FROM ${q}.agents WHERE scope = $1`, [scope]);
    assert.equal(rows.length, 1);
    const alive = await inspectPostgres({ postgres: url, schema, scope });
    assert.deepEqual(alive.held.map((e) => [e.name, e.clientId, e.pid, e.alive]), [['x', clientId, agent.child.pid, true]]);
    agent.child.kill('SIGKILL');
    await agent.exited;
    await backendGone(rows[0].id);
    const before = await contents();
    const dead = await inspectPostgres({ postgres: url, schema, scope });
    assert.deepEqual(dead.held.map((e) => [e.name, e.clientId, e.pid, e.alive]), [['x', clientId, agent.child.pid, false]]);
    assert.deepEqual(await contents(), before);
    // A join sweeps it.
    const m = await open(scope);
    assert.deepEqual(await m.query(), { held: [], pending: [] });
    assert.deepEqual(await inspectPostgres({ postgres: url, schema, scope }), { held: [], pending: [] });
  });

  it('inspectPostgres() refuses a schema that is missing or of another layout, and bad arguments', async function () {
    await assert.rejects(inspectPostgres({ postgres: url, schema: `wl_none_${process.pid}`, scope: 's' }), (err) => {
      assert.equal(err.code, 'ENOENT');
      assert.match(err.message, /no lock manager/);
      return true;
    });
    const other = `wl_details_layout_${process.pid}`;
    try {
      await admin.query(schemaSQL(other, 0, 3));
      await assert.rejects(inspectPostgres({ postgres: url, schema: other, scope: 's' }), (err) => {
        assert.equal(err.code, 'ELAYOUT');
        assert.match(err.message, new RegExp(`layout 3.*layout ${LAYOUT}\\.`));
        return true;
      });
      // Still at layout 3: not migrated.
      const meta = await admin.query(`SELECT value FROM "${other}".meta WHERE key = 'layout'`);
      assert.equal(meta.rows[0].value, '3');
    } finally {
      await admin.query(`DROP SCHEMA IF EXISTS "${other}" CASCADE`);
    }
    await assert.rejects(inspectPostgres({ postgres: url, schema, scope: 'a/b' }), TypeError);
    await assert.rejects(inspectPostgres({ postgres: 42, schema, scope: 's' }), TypeError);
  });

  it('migrates a schema of layout 3 with live rows: they show no parent and no time, and the old agent\'s calls still work', async function () {
    const other = `wl_details_upgrade_${process.pid}`;
    const o = `"${other}"`;
    const scope = scopeName('upgrade');
    const key = schemaKey(other);
    const name = (text) => Buffer.from(text, 'utf16le');
    await admin.query(schemaSQL(other, 0, 3));
    // An agent of layout 3: its row, its life lock, its channel, a lock
    // held in x's row and a request queued for x.
    const old = new pg.Client(url);
    await old.connect();
    try {
      const channel = `web_locks_old_${process.pid}`;
      const { rows } = await old.query(`INSERT INTO ${o}.agents (id, scope, client_id, pid, channel)
        VALUES (nextval('${o}.agent_ids'), $1, 'old', pg_backend_pid(), $2) RETURNING id`, [scope, channel]);
      const id = rows[0].id;
      await old.query('SELECT pg_advisory_lock($1, $2)', [key, id]);
      await old.query(`LISTEN "${channel}"`);
      const made = await old.query(`INSERT INTO ${o}.names (scope, digest, name, held, exclusive, queued, holder_agent, holder_local, holder_token, holder_shared)
        VALUES ($1, sha256($2), $2, 1, true, 1, $3, 1, nextval('${o}.tokens'), false) RETURNING id`, [scope, name('x'), id]);
      await old.query(`INSERT INTO ${o}.requests (agent, local_id, id, name_id, shared) VALUES ($1, 2, nextval('${o}.tokens'), $2, false)`,
        [id, made.rows[0].id]);
      const b = await openPostgres(postgresTarget(scope, url, { schema: other }));
      backends.push(b);
      const meta = await admin.query(`SELECT value FROM ${o}.meta WHERE key = 'layout'`);
      assert.equal(meta.rows[0].value, String(LAYOUT));
      const shown = (e) => [e.name, e.clientId, e.serial, e.parent, e.pid, e.host, e.elapsed, e.alive];
      let look = await inspectPostgres({ postgres: url, schema: other, scope });
      assert.deepEqual(look.held.map(shown), [['x', 'old', 1, 0, null, null, null, true]]);
      assert.deepEqual(look.pending.map(shown), [['x', 'old', 2, 0, null, null, null, true]]);
      // w's row, last held by the new agent inside a lock (its parent and
      // time in the row), then by the old one, whose statement writes
      // neither: they are not the old agent's.
      const w = request(b, 'w');
      await w.granted;
      assert.equal(await b.release(w), true);
      const v = request(b, 'v');
      await v.granted;
      const w2 = request(b, 'w', v.serial);
      await w2.granted;
      assert.ok(await inRow(b, w2, o));
      assert.equal(await b.release(w2), true);
      const taken = await old.query(`UPDATE ${o}.names SET held = 1, exclusive = true, holder_agent = $1, holder_local = 3,
          holder_token = nextval('${o}.tokens'), holder_shared = false
        WHERE scope = $2 AND digest = sha256($3) AND held = 0 RETURNING id`, [id, scope, name('w')]);
      assert.equal(taken.rows.length, 1);
      // The old agent's call of request(), with its arguments of layout 3:
      // a lock of its own on a new name, from now on with a time.
      const token = await old.query(`SELECT ${o}.request($1, 4, $2, $3, false, false, false, false) AS token`, [id, scope, name('u')]);
      assert.notEqual(token.rows[0].token, '0');
      look = await inspectPostgres({ postgres: url, schema: other, scope });
      const oldOnes = look.held.filter((e) => e.clientId === 'old');
      assert.deepEqual(oldOnes.map((e) => [e.name, e.serial, e.parent, e.elapsed === null]),
        [['x', 1, 0, true], ['w', 3, 0, true], ['u', 4, 0, false]]);
      const details = await b.details();
      assert.deepEqual(details.held.map((e) => [e.name, e.clientId === 'old' ? 'old' : 'new', e.serial, e.parent]),
        [['x', 'old', 1, 0], ['v', 'new', v.serial, 0], ['w', 'old', 3, 0], ['u', 'old', 4, 0]]);
      await old.query(`SELECT ${o}.leave($1)`, [id]);
      assert.deepEqual((await b.details()).held.map((e) => e.name), ['v']);
    } finally {
      await old.end();
      for (const b of backends.splice(0)) await b.close();
      await admin.query(`DROP SCHEMA IF EXISTS ${o} CASCADE`);
    }
  });

  it('migrates a schema of layout 4 where PUBLIC may not execute new functions: queue(), new in layout 5, gets the grants of request()', async function () {
    const other = `wl_details_l4q_${process.pid}`;
    const o = `"${other}"`;
    const app = `wl_details_app_${process.pid}`;
    await admin.query(schemaSQL(other, 0, 4));
    await admin.query(`CREATE ROLE ${app}`);
    try {
      // Layout 4's request(), granted to the database's role, not to PUBLIC.
      const signature = `${o}.request(integer, bigint, text, bytea, boolean, boolean, boolean, boolean, bigint)`;
      await admin.query(`CREATE FUNCTION ${signature} RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint'`);
      await admin.query(`REVOKE EXECUTE ON FUNCTION ${signature} FROM PUBLIC`);
      await admin.query(`GRANT EXECUTE ON FUNCTION ${signature} TO ${app}`);
      await admin.query('ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC');
      try {
        await admin.query(schemaSQL(other, 4));
      } finally {
        await admin.query('ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO PUBLIC');
      }
      const { rows: [queue] } = await admin.query(`SELECT p.proacl IS NOT NULL AS own,
          has_function_privilege($1, p.oid, 'EXECUTE') AS app,
          EXISTS (SELECT FROM aclexplode(p.proacl) a WHERE a.grantee = 0) AS public
        FROM pg_proc p WHERE p.oid = $2::regproc`, [app, `${o}.queue`]);
      assert.deepEqual(queue, { own: true, app: true, public: false });
    } finally {
      await admin.query(`DROP SCHEMA IF EXISTS ${o} CASCADE`);
      await admin.query(`DROP ROLE ${app}`);
    }
  });

  it('migrates a schema of layout 4 whose request() has the default grants, once PUBLIC may not execute new functions: so may queue()', async function () {
    const other = `wl_details_l4p_${process.pid}`;
    const o = `"${other}"`;
    await admin.query(schemaSQL(other, 0, 4));
    try {
      await admin.query(`CREATE FUNCTION ${o}.request(integer, bigint, text, bytea, boolean, boolean, boolean, boolean, bigint)
        RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint'`);
      await admin.query('ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC');
      try {
        await admin.query(schemaSQL(other, 4));
      } finally {
        await admin.query('ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO PUBLIC');
      }
      const { rows: [queue] } = await admin.query(`SELECT EXISTS (SELECT FROM pg_proc p, aclexplode(p.proacl) a
          WHERE p.oid = $1::regproc AND a.grantee = 0 AND a.privilege_type = 'EXECUTE') AS public`, [`${o}.queue`]);
      assert.deepEqual(queue, { public: true });
    } finally {
      await admin.query(`DROP SCHEMA IF EXISTS ${o} CASCADE`);
    }
  });

  it('migrates a schema of layout 4 with a live agent: its calls grant and are granted through the functions of layout 5', async function () {
    const other = `wl_details_l4_${process.pid}`;
    const o = `"${other}"`;
    const scope = scopeName('l4');
    const name = (text) => Buffer.from(text, 'utf16le');
    await admin.query(schemaSQL(other, 0, 4));
    // Layout 4's process(), which layout 5 replaces: one that says so, with
    // a grant of its own (as a database that revokes EXECUTE from PUBLIC
    // grants it to its roles), which the replacement keeps.
    await admin.query(`CREATE FUNCTION ${o}.process(bigint, bigint, integer, boolean) RETURNS integer
      LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'the process() of layout 4'; END $$`);
    await admin.query(`REVOKE EXECUTE ON FUNCTION ${o}.process(bigint, bigint, integer, boolean) FROM PUBLIC`);
    const aclOf = async () => (await admin.query(`SELECT proacl::text AS acl FROM pg_proc WHERE proname = 'process' AND pronamespace = $1::regnamespace`, [o])).rows;
    const acl = await aclOf();
    // An agent of layout 4 (its row, its life lock, its channel), holding
    // x in x's row as its request statement takes a free name.
    const old = new pg.Client(url);
    await old.connect();
    try {
      const channel = `web_locks_l4_${process.pid}`;
      const { rows: [{ id }] } = await old.query(`INSERT INTO ${o}.agents (id, scope, client_id, pid, channel, backend_start, role_id, client_pid, client_host)
        SELECT nextval('${o}.agent_ids'), $1, 'old', pg_backend_pid(), $2, backend_start, usesysid, 1, 'h'
          FROM pg_stat_activity WHERE pid = pg_backend_pid() RETURNING id`, [scope, channel]);
      await old.query('SELECT pg_advisory_lock($1, $2)', [schemaKey(other), id]);
      await old.query(`LISTEN "${channel}"`);
      const made = await old.query(`INSERT INTO ${o}.names (scope, digest, name, held, exclusive, holder_agent, holder_local, holder_token, holder_shared)
        VALUES ($1, sha256($2), $2, 1, true, $3, 1, nextval('${o}.tokens'), false) RETURNING id`, [scope, name('x'), id]);
      const b = await openPostgres(postgresTarget(scope, url, { schema: other }));
      backends.push(b);
      assert.equal((await admin.query(`SELECT value FROM ${o}.meta WHERE key = 'layout'`)).rows[0].value, String(LAYOUT));
      // One process(), replaced: its grants kept, no other beside it.
      assert.deepEqual(await aclOf(), acl);
      // Queued by this version's statement behind the old agent's lock...
      const x = request(b, 'x');
      await new Promise((resolve) => { x.waits = resolve; });
      // ...and granted by the old agent's release statement of layout 4,
      // whose call of process() has four arguments.
      const freed = await old.query(`WITH freed AS (
          UPDATE ${o}.names SET held = held - 1, holder_agent = NULL WHERE id = $3 AND holder_agent = $1 AND holder_local = $2
            RETURNING id, held, exclusive, queued, holder_token)
        SELECT CASE WHEN held = 0 AND queued > 0 THEN ${o}.process(id, holder_token, 0, exclusive) ELSE 0 END AS granted FROM freed`,
      [id, 1, made.rows[0].id]);
      assert.equal(freed.rows[0].granted, 1);
      await x.granted;
      // The old agent queues by its call of request(), and this version's
      // release grants it, on its channel, in its notification's form.
      const told = new Promise((resolve) => old.once('notification', resolve));
      const queued = await old.query(`SELECT ${o}.request($1, 2, $2, $3, false, false, false, false, 0) AS token`, [id, scope, name('x')]);
      assert.equal(queued.rows[0].token, '0');
      assert.equal(await b.release(x), true);
      assert.match((await told).payload, /^2 g [1-9][0-9]*$/);
      const { rows } = await admin.query(`SELECT held, queued FROM ${o}.names WHERE id = $1`, [made.rows[0].id]);
      assert.deepEqual(rows, [{ held: 1, queued: 0 }]);
      await old.query(`SELECT ${o}.leave($1)`, [id]);
    } finally {
      await old.end();
      for (const b of backends.splice(0)) await b.close();
      await admin.query(`DROP SCHEMA IF EXISTS ${o} CASCADE`);
    }
  });
});
