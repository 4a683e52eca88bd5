'use strict';
// openLockManager(scope, { postgres }) with every way node-postgres users
// give their connection settings, as a role whose password the server
// checks by SCRAM (test/fixtures/postgres.js): a pg.Pool made from fields
// (pg-pool keeps its password out of its options' enumerable properties),
// from a connection string, with the password as an async function; pg's
// config object for a client, with a password or a password function; and
// SSL options, in a pool and in a config object. Each manager joins, and
// its session, watcher and calls all connect: a lock goes from one agent to
// another.
const assert = require('node:assert/strict');
const { api, holdOn, scopeName } = require('./fixtures/util');
const { postgres, loginRole } = require('./fixtures/postgres');

const ROLE = `wl_scram_${process.pid}`;
const PASSWORD = 'scram-only';

describe('openLockManager (PostgreSQL): connection settings, as a role with a password (SCRAM)', function () {
  this.timeout(30000);
  const schema = `wl_connect_${process.pid}`;
  let openLockManager;
  let pg;
  let url;
  let ca;
  let admin;
  let fields;
  const opened = [];
  const pools = [];

  before(async function () {
    ({ openLockManager } = api());
    pg = require('pg');
    ({ url, ca } = await postgres());
    admin = new pg.Client(url);
    await admin.connect();
    await loginRole(admin, url, ROLE, PASSWORD);
    await admin.query(`GRANT CREATE ON DATABASE ${(await admin.query('SELECT current_database() AS d')).rows[0].d} TO ${ROLE}`);
    const at = new URL(url);
    fields = { host: at.hostname, port: Number(at.port), user: ROLE, password: PASSWORD, database: at.pathname.slice(1) };
  });
  afterEach(async function () {
    for (const m of opened.splice(0)) await m.close();
    for (const p of pools.splice(0)) await p.end();
  });
  after(async function () {
    if (admin) {
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.query(`DROP OWNED BY ${ROLE} CASCADE`);
      await admin.query(`DROP ROLE IF EXISTS ${ROLE}`);
      await admin.end();
    }
  });

  function asRole() {
    const at = new URL(url);
    at.username = ROLE;
    at.password = PASSWORD;
    return at.href;
  }

  function pool(config) {
    const p = new pg.Pool({ max: 2, ...config });
    pools.push(p);
    return p;
  }

  async function open(postgresOption) {
    const m = await openLockManager(scopeName('connect'), { postgres: postgresOption, schema });
    opened.push(m);
    return m;
  }

  // Two agents of one scope, opened with these settings, hand a lock over:
  // each one's session, watcher and calls are connected.
  async function handOver(make) {
    const scope = scopeName('connect');
    const a = await openLockManager(scope, { postgres: make(), schema });
    opened.push(a);
    const b = await openLockManager(scope, { postgres: make(), schema });
    opened.push(b);
    const h = holdOn(a, 'x');
    await h.granted;
    const next = b.request('x', (lock) => lock.name);
    await b.query();
    h.release();
    assert.equal(await next, 'x');
    await h.done;
    const { rows } = await admin.query(`SELECT DISTINCT usename FROM pg_stat_activity WHERE pid IN (SELECT pid FROM "${schema}".agents WHERE scope = $1)`, [scope]);
    assert.deepEqual(rows.map((r) => r.usename), [ROLE]);
  }

  it('the server checks the role\'s password by SCRAM: a wrong one is refused', async function () {
    const wrong = new pg.Client({ ...fields, password: 'wrong' });
    await assert.rejects(wrong.connect(), { code: '28P01' });
    const { rows } = await admin.query('SELECT rolpassword LIKE \'SCRAM-SHA-256$%\' AS scram FROM pg_authid WHERE rolname = $1', [ROLE]);
    assert.equal(rows[0].scram, true);
    if (process.env.WEB_LOCKS_TEST_POSTGRES) return;
    const hba = await admin.query('SELECT DISTINCT auth_method FROM pg_hba_file_rules WHERE type = \'host\'');
    assert.deepEqual(hba.rows.map((r) => r.auth_method), ['scram-sha-256']);
  });

  it('takes a pg.Pool made from fields with a password', async function () {
    await handOver(() => pool(fields));
  });

  it('takes a pg.Pool made from a connection string', async function () {
    await handOver(() => pool({ connectionString: asRole() }));
  });

  it('takes a pg.Pool whose password is an async function', async function () {
    let asked = 0;
    const password = async () => {
      asked++;
      return PASSWORD;
    };
    await handOver(() => pool({ ...fields, password }));
    assert.ok(asked >= 4, `asked ${asked} times`);
  });

  it('takes pg\'s config object for a client: fields with a password, or a password function', async function () {
    await handOver(() => ({ ...fields }));
    await handOver(() => ({ ...fields, password: () => PASSWORD }));
  });

  it('takes a connection string', async function () {
    await handOver(() => asRole());
  });

  it('takes SSL options, in a pool and in a config object: its connections are encrypted', async function () {
    if (!ca) this.skip(); // the server has no certificate (no openssl, or WEB_LOCKS_TEST_POSTGRES)
    const ssl = { ca, rejectUnauthorized: true };
    await handOver(() => pool({ ...fields, ssl }));
    await handOver(() => ({ ...fields, ssl }));
    const m = await open(pool({ ...fields, ssl }));
    await m.request('x', () => {});
    const { rows } = await admin.query(`SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.usename = $1`, [ROLE]);
    assert.ok(rows.length >= 1);
    assert.ok(rows.every((r) => r.ssl), JSON.stringify(rows));
  });

  it('refuses a pg.Client, one connection that cannot be its session and its watcher, with a TypeError', async function () {
    const client = new pg.Client(fields);
    await assert.rejects(openLockManager(scopeName('connect'), { postgres: client, schema }), TypeError);
  });
});
