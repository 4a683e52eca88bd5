'use strict';
// openLockManager(scope, { postgres }) beside another role of the same
// server: a real LOGIN role with no privilege on the manager's schema, which
// tries what any such role can. It sends forged notifications on every
// channel it can name or guess (the names agents listened on before layout
// 2 among them), with payloads of every shape; and it makes functions and
// operators in public (where any role may create on PostgreSQL 14; granted
// to it here on later versions) that match the manager's calls of
// built-ins better than pg_catalog's, and would record each call in a
// table of its own. Meanwhile honest agents (on sessions, and through a
// pg.Pool whose connections keep the default search_path) contend for a
// name, queue, abort, steal, and one joins after the token counter's
// restart (token_restart(), which moves it with setval). Nothing the role
// does may change anything: exclusion holds, tokens are the database's,
// nothing crashes or wedges, and its functions never run.
const assert = require('node:assert/strict');
const { api, holdOn, only, isDOMException, scopeName } = require('./fixtures/util');
const { postgres, loginRole } = require('./fixtures/postgres');
const { schemaKey } = require('../lib/postgres/options.js');
const { inspectPostgres } = require('../lib/postgres/inspect.js');

const ROLE = `wl_attacker_${process.pid}`;
const PASSWORD = 'attacker';

// Functions in public that another role's calls would pick over the
// built-ins: the same name, with argument types that match the call's
// better (text where the call passes a literal or an untyped parameter, a
// concrete type where pg_catalog's is polymorphic or variadic). Each one
// records the call, then does what the built-in would.
const HIJACKS = [
  ['nextval(text)', 'bigint', 'pg_catalog.nextval($1::pg_catalog.regclass)'],
  ['setval(text, bigint)', 'bigint', 'pg_catalog.setval($1::pg_catalog.regclass, $2)'],
  ['sha256(text)', 'bytea', 'pg_catalog.sha256(pg_catalog.convert_to($1, \'UTF8\'))'],
  ['sha256(bytea)', 'bytea', 'pg_catalog.sha256($1)'],
  ['format(text, text)', 'text', 'pg_catalog.format($1, $2)'],
  ['pg_advisory_lock(text, integer)', 'void', 'pg_catalog.pg_advisory_lock($1::integer, $2)'],
  ['pg_advisory_unlock(text, integer)', 'boolean', 'pg_catalog.pg_advisory_unlock($1::integer, $2)'],
  ['pg_advisory_lock_shared(text, text)', 'void', 'pg_catalog.pg_advisory_lock_shared($1::integer, $2::integer)'],
  ['pg_advisory_unlock_shared(text, text)', 'boolean', 'pg_catalog.pg_advisory_unlock_shared($1::integer, $2::integer)'],
  ['pg_cancel_backend(text)', 'boolean', 'pg_catalog.pg_cancel_backend($1::integer)'],
  ['pg_notify(text, text)', 'void', 'pg_catalog.pg_notify($1, $2)'],
  ['current_setting(text)', 'text', 'pg_catalog.current_setting($1)'],
  ['wl_cat(bigint, text)', 'text', 'pg_catalog.textcat($1::pg_catalog.text, $2)'],
  ['wl_cat(text, bigint)', 'text', 'pg_catalog.textcat($1, $2::pg_catalog.text)'],
  ['wl_cat(text, integer)', 'text', 'pg_catalog.textcat($1, $2::pg_catalog.text)'],
];
// Operators over them: || of a number and a text (pg_catalog has only the
// polymorphic anynonarray || text and text || anynonarray).
const OPERATORS = [
  ['||', 'bigint', 'text', 'wl_cat'],
  ['||', 'text', 'bigint', 'wl_cat'],
  ['||', 'text', 'integer', 'wl_cat'],
];

// Payloads of every shape, for local ids up to `ids`.
function payloads(ids) {
  const list = ['', 'r', ' r', 'r ', 'garbage', 'g', 's', '1', '1 g', '1 s ', '1  s', '1 g 999999 ', ' 1 g 999999',
    '1 g abc', '1 g -5', '1 g 1.5', '1 g 1e3', '1 g 0x10', '1 g 99999999999999999999999', '1 g 9223372036854775808',
    '99999999999999999999999 g 1', '99999999999999999999999 s', '-1 s', '0 s', '0 g 5', 'x g 5', '1 x 5', '1 s 5',
    '1 g 5 5', '\u00e9 g 1', '1\tg\t5', 'x'.repeat(7999)];
  for (let id = 1; id <= ids; id++) list.push(`${id} g 999999`, `${id} g 1`, `${id} s`, `${id} g 9223372036854775807`);
  return list;
}

describe('openLockManager (PostgreSQL) beside an unprivileged role', function () {
  this.timeout(60000);
  const schema = `wl_roles_${process.pid}`;
  let openLockManager;
  let pg;
  let url;
  let admin;
  let attacker;
  let pool;
  const opened = [];

  before(async function () {
    ({ openLockManager } = api());
    pg = require('pg');
    ({ url } = await postgres());
    admin = new pg.Client(url);
    await admin.connect();
    const as = await loginRole(admin, url, ROLE, PASSWORD);
    // PostgreSQL 15 took CREATE on public from every role: given back, as
    // on 14.
    await admin.query(`GRANT CREATE ON SCHEMA public TO ${ROLE}`);
    attacker = new pg.Client(as);
    await attacker.connect();
    await attacker.query('CREATE TABLE public.wl_attack_calls (role text, call text)');
    await attacker.query('GRANT INSERT ON public.wl_attack_calls TO PUBLIC');
    for (const [signature, returns, body] of HIJACKS) {
      const call = returns === 'void' ? `PERFORM ${body}; RETURN;` : `RETURN ${body};`;
      await attacker.query(`CREATE FUNCTION public.${signature} RETURNS ${returns} LANGUAGE plpgsql
        SET search_path = pg_catalog, pg_temp AS $f$
        BEGIN
          INSERT INTO public.wl_attack_calls VALUES (current_user, ${pg.Client.prototype.escapeLiteral(signature)});
          ${call}
        END $f$`);
    }
    for (const [operator, left, right, fn] of OPERATORS) {
      await attacker.query(`CREATE OPERATOR public.${operator} (LEFTARG = ${left}, RIGHTARG = ${right}, FUNCTION = public.${fn})`);
    }
    pool = new pg.Pool({ connectionString: url, max: 3 });
  });
  afterEach(async function () {
    for (const m of opened.splice(0)) await m.close();
  });
  after(async function () {
    if (pool) await pool.end();
    if (attacker) await attacker.end();
    if (admin) {
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.query(`DROP OWNED BY ${ROLE} CASCADE`);
      await admin.query(`DROP ROLE IF EXISTS ${ROLE}`);
      await admin.end();
    }
  });

  async function open(scope, options = {}) {
    const m = await openLockManager(scope, Object.assign({ postgres: url, schema }, options));
    opened.push(m);
    return m;
  }

  async function calls() {
    const { rows } = await admin.query('SELECT role, call FROM public.wl_attack_calls');
    return rows;
  }

  // Every channel the role can name or guess: those of layout 1 (the
  // schema's key and an agent id) for every agent id so far and beyond,
  // and names like them.
  async function channels() {
    const { rows } = await admin.query(`SELECT coalesce(max(id), 0)::int AS n FROM "${schema}".agents`);
    const key = schemaKey(schema);
    const list = ['web_locks', `web_locks.${key}`, `web_locks_${key}`, schema, `${schema}.${key}`];
    for (let id = 0; id <= rows[0].n + 3; id++) list.push(`web_locks.${key}.${id}`, `web_locks_${key}_${id}`, `${schema}.${id}`);
    return list;
  }

  // Sends every payload on every channel; resolves with how many.
  async function forge(ids) {
    const list = await channels();
    let sent = 0;
    for (const channel of list) {
      for (const payload of payloads(ids)) {
        await attacker.query('SELECT pg_notify($1, $2)', [channel, payload]);
        sent++;
      }
    }
    return sent;
  }

  it('has no privilege on the schema: it cannot read the agents, and so their channels', async function () {
    await open(scopeName('made'));
    await assert.rejects(attacker.query(`SELECT channel FROM "${schema}".agents`), { code: '42501' });
  });

  it('cannot crash, grant, rob or wedge: exclusion holds, the tokens are the database\'s, and its functions never run', async function () {
    const scope = scopeName('attacked');
    const a = await open(scope);
    const b = await open(scope);
    const c = await open(scope, { postgres: pool, schema });
    // A holder, a waiter, a request aborted in the queue, on sessions and
    // through the pool.
    const h = holdOn(a, 'x');
    const held = await h.granted;
    let released = false;
    let early = false;
    // Its token, and the one the database holds for it.
    const waiter = b.request('x', async (lock) => {
      early = !released;
      const { rows } = await admin.query(`SELECT r.token FROM "${schema}".requests r JOIN "${schema}".names n ON n.id = r.name_id
        WHERE n.scope = $1 AND n.name = $2 AND r.token IS NOT NULL`, [scope, Buffer.from('x', 'utf16le')]);
      return [lock.token, rows.map((row) => BigInt(row.token))];
    });
    const controller = new AbortController();
    const aborted = c.request('x', { signal: controller.signal }, () => 'never');
    await Promise.all([b.query(), c.query()]);
    controller.abort();
    await assert.rejects(aborted, { name: 'AbortError' });
    const inRow = holdOn(c, 'y');
    await inRow.granted;

    const sent = await forge(8);
    assert.ok(sent > 1000, `${sent} notifications`);
    // Everything sent before this round trip has reached every listener.
    await Promise.all([a.query(), b.query(), c.query()]);
    assert.equal(early, false, 'a forged grant ran the waiter\'s callback');
    const state = only(await a.query(), 'x');
    assert.equal(state.held.length, 1);
    assert.equal(state.pending.length, 1);
    assert.equal(only(await c.query(), 'y').held.length, 1);

    // The real grant goes through, with the token the database made.
    released = true;
    h.release();
    await h.done;
    const [token, inDatabase] = await waiter;
    assert.equal(early, false);
    assert.deepEqual(inDatabase, [token]);
    assert.ok(token > held.token, `${token} after ${held.token}`);
    inRow.release();
    await inRow.done;

    // Contention, steals and a token restart while it keeps forging.
    let stop = false;
    const forging = (async () => {
      let rounds = 0;
      while (!stop) {
        await forge(4);
        rounds++;
      }
      return rounds;
    })();
    await admin.query(`DELETE FROM "${schema}".token_live`);
    const d = await open(scope);
    let inside = 0;
    let violations = 0;
    const tokens = [];
    const critical = async (lock) => {
      if (inside++ !== 0) violations++;
      tokens.push(lock.token);
      await new Promise((resolve) => setImmediate(resolve));
      inside--;
    };
    await Promise.all([a, b, c, d].map(async (m) => {
      for (let i = 0; i < 25; i++) await m.request('z', critical);
    }));
    const robbed = holdOn(a, 'z');
    await robbed.granted;
    assert.equal(await d.request('z', { steal: true }, (lock) => lock.name), 'z');
    await assert.rejects(robbed.done, isDOMException('AbortError'));
    stop = true;
    assert.ok(await forging > 0);
    assert.equal(violations, 0);
    for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `${tokens}`);

    // Nothing wedged: a new agent has every name at once.
    const e = await open(scope);
    for (const name of ['x', 'y', 'z']) assert.equal(await e.request(name, { ifAvailable: true }, (lock) => lock && lock.name), name);
    // A look inside the scope, through the pool, calls none of its
    // functions either.
    const h2 = holdOn(e, 'w');
    await h2.granted;
    assert.deepEqual((await inspectPostgres({ postgres: pool, schema, scope })).held.map((i) => [i.name, i.alive]), [['w', true]]);
    h2.release();
    await h2.done;
    assert.deepEqual(await calls(), []);
  });
});
