'use strict';
// openLockManager(scope, { postgres }): the lock manager in a PostgreSQL
// database, on a real server that test/fixtures/postgres.js starts. Its
// agents here are managers of this thread (each open is one agent) and
// child processes (test/fixtures/agent.js).
const assert = require('node:assert/strict');
const childProcess = require('node:child_process');
const { promisify } = require('node:util');
const { api, holdOn, only, isDOMException, PKG, scopeName } = require('./fixtures/util');
const { spawnProcessAgent, terminateAll } = require('./fixtures/agent');
const { postgres, startServer, loginRole, grantSchema } = require('./fixtures/postgres');
const { Proxy } = require('./fixtures/tcp-proxy');
const { LAYOUT } = require('../lib/postgres/schema.js');

// A child that talks to the server is awaited, never waited for with the
// loop blocked: this process reads the server's log (fixtures/postgres.js),
// and a server whose log pipe is full stalls.
const execFile = promisify(childProcess.execFile);

describe('openLockManager (PostgreSQL)', function () {
  this.timeout(30000);
  let openLockManager;
  let LockManager;
  let url;
  let pg;
  let admin;
  const opened = [];

  before(async function () {
    ({ openLockManager, LockManager } = api());
    pg = require('pg');
    ({ url } = await postgres());
    admin = new pg.Client(url);
    await admin.connect();
  });
  afterEach(async function () {
    await terminateAll();
    for (const m of opened.splice(0)) await m.close();
  });
  after(async function () {
    if (admin) await admin.end();
  });

  async function open(scope, options = {}) {
    const m = await openLockManager(scope, Object.assign({ postgres: url }, options));
    opened.push(m);
    return m;
  }

  // Resolves once the manager's requests so far are in the database: its
  // query() goes on the same session, after them.
  async function settledIn(manager) {
    await manager.query();
  }

  // Resolves once n of the scope's sessions wait for a row lock. Polled: no
  // event says it.
  async function rowLockWaits(scope, n) {
    const deadline = Date.now() + 10000;
    for (;;) {
      const { rows } = await admin.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'
        AND wait_event IN ('transactionid', 'tuple') AND pid IN (SELECT pid FROM web_locks.agents WHERE scope = $1)`, [scope]);
      if (rows[0].n >= n) return;
      if (Date.now() > deadline) throw new Error(`${rows[0].n} sessions waiting, not ${n}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  // Resolves once n backends wait for a lock that `blocker` holds. Polled:
  // no event says it.
  async function blockedBy(blocker, n) {
    const deadline = Date.now() + 10000;
    for (;;) {
      const { rows } = await admin.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))', [blocker.processID]);
      if (rows[0].n >= n) return;
      if (Date.now() > deadline) throw new Error(`${rows[0].n} backends waiting, not ${n}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  describe('opening', function () {
    it('gives a LockManager; each open is a new agent with its own clientId', async function () {
      const scope = scopeName('open');
      const a = await open(scope);
      const b = await open(scope);
      assert.ok(a instanceof LockManager);
      assert.notEqual(a, b);
      const x = holdOn(a, 'x');
      const y = holdOn(b, 'y');
      await Promise.all([x.granted, y.granted]);
      const { held } = await a.query();
      assert.equal(held.length, 2);
      assert.notEqual(held[0].clientId, held[1].clientId);
      x.release();
      y.release();
      await Promise.all([x.done, y.done]);
    });

    it('refuses bad scopes, schemas and connection options with a TypeError', async function () {
      for (const scope of ['', 'a/b', '../x', 'x'.repeat(101), 'a b', 42]) {
        await assert.rejects(openLockManager(scope, { postgres: url }), TypeError, String(scope));
      }
      for (const schema of ['', 'x'.repeat(64), 'a\0b', 7]) {
        await assert.rejects(openLockManager('s', { postgres: url, schema }), TypeError, String(schema));
      }
      for (const value of [42, true, null]) {
        await assert.rejects(openLockManager('s', { postgres: value }), TypeError, String(value));
      }
      for (const keepalive of [0, 299, 1.5, '1000', 2 ** 31]) {
        await assert.rejects(openLockManager('s', { postgres: url, keepalive }), RangeError, String(keepalive));
      }
    });

    it('takes any schema name as a name: SQL in it is not run', async function () {
      // Quotes of identifiers and strings, and the dollar quotes of the
      // schema's function bodies.
      for (const schema of [`wl"; DROP TABLE pg_class; --${process.pid}`, `wl'); DROP TABLE pg_class; --${process.pid}`,
        `wl$$; DROP TABLE pg_class; $$${process.pid}`, `wl$body$$name$${process.pid}`]) {
        const m = await open(scopeName('inject'), { schema });
        assert.equal(await m.request('x', (lock) => lock.name), 'x', schema);
        assert.equal(typeof await m.request('x', (lock) => lock.token), 'bigint', schema);
        const { rows } = await admin.query('SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = $1', [schema]);
        assert.equal(rows[0].n, 1, schema);
        await m.close();
        await admin.query(`DROP SCHEMA "${schema.replace(/"/g, '""')}" CASCADE`);
      }
    });

    it('creates the schema once when many agents start at once', async function () {
      const schema = `wl_race_${process.pid}`;
      // (A second creation would fail its open: the objects would exist.)
      const managers = await Promise.all(Array.from({ length: 8 }, () => open(scopeName('race'), { schema })));
      const { rows } = await admin.query(`SELECT count(DISTINCT client_id)::int AS n FROM "${schema}".agents`);
      assert.equal(rows[0].n, 8);
      for (const m of managers) await m.close();
      await admin.query(`DROP SCHEMA "${schema}" CASCADE`);
    });

    it('refuses a schema of another layout, naming both', async function () {
      const schema = `wl_layout_${process.pid}`;
      const m = await open(scopeName('layout'), { schema });
      await m.close();
      await admin.query(`UPDATE "${schema}".meta SET value = '99' WHERE key = 'layout'`);
      await assert.rejects(openLockManager('s', { postgres: url, schema }), (err) => {
        assert.equal(err.code, 'ELAYOUT');
        assert.match(err.message, new RegExp(`layout 99.*layout ${LAYOUT}\\.`));
        return true;
      });
      await admin.query(`DROP SCHEMA "${schema}" CASCADE`);
    });

    it('migrates a schema of layout 1 with a live agent in it: that agent keeps its channel, and is robbed and granted on it', async function () {
      const { schemaSQL } = require('../lib/postgres/schema.js');
      const { schemaKey } = require('../lib/postgres/options.js');
      const schema = `wl_upgrade_${process.pid}`;
      const scope = scopeName('upgrade');
      const key = schemaKey(schema);
      await admin.query(schemaSQL(schema, 0, 1));
      // An agent of layout 1: its life lock, its row, its channel, and a
      // lock held in a name's row.
      const old = new pg.Client(url);
      await old.connect();
      try {
        const { rows } = await old.query(`INSERT INTO "${schema}".agents (id, scope, client_id, pid)
          VALUES (nextval('"${schema}".agent_ids'), $1, 'old', pg_backend_pid()) RETURNING id`, [scope]);
        const id = rows[0].id;
        await old.query('SELECT pg_advisory_lock($1, $2)', [key, id]);
        await old.query(`LISTEN "web_locks.${key}.${id}"`);
        await old.query(`INSERT INTO "${schema}".names (scope, digest, name, held, exclusive, holder_agent, holder_local, holder_token, holder_shared)
          VALUES ($1, sha256($2), $2, 1, true, $3, 1, nextval('"${schema}".tokens'), false)`, [scope, Buffer.from('x', 'utf16le'), id]);
        // What it is notified on its channel, by payload.
        const notified = (pattern) => new Promise((resolve) => {
          const listener = (message) => {
            if (!pattern.test(message.payload)) return;
            old.off('notification', listener);
            resolve(message);
          };
          old.on('notification', listener);
        });
        // It watches the agent that joins next: told so.
        const watching = notified(/^r$/);
        const m = await open(scope, { schema });
        assert.equal((await watching).channel, `web_locks.${key}.${id}`);
        const meta = await admin.query(`SELECT value FROM "${schema}".meta WHERE key = 'layout'`);
        assert.equal(meta.rows[0].value, String(LAYOUT));
        assert.deepEqual(only(await m.query(), 'x').held.map((i) => i.clientId), ['old']);
        const robbed = notified(/^1 s$/);
        assert.equal(await m.request('x', { steal: true }, (lock) => lock.name), 'x');
        assert.equal((await robbed).channel, `web_locks.${key}.${id}`);
        // Queued behind a lock of the new agent, granted on the old channel.
        const h = holdOn(m, 'y');
        await h.granted;
        await old.query(`SELECT "${schema}".request($1, 2, $2, $3, false, false, false, false)`, [id, scope, Buffer.from('y', 'utf16le')]);
        const granted = notified(/^2 g [0-9]+$/);
        h.release();
        await h.done;
        assert.equal((await granted).channel, `web_locks.${key}.${id}`);
        await old.query(`SELECT "${schema}".leave($1)`, [id]);
        assert.deepEqual(await m.query(), { held: [], pending: [] });
        await m.close();
      } finally {
        await old.end();
        await admin.query(`DROP SCHEMA "${schema}" CASCADE`);
      }
    });

    it('tells a role without rights what to grant, and works once the owner made the schema and granted them', async function () {
      const role = `wl_limited_${process.pid}`;
      const schema = `wl_owned_${process.pid}`;
      const limited = await loginRole(admin, url, role, 'limited');
      try {
        await assert.rejects(openLockManager('s', { postgres: limited, schema }), (err) => {
          assert.equal(err.code, 'EACCES');
          assert.match(err.message, /GRANT CREATE ON DATABASE/);
          assert.match(err.message, /postgresSchema/);
          return true;
        });
        await admin.query(api().postgresSchema(schema));
        await grantSchema(admin, schema, role);
        const m = await open('s', { postgres: limited, schema });
        assert.equal(await m.request('x', (lock) => lock.mode), 'exclusive');
        await m.close();
      } finally {
        await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await admin.query(`DROP ROLE ${role}`);
      }
    });

    it('tells a role that may use but not migrate a schema of layout 2 what its owner must run, and works once it ran it', async function () {
      const { schemaSQL } = require('../lib/postgres/schema.js');
      const role = `wl_user_${process.pid}`;
      const schema = `wl_old_${process.pid}`;
      const as = await loginRole(admin, url, role, 'user');
      try {
        await admin.query(schemaSQL(schema, 0, 2));
        await grantSchema(admin, schema, role);
        await assert.rejects(openLockManager('s', { postgres: as, schema }), (err) => {
          assert.equal(err.code, 'EACCES');
          assert.match(err.message, new RegExp(`has layout 2, which .* may not migrate to layout ${LAYOUT} `));
          assert.ok(err.message.includes(`postgresSchema(${JSON.stringify(schema)}, 2)`), err.message);
          return true;
        });
        const meta = await admin.query(`SELECT value FROM "${schema}".meta WHERE key = 'layout'`);
        assert.equal(meta.rows[0].value, '2');
        await admin.query(api().postgresSchema(schema, 2));
        const m = await open('s', { postgres: as, schema });
        assert.equal(await m.request('x', (lock) => lock.mode), 'exclusive');
        await m.close();
      } finally {
        await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await admin.query(`DROP ROLE ${role}`);
      }
    });

    it('a close() that is the last thing a script does finishes before Node exits: the agent leaves', async function () {
      const scope = scopeName('last-close');
      const code = `const { openLockManager } = require(${JSON.stringify(PKG)});
        openLockManager(${JSON.stringify(scope)}, { postgres: ${JSON.stringify(url)} }).then(async (m) => {
          await m.request('x', () => {});
          m.close().then(() => console.log('closed'));
        });`;
      const { stdout: out } = await execFile(process.execPath, ['-e', code], { encoding: 'utf8', timeout: 20000 });
      assert.equal(out.trim(), 'closed');
      const { rows } = await admin.query('SELECT count(*)::int AS n FROM web_locks.agents WHERE scope = $1', [scope]);
      assert.equal(rows[0].n, 0);
    });

    it("says to install 'pg' when it is missing", function () {
      const hide = "const M = require('module'); const r = M._resolveFilename; " +
        "M._resolveFilename = function (n, ...a) { if (n === 'pg') { const e = new Error('no pg'); e.code = 'MODULE_NOT_FOUND'; throw e } return r.call(this, n, ...a) };";
      const code = `${hide} require(${JSON.stringify(PKG)}).openLockManager('s', { postgres: 'postgres://x@127.0.0.1:1/x' })` +
        '.then(() => process.exit(3), (e) => { console.log(e.message); process.exit(0) })';
      const out = childProcess.execFileSync(process.execPath, ['-e', code], { encoding: 'utf8' });
      assert.match(out, /npm install pg/);
    });
  });

  describe('the spec, across agents', function () {
    it('grants one name in request order, exclusive then shared together', async function () {
      const scope = scopeName('order');
      const [a, b, c] = await Promise.all([open(scope), open(scope), open(scope)]);
      const order = [];
      const first = holdOn(a, 'x');
      await first.granted;
      const second = b.request('x', { mode: 'shared' }, () => { order.push('b'); });
      await settledIn(b);
      const third = c.request('x', { mode: 'shared' }, (lock) => { order.push('c'); return lock.mode; });
      await settledIn(c);
      const { held, pending } = only(await a.query(), 'x');
      assert.deepEqual(held.map((i) => i.mode), ['exclusive']);
      assert.deepEqual(pending.map((i) => i.mode), ['shared', 'shared']);
      first.release();
      assert.equal(await third, 'shared');
      await second;
      await first.done;
      assert.deepEqual(order.sort(), ['b', 'c']);
    });

    it('ifAvailable gives null while another agent holds the name', async function () {
      const scope = scopeName('ifavail');
      const [a, b] = await Promise.all([open(scope), open(scope)]);
      const h = holdOn(a, 'x');
      await h.granted;
      assert.equal(await b.request('x', { ifAvailable: true }, (lock) => lock), null);
      h.release();
      await h.done;
      assert.equal(await b.request('x', { ifAvailable: true }, (lock) => lock.name), 'x');
    });

    it('steal robs the holder in another agent, which rejects with an AbortError; the thief goes first', async function () {
      const scope = scopeName('steal');
      const [a, b, c] = await Promise.all([open(scope), open(scope), open(scope)]);
      const h = holdOn(a, 'x');
      await h.granted;
      const waiting = c.request('x', () => 'c');
      await settledIn(c);
      assert.equal(await b.request('x', { steal: true }, async () => {
        assert.deepEqual(only(await b.query(), 'x').pending.length, 1);
        return 'thief';
      }), 'thief');
      await assert.rejects(h.done, isDOMException('AbortError'));
      assert.equal(await waiting, 'c');
      h.release();
    });

    it('tells monitorContention() which requests waited: those granted later, not those granted at once', async function () {
      const monitor = api().monitorContention();
      try {
        const scope = scopeName('monitor');
        const [a, b] = await Promise.all([open(scope), open(scope)]);
        const name = `monitored-${process.pid}`;
        await b.request(name, () => {});
        const h = holdOn(a, name);
        await h.granted;
        const waiter = b.request(name, () => {});
        await settledIn(b);
        h.release();
        await h.done;
        await waiter;
        const figures = monitor.figures().get(name);
        assert.equal(figures.granted, 3);
        assert.equal(figures.waited, 1);
        assert.ok(figures.waitMs > 0, JSON.stringify(figures));
      } finally {
        monitor.stop();
      }
    });

    it('an aborted request leaves the queue; the signal reason rejects it', async function () {
      const scope = scopeName('abort');
      const [a, b] = await Promise.all([open(scope), open(scope)]);
      const h = holdOn(a, 'x');
      await h.granted;
      const controller = new AbortController();
      const waiting = b.request('x', { signal: controller.signal }, () => 'never');
      await settledIn(b);
      assert.equal(only(await a.query(), 'x').pending.length, 1);
      controller.abort(new Error('no more'));
      await assert.rejects(waiting, /no more/);
      // The abort reaches the database after its request: wait for b's calls.
      await settledIn(b);
      assert.equal(only(await a.query(), 'x').pending.length, 0);
      h.release();
      await h.done;
    });

    // A queued request aborted while its call is held in the database (its
    // name's row locked by another connection), then the lock before it
    // released, an ifAvailable request and a query(), all by the same agent.
    async function abortBeforeLater(m, scope) {
      const h = holdOn(m, 'x');
      await h.granted;
      const blocker = new pg.Client(url);
      await blocker.connect();
      try {
        await blocker.query('BEGIN');
        await blocker.query('SELECT FROM web_locks.names WHERE scope = $1 FOR UPDATE', [scope]);
        const controller = new AbortController();
        const aborted = m.request('x', { signal: controller.signal }, () => 'never');
        await blockedBy(blocker, 1);
        controller.abort();
        await assert.rejects(aborted, { name: 'AbortError' });
        h.release();
        // (Its release call is made in microtasks.)
        await new Promise((resolve) => setImmediate(resolve));
        const available = m.request('x', { ifAvailable: true }, (lock) => lock && lock.name);
        const snapshot = m.query();
        await blocker.query('COMMIT');
        await h.done;
        assert.equal(await available, 'x');
        assert.deepEqual(only(await snapshot, 'x').pending, []);
      } finally {
        await blocker.end();
      }
    }

    it('an abort reaches the database when the signal fires, before the agent\'s later calls, even while its request\'s call is on the way', async function () {
      const scope = scopeName('abort-first');
      await abortBeforeLater(await open(scope), scope);
    });

    it('through a pg.Pool too: an abort reaches the database before the agent\'s later calls', async function () {
      // One connection: the pool sends in order what it is given. More: it
      // would send the later calls beside the held one.
      for (const max of [1, 4]) {
        const pool = new pg.Pool({ connectionString: url, max });
        try {
          const scope = scopeName('abort-first-pool');
          const m = await open(scope, { postgres: pool });
          await abortBeforeLater(m, scope);
          await m.close();
        } finally {
          await pool.end();
        }
      }
    });

    it('gives every grant a fencing token greater than every earlier one, across agents, a thief included', async function () {
      const scope = scopeName('token');
      const [a, b] = await Promise.all([open(scope), open(scope)]);
      const tokens = [];
      tokens.push(await a.request('x', (lock) => lock.token));
      tokens.push(await b.request('y', (lock) => lock.token));
      const h = holdOn(a, 'x');
      const robbed = (await h.granted).token;
      const thief = await b.request('x', { steal: true }, (lock) => lock.token);
      await assert.rejects(h.done, isDOMException('AbortError'));
      const queued = b.request('x', { mode: 'shared' }, (lock) => lock.token);
      tokens.push(robbed, thief, await queued);
      for (const t of tokens) assert.equal(typeof t, 'bigint');
      for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `${tokens}`);
      h.release();
    });

    it('raises the ceiling of the tokens when a draw reaches it: they keep increasing', async function () {
      const scope = scopeName('ceiling');
      const [a, b] = await Promise.all([open(scope), open(scope)]);
      const tokens = [await a.request('x', (lock) => lock.token)];
      // The next three draws are the block's last: the fourth raises it.
      const before = BigInt((await admin.query("SELECT ceiling, setval('web_locks.tokens', ceiling - 4) FROM web_locks.token_block")).rows[0].ceiling);
      for (let i = 0; i < 8; i++) tokens.push(await (i % 2 ? a : b).request('x', (lock) => lock.token));
      for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `${tokens}`);
      assert.ok(tokens[tokens.length - 1] >= before, `${tokens} below ${before}`);
      const { rows } = await admin.query('SELECT ceiling FROM web_locks.token_block');
      assert.ok(BigInt(rows[0].ceiling) > tokens[tokens.length - 1], JSON.stringify(rows));
    });

    it('hands out no token twice while the ceiling is raised under many agents at once', async function () {
      this.timeout(60000);
      const scope = scopeName('raises');
      const managers = await Promise.all([open(scope), open(scope), open(scope), open(scope)]);
      const names = ['a', 'b', 'c'];
      const tokens = new Map(names.map((n) => [n, []]));
      let stop = false;
      // Every few milliseconds the counter is moved to just below the
      // ceiling: most draws cross it, from several sessions at once. (Only
      // while it is far below, so that it never moves back past a draw.)
      const raiser = (async () => {
        let raises = 0;
        while (!stop) {
          const { rowCount } = await admin.query("SELECT setval('web_locks.tokens', b.ceiling - 2) " +
            'FROM web_locks.token_block b, web_locks.tokens t WHERE t.last_value < b.ceiling - 1000');
          raises += rowCount;
          await new Promise((resolve) => setImmediate(resolve));
        }
        return raises;
      })();
      await Promise.all(managers.map(async (m, i) => {
        for (let k = 0; k < 60; k++) {
          const name = names[(i + k) % names.length];
          const mode = k % 3 ? 'exclusive' : 'shared';
          await m.request(name, { mode }, (lock) => { tokens.get(name).push([lock.token, mode]); });
        }
      }));
      stop = true;
      assert.ok(await raiser > 10);
      const all = [...tokens.values()].flat().map(([token]) => token);
      assert.equal(new Set(all).size, all.length, 'a token handed out twice');
      // An exclusive lock's callback runs alone: their order is the grants'.
      for (const [name, list] of tokens) {
        const exclusive = list.filter(([, mode]) => mode === 'exclusive').map(([token]) => token);
        for (let i = 1; i < exclusive.length; i++) assert.ok(exclusive[i] > exclusive[i - 1], `${name}: ${exclusive}`);
      }
    });

    it('takes a name\'s row before the token lock: a request on a free name and a steal meet at a raise without a deadlock', async function () {
      const scope = scopeName('order');
      const [a, b] = await Promise.all([open(scope), open(scope)]);
      await a.request('x', () => {});
      const blocker = new pg.Client(url);
      await blocker.connect();
      try {
        // Every draw from now on is at the ceiling and needs token_block,
        // which the blocker holds until both calls wait.
        await admin.query("SELECT setval('web_locks.tokens', ceiling) FROM web_locks.token_block");
        await blocker.query('BEGIN');
        await blocker.query('SELECT FROM web_locks.token_block FOR UPDATE');
        const first = a.request('x', () => 'first').then((v) => v, (e) => e);
        await rowLockWaits(scope, 1);
        const thief = b.request('x', { steal: true }, () => 'thief');
        await rowLockWaits(scope, 2);
        await blocker.query('COMMIT');
        assert.equal(await thief, 'thief');
        // Granted, then robbed by the thief, or released before it.
        const outcome = await first;
        assert.ok(outcome === 'first' || (outcome instanceof DOMException && outcome.name === 'AbortError'), String(outcome));
      } finally {
        await blocker.end();
      }
    });

    it('a release that fails in the database ends the session: the lock counts as lost, is not left held, and the next agent is granted', async function () {
      const scope = scopeName('failed-release');
      const [a, b] = await Promise.all([open(scope), open(scope)]);
      const h = holdOn(a, 'x');
      await h.granted;
      const next = b.request('x', () => 'b');
      await settledIn(b);
      const blocker = new pg.Client(url);
      await blocker.connect();
      try {
        // The name's row locked: the release waits for it, and is cancelled
        // (as an administrator or a statement_timeout would).
        await blocker.query('BEGIN');
        await blocker.query('SELECT FROM web_locks.names WHERE scope = $1 FOR UPDATE', [scope]);
        h.release();
        await rowLockWaits(scope, 1);
        const { rows } = await admin.query(`SELECT pg_cancel_backend(a.pid) AS cancelled FROM pg_stat_activity a
          JOIN web_locks.agents g ON g.pid = a.pid WHERE g.scope = $1 AND a.wait_event_type = 'Lock'`, [scope]);
        assert.deepEqual(rows, [{ cancelled: true }]);
        await assert.rejects(h.done, (error) => isDOMException('AbortError')(error) && error.cause && error.cause.code === '57014');
        await blocker.query('COMMIT');
        assert.equal(await next, 'b');
      } finally {
        await blocker.end();
      }
    });

    it('keeps the tokens increasing across a crash of the server, which resets their counter', async function () {
      this.timeout(120000);
      // Commits wait for the log (not the tests' default), as the
      // guarantee needs; a crash of the server alone does not need fsync.
      const server = await startServer({ restartable: true, settings: { fsync: 'off' } });
      const direct = new pg.Client(server.url);
      try {
        const scope = scopeName('crash');
        let m = await openLockManager(scope, { postgres: server.url });
        const before = [];
        for (let i = 0; i < 40; i++) before.push(await m.request('x', (lock) => lock.token));
        const held = holdOn(m, 'x');
        before.push((await held.granted).token);
        await server.down({ crash: true });
        await assert.rejects(held.done, isDOMException('AbortError'));
        await m.close();
        await server.up();
        await direct.connect();
        const { rows } = await direct.query("SELECT c.relpersistence, s.is_called, current_setting('server_version_num')::int AS version " +
          'FROM pg_class c, web_locks.tokens s WHERE c.oid = \'web_locks.tokens\'::regclass');
        if (rows[0].version >= 150000) {
          // Unlogged, and so reset by the crash: the case under test.
          assert.equal(rows[0].relpersistence, 'u');
          assert.equal(rows[0].is_called, false);
        }
        m = await openLockManager(scope, { postgres: server.url });
        const after = await m.request('x', (lock) => lock.token);
        await m.close();
        assert.ok(after > before[before.length - 1], `${after} after ${before}`);
      } finally {
        await direct.end().catch(() => {});
        await server.stop();
      }
    });

    it('keeps names exactly: lone surrogates, U+FFFD and a 1 MB name are names of their own', async function () {
      const m = await open(scopeName('names'));
      const names = ['\uD800', '\uFFFD', '\uDC00\uD800', 'x'.repeat(1 << 20)];
      const held = names.map((name) => holdOn(m, name));
      const locks = await Promise.all(held.map((h) => h.granted));
      assert.deepEqual(locks.map((l) => l.name), names);
      const snapshot = await m.query();
      assert.deepEqual(snapshot.held.map((i) => i.name).sort(), [...names].sort());
      for (const h of held) h.release();
      await Promise.all(held.map((h) => h.done));
    });

    it('close() rejects its unsettled requests and releases its locks; later calls reject with InvalidStateError', async function () {
      const scope = scopeName('close');
      const [a, b] = await Promise.all([open(scope), open(scope)]);
      const h = holdOn(a, 'x');
      await h.granted;
      const waiting = holdOn(a, 'y');
      await waiting.granted;
      const next = b.request('x', () => 'b');
      await settledIn(b);
      await a.close();
      await assert.rejects(h.done, isDOMException('AbortError'));
      await assert.rejects(waiting.done, isDOMException('AbortError'));
      assert.equal(await next, 'b');
      await assert.rejects(a.request('z', () => {}), isDOMException('InvalidStateError'));
      await assert.rejects(a.query(), isDOMException('InvalidStateError'));
    });
  });

  describe('connections', function () {
    it('uses two connections per agent however many requests wait', async function () {
      const scope = scopeName('conns');
      const managers = await Promise.all([open(scope), open(scope), open(scope)]);
      const h = holdOn(managers[0], 'x');
      await h.granted;
      const waiting = [];
      for (const m of managers) {
        for (let i = 0; i < 20; i++) waiting.push(m.request('x', () => {}));
      }
      await Promise.all(managers.map(settledIn));
      const sessions = await admin.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'web-locks'`);
      // This file's other managers are closed after each test: every
      // web-locks connection now is one of these three agents'.
      assert.ok(sessions.rows[0].n <= 6, `${sessions.rows[0].n} connections`);
      h.release();
      await Promise.all(waiting);
      await h.done;
    });

    it('times its keepalive on a monotonic clock: a step of the wall clock back stops no keepalive, one forward during a call ends no session', async function () {
      this.timeout(20000);
      const keepalive = 2400;
      const scope = scopeName('clock');
      const m = await open(scope, { keepalive });
      const h = holdOn(m, 'x');
      await h.granted;
      let lost = false;
      h.done.catch(() => { lost = true; });
      const now = Date.now;
      let step = 0;
      Date.now = () => now() + step;
      const blocker = new pg.Client(url);
      try {
        // Back an hour: the server ends a session silent for keepalive.
        step = -3600e3;
        await new Promise((resolve) => setTimeout(resolve, keepalive * 1.5));
        assert.equal(lost, false);
        assert.equal(only(await m.query(), 'x').held.length, 1);
        // Forward an hour while a call waits in the database, for less than
        // keepalive but past a keepalive tick (a third of it).
        step = 0;
        await blocker.connect();
        await blocker.query('BEGIN');
        await blocker.query('SELECT FROM web_locks.names WHERE scope = $1 FOR UPDATE', [scope]);
        const call = m.request('x', { ifAvailable: true }, (lock) => lock);
        await blockedBy(blocker, 1);
        step = 3600e3;
        await new Promise((resolve) => setTimeout(resolve, keepalive / 2));
        await blocker.query('COMMIT');
        assert.equal(await call, null);
        assert.equal(lost, false);
        h.release();
        await h.done;
      } finally {
        Date.now = now;
        await blocker.end();
      }
    });

    it('sends its calls on the session one at a time itself: many at once draw no warning from pg', async function () {
      const scope = scopeName('one-at-a-time');
      const code = `const warnings = [];
        process.on('warning', (w) => warnings.push(w.name + ': ' + w.message));
        const { openLockManager } = require(${JSON.stringify(PKG)});
        openLockManager(${JSON.stringify(scope)}, { postgres: ${JSON.stringify(url)} }).then(async (m) => {
          const all = [];
          for (let i = 0; i < 20; i++) all.push(m.request('n' + (i % 3), { mode: i % 2 ? 'shared' : 'exclusive' }, () => i));
          const values = await Promise.all(all);
          await m.close();
          setImmediate(() => console.log(JSON.stringify({ values, warnings })));
        });`;
      const out = JSON.parse((await execFile(process.execPath, ['-e', code], { encoding: 'utf8', timeout: 20000 })).stdout);
      assert.deepEqual(out.values, Array.from({ length: 20 }, (_, i) => i));
      assert.deepEqual(out.warnings, []);
    });

    it('makes its calls through a pg.Pool given as the postgres option', async function () {
      const pool = new pg.Pool({ connectionString: url, max: 2 });
      try {
        const scope = scopeName('pool');
        const a = await open(scope, { postgres: pool });
        const b = await open(scope);
        const h = holdOn(a, 'x');
        await h.granted;
        const next = b.request('x', () => 'b');
        await settledIn(b);
        assert.deepEqual(only(await a.query(), 'x').pending.length, 1);
        h.release();
        assert.equal(await next, 'b');
        await h.done;
        assert.ok(pool.totalCount >= 1);
        await a.close();
      } finally {
        await pool.end();
      }
    });

    it('refuses a pool whose connections run at another isolation level than READ COMMITTED, saying so', async function () {
      const pool = new pg.Pool({ connectionString: url, max: 1, options: '-c default_transaction_isolation=repeatable\\ read' });
      try {
        await assert.rejects(open(scopeName('isolation'), { postgres: pool }),
          (error) => error.code === 'EISOLATION' && /REPEATABLE READ/.test(error.message) && /READ COMMITTED/.test(error.message));
      } finally {
        await pool.end();
      }
    });

    it('runs its statements at READ COMMITTED where the connection\'s default is REPEATABLE READ: a release that waited for the name\'s row does not fail', async function () {
      const scope = scopeName('repeatable');
      const a = await open(scope, { postgres: { connectionString: url, options: '-c default_transaction_isolation=repeatable\\ read' } });
      const h = holdOn(a, 'x');
      await h.granted;
      const blocker = new pg.Client(url);
      await blocker.connect();
      try {
        // A new version of the row, committed while the release waits for
        // it: at REPEATABLE READ the release would fail (40001).
        await blocker.query('BEGIN');
        await blocker.query('UPDATE web_locks.names SET queued = queued WHERE scope = $1', [scope]);
        h.release('done');
        await rowLockWaits(scope, 1);
        await blocker.query('COMMIT');
        assert.equal(await h.done, 'done');
        assert.equal(only(await a.query(), 'x').held.length, 0);
      } finally {
        await blocker.end();
      }
    });

    // A pool whose calls of one statement run, and then their connection
    // "breaks" before the answer.
    function losing(pool, statement) {
      return {
        options: pool.options,
        connect: (...args) => pool.connect(...args),
        query: async (query, values) => {
          const result = await pool.query(query, values);
          if (query.name !== undefined && query.name.endsWith(`_${statement}`)) throw new Error('Connection terminated unexpectedly');
          return result;
        },
      };
    }

    it('through a pool, a request whose answer is lost ends the session: the lock it may hold is not left held', async function () {
      const pool = new pg.Pool({ connectionString: url, max: 2 });
      try {
        const scope = scopeName('lost-answer');
        const a = await open(scope, { postgres: losing(pool, 'request') });
        const b = await open(scope);
        await assert.rejects(a.request('x', () => 'a'), isDOMException('AbortError'));
        assert.equal(await b.request('x', () => 'b'), 'b');
      } finally {
        await pool.end();
      }
    });

    it('through a pool, an abort whose answer is lost ends the session: its other locks count as lost', async function () {
      const pool = new pg.Pool({ connectionString: url, max: 2 });
      try {
        const scope = scopeName('lost-abort');
        const a = await open(scope, { postgres: losing(pool, 'abort') });
        const b = await open(scope);
        const other = holdOn(a, 'y');
        await other.granted;
        const h = holdOn(b, 'x');
        await h.granted;
        const controller = new AbortController();
        const waiting = a.request('x', { signal: controller.signal }, () => 'never');
        await settledIn(a);
        controller.abort();
        await assert.rejects(waiting, { name: 'AbortError' });
        await assert.rejects(other.done, isDOMException('AbortError'));
        h.release();
        await h.done;
      } finally {
        await pool.end();
      }
    });
  });

  describe('agents in other processes', function () {
    async function agent(scope) {
      return spawnProcessAgent({ scope, postgres: url });
    }

    it('queue in order with this process, and see the same query()', async function () {
      const scope = scopeName('procs');
      const m = await open(scope);
      const [p, q] = await Promise.all([agent(scope), agent(scope)]);
      const h = holdOn(m, 'x');
      await h.granted;
      const pid = await p.request('x');
      const qid = await q.request('x', { mode: 'shared' });
      const mine = await m.query();
      assert.deepEqual(only(await p.query(), 'x'), only(mine, 'x'));
      assert.deepEqual(only(mine, 'x').pending.map((i) => i.mode), ['exclusive', 'shared']);
      h.release();
      await p.granted(pid);
      assert.equal(q.isGranted(qid), false);
      p.release(pid);
      await q.granted(qid);
      q.release(qid);
      await q.settled(qid);
      await h.done;
    });

    it('a SIGKILLed holder is released and the next agent granted within a second', async function () {
      const scope = scopeName('kill');
      const m = await open(scope);
      const p = await agent(scope);
      const pid = await p.request('x');
      await p.granted(pid);
      const granted = holdOn(m, 'x');
      await settledIn(m);
      const killed = Date.now();
      p.child.kill('SIGKILL');
      await granted.granted;
      const ms = Date.now() - killed;
      assert.ok(ms < 1000, `granted ${ms} ms after the kill`);
      granted.release();
      await granted.done;
    });

    it("a SIGKILLed agent's connections are all gone within seconds, its watcher's too (which was waiting for a lock)", async function () {
      const scope = scopeName('gone');
      const m = await open(scope);
      const p = await agent(scope);
      const pid = await p.request('x');
      await p.granted(pid);
      const mine = async () => (await admin.query(`SELECT count(*)::int AS n FROM pg_stat_activity a JOIN web_locks.agents g ON g.pid = a.pid
        WHERE g.scope = $1`, [scope])).rows[0].n;
      const all = async () => (await admin.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'web-locks'
        AND backend_start >= (SELECT min(a.backend_start) FROM pg_stat_activity a JOIN web_locks.agents g ON g.pid = a.pid WHERE g.scope = $1)`, [scope])).rows[0].n;
      assert.equal(await mine(), 2);
      // Each agent's watcher connects once it has a neighbour to watch.
      const count = async (done) => {
        const until = Date.now() + 5000;
        let n;
        while (!done(n = await all()) && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50));
        return n;
      };
      const before = await count((n) => n === 4);
      assert.equal(before, 4, `${before} connections of the two agents`);
      p.child.kill('SIGKILL');
      const now = await count((n) => n <= 1);
      assert.equal(now, 1, `${now} connections left 5 s after the kill, not only the live agent's session`);
      assert.equal(await m.request('x', (lock) => lock.name), 'x');
    });

    it('a session ended by the server (pg_terminate_backend) loses its locks: they reject with an AbortError; the manager joins again as a new agent', async function () {
      const scope = scopeName('terminate');
      const [a, b] = await Promise.all([open(scope), open(scope)]);
      const h = holdOn(a, 'x');
      await h.granted;
      const next = b.request('x', () => 'b');
      await settledIn(b);
      const before = only(await a.query(), 'x').held[0].clientId;
      const { rows } = await admin.query(`SELECT pid FROM pg_stat_activity WHERE application_name = 'web-locks' AND pid IN (SELECT pid FROM web_locks.agents WHERE client_id = $1)`, [before]);
      assert.equal(rows.length, 1);
      await admin.query('SELECT pg_terminate_backend($1)', [rows[0].pid]);
      await assert.rejects(h.done, isDOMException('AbortError'));
      assert.equal(await next, 'b');
      assert.equal(await a.request('x', (lock) => lock.name), 'x');
      h.release();
    });

    it('a network cut: the cut-off side loses its locks within keepalive; the server ends its session and the next agent is granted; then it joins again', async function () {
      const { port } = await postgres();
      const proxy = await Proxy.start('127.0.0.1', port);
      try {
        const through = new URL(url);
        through.port = String(proxy.port);
        const scope = scopeName('cut');
        const a = await open(scope, { postgres: through.href, keepalive: 1000 });
        const b = await open(scope);
        const h = holdOn(a, 'x');
        await h.granted;
        const next = b.request('x', () => Date.now());
        await settledIn(b);
        const cutAt = Date.now();
        proxy.cut();
        await assert.rejects(h.done, isDOMException('AbortError'));
        const lost = Date.now() - cutAt;
        const granted = (await next) - cutAt;
        assert.ok(lost < 2500, `the cut-off side learned it after ${lost} ms`);
        assert.ok(granted < 5000, `the next agent was granted ${granted} ms after the cut`);
        // A new connection gets through: the manager joins again.
        assert.equal(await a.request('x', (lock) => lock.name), 'x');
        h.release();
      } finally {
        await proxy.close();
      }
    });

    it('the agent a manager joins as after a lost session has a clientId of its own', async function () {
      const scope = scopeName('rejoin');
      const a = await open(scope);
      const h = holdOn(a, 'x');
      await h.granted;
      const before = only(await a.query(), 'x').held[0].clientId;
      const { rows } = await admin.query('SELECT pid FROM web_locks.agents WHERE client_id = $1', [before]);
      assert.equal(rows.length, 1);
      await admin.query('SELECT pg_terminate_backend($1)', [rows[0].pid]);
      await assert.rejects(h.done, isDOMException('AbortError'));
      const after = await a.request('y', async () => only(await a.query(), 'y').held[0].clientId);
      assert.notEqual(after, before);
      h.release();
    });
  });
});
