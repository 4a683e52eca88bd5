'use strict';
// A session whose connection ends during join()'s last call (the sweep,
// which goes through the user's pool) must not become the backend's
// current session: lose() ignores a session that is not current yet, and
// ignores a lost one forever after, so no request of the manager would
// ever settle again and no new session would join (found by a review;
// lib/postgres/session.js).
const assert = require('node:assert/strict');
const { api, holdOn, scopeName } = require('./fixtures/util');
const { postgres } = require('./fixtures/postgres');

describe('openLockManager (PostgreSQL): a session lost while it joins', function () {
  this.timeout(30000);
  let openLockManager;
  let pg;
  let url;
  const clients = [];
  let connect;

  before(async function () {
    ({ openLockManager } = api());
    pg = require('pg');
    ({ url } = await postgres());
    connect = pg.Client.prototype.connect;
    pg.Client.prototype.connect = function (...args) {
      clients.push(this);
      return connect.apply(this, args);
    };
  });
  after(function () {
    pg.Client.prototype.connect = connect;
  });

  // A pool whose first sweep (join()'s last call) first ends the session's
  // connection on the server, and waits for the client to see it.
  function cutOnSweep(pool) {
    let cut = false;
    return {
      options: pool.options,
      connect: (...args) => pool.connect(...args),
      query: async (query, values) => {
        if (!cut && query.name !== undefined && query.name.endsWith('_sweep')) {
          cut = true;
          const { rows } = await pool.query('SELECT pid FROM web_locks.agents WHERE id = $1', [query.values[1]]);
          const client = clients.find((c) => c.processID === rows[0].pid);
          const ended = new Promise((resolve) => client.once('end', resolve));
          await pool.query('SELECT pg_terminate_backend($1)', [rows[0].pid]);
          await ended;
        }
        return pool.query(query, values);
      },
    };
  }

  it('a request of the manager settles (granted, or rejected as lost)', async function () {
    const pool = new pg.Pool({ connectionString: url, max: 2, application_name: 'review-pool' });
    const scope = scopeName('join-lost');
    const a = await openLockManager(scope, { postgres: url });
    let b;
    try {
      b = await openLockManager(scope, { postgres: cutOnSweep(pool) });
      const h = holdOn(a, 'x');
      await h.granted;
      const waiting = b.request('x', () => 'b');
      waiting.catch(() => {});
      await b.query(); // its request is in the database: queued behind a's lock
      h.release();
      await h.done;
      const outcome = await Promise.race([
        waiting.then((v) => 'settled ' + v, (e) => 'settled ' + e.message),
        new Promise((resolve) => setTimeout(resolve, 5000, 'never settled')),
      ]);
      assert.match(outcome, /^settled/);
    } catch (error) {
      // An open that rejects is a correct outcome too.
      if (b !== undefined) throw error;
    } finally {
      await a.close();
      if (b !== undefined) await Promise.race([b.close(), new Promise((resolve) => setTimeout(resolve, 2000))]);
      await pool.end();
    }
  });
});
