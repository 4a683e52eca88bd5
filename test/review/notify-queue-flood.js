'use strict';
// Reproduction (review of issue 25, item 3): a role that may only log in
// fills PostgreSQL's queue of notifications (a session of it listens and
// stays in a transaction, another floods NOTIFY), after which every grant
// fails: the holder's release ends its session, and the next waiter waits
// for as long as that transaction stays open. A server of its own with a
// queue of 64 pages (PostgreSQL 17+), so that the flood takes a moment;
// with the default 8 GB it takes minutes. Run: node test/review/notify-queue-flood.js
const pg = require('pg');
const { startServer } = require('../fixtures/postgres.js');
const { openLockManager } = require('../..');
(async () => {
  const srv = await startServer({ settings: { fsync: 'off', max_notify_queue_pages: 64 } });
  try {
    const admin = new pg.Client(srv.url); await admin.connect();
    await admin.query("CREATE ROLE nq LOGIN PASSWORD 'x'");
    const at = new URL(srv.url); at.username = 'nq'; at.password = 'x';
    const a = await openLockManager('s', { postgres: srv.url });
    const b = await openLockManager('s', { postgres: srv.url });
    const l = new pg.Client(at.href); await l.connect();
    await l.query('LISTEN junk'); await l.query('BEGIN'); await l.query('SELECT 1');
    const f = new pg.Client(at.href); await f.connect();
    let n = 0;
    try { for (;;) { await f.query(`NOTIFY junk, '${'x'.repeat(7000)}'`); n++; } } catch (e) { console.log('flood stopped after', n, e.message); }
    let release;
    const held = a.request('x', () => new Promise((r) => { release = r; }));
    await new Promise((r) => setTimeout(r, 100));
    const next = b.request('x', (lock) => 'granted to b').catch((e) => 'b: ' + e.name + ' ' + e.message);
    await b.query();
    release();
    console.log('a:', await held.then(() => 'released', (e) => 'a: ' + e.name + ' ' + (e.cause ? e.cause.message : e.message)));
    console.log(await Promise.race([next, new Promise((r) => setTimeout(() => r('b still waiting after 3s'), 3000))]));
    await l.end(); await f.end(); await a.close(); await b.close(); await admin.end();
  } finally { await srv.stop(); }
})().catch((e) => { console.error(e); process.exit(1); });
