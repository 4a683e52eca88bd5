'use strict';
// Spec §3.2.2 and §4.5: query() resolves with a snapshot { held, pending }
// of the whole lock manager, entries { name, mode, clientId }, pending in
// queue order per name. Cross-thread snapshots are in threads.test.js.
const assert = require('node:assert/strict');
const { api, uniq, hold, stateOf, myClientId } = require('./fixtures/util');

describe('query()', function () {
  let locks;
  before(function () {
    ({ locks } = api());
  });

  it('returns a Promise of a plain { held, pending } object of arrays', async function () {
    const p = locks.query();
    assert.ok(p instanceof Promise);
    const snap = await p;
    assert.equal(Object.getPrototypeOf(snap), Object.prototype);
    assert.deepEqual(Object.keys(snap).sort(), ['held', 'pending']);
    assert.ok(Array.isArray(snap.held));
    assert.ok(Array.isArray(snap.pending));
  });

  it('shows nothing for a name that is neither held nor requested', async function () {
    assert.deepEqual(await stateOf(uniq('never-used')), { held: [], pending: [] });
  });

  it('shows a held lock as a plain { name, mode, clientId } entry with a string clientId', async function () {
    const name = uniq('q-held');
    const h = hold(name);
    await h.granted;
    const { held, pending } = await stateOf(name);
    assert.equal(held.length, 1);
    assert.deepEqual(pending, []);
    const entry = held[0];
    assert.equal(Object.getPrototypeOf(entry), Object.prototype);
    assert.deepEqual(Object.keys(entry).sort(), ['clientId', 'mode', 'name']);
    assert.equal(entry.name, name);
    assert.equal(entry.mode, 'exclusive');
    assert.equal(typeof entry.clientId, 'string');
    assert.ok(entry.clientId.length > 0);
    h.release();
    await h.done;
  });

  it('shows pending requests in queue order, with their modes', async function () {
    const name = uniq('q-order');
    const h = hold(name);
    await h.granted;
    const modes = ['shared', 'exclusive', 'shared', 'shared', 'exclusive', 'exclusive', 'shared'];
    const all = modes.map((mode) => locks.request(name, { mode }, () => {}));
    const { held, pending } = await stateOf(name);
    assert.deepEqual(held.map((i) => i.mode), ['exclusive']);
    assert.deepEqual(pending.map((i) => i.mode), modes);
    assert.ok(pending.every((i) => i.name === name));
    h.release();
    await Promise.all(all);
  });

  it('keeps the queue order of each name when several names have pending requests', async function () {
    const a = uniq('q-a');
    const b = uniq('q-b');
    const ha = hold(a);
    const hb = hold(b);
    await Promise.all([ha.granted, hb.granted]);
    const all = [];
    const expectA = [];
    const expectB = [];
    for (let i = 0; i < 6; i++) {
      const mode = i % 2 ? 'shared' : 'exclusive';
      all.push(locks.request(a, { mode }, () => {}));
      expectA.push(mode);
      const modeB = i % 3 ? 'exclusive' : 'shared';
      all.push(locks.request(b, { mode: modeB }, () => {}));
      expectB.push(modeB);
    }
    const { pending } = await stateOf([a, b]);
    assert.deepEqual(pending.filter((i) => i.name === a).map((i) => i.mode), expectA);
    assert.deepEqual(pending.filter((i) => i.name === b).map((i) => i.mode), expectB);
    ha.release();
    hb.release();
    await Promise.all(all);
  });

  it('shows every shared holder', async function () {
    const name = uniq('q-shared');
    const hs = [hold(name, { mode: 'shared' }), hold(name, { mode: 'shared' })];
    await Promise.all(hs.map((h) => h.granted));
    const { held } = await stateOf(name);
    assert.deepEqual(held.map((i) => `${i.name}:${i.mode}`), [`${name}:shared`, `${name}:shared`]);
    hs.forEach((h) => h.release());
    await Promise.all(hs.map((h) => h.done));
  });

  it('uses one clientId for every lock and request of this thread, stable over time', async function () {
    const a = uniq('q-cid-a');
    const b = uniq('q-cid-b');
    const before = await myClientId();
    const ha = hold(a);
    const hb = hold(b, { mode: 'shared' });
    await Promise.all([ha.granted, hb.granted]);
    const queued = locks.request(a, () => {});
    const { held, pending } = await stateOf([a, b]);
    const ids = new Set([...held, ...pending].map((i) => i.clientId));
    assert.deepEqual([...ids], [before]);
    ha.release();
    hb.release();
    await Promise.all([ha.done, hb.done, queued]);
    assert.equal(await myClientId(), before);
  });

  it('is a snapshot: the returned object does not change when the state changes, and each call returns a new object', async function () {
    const name = uniq('q-snap');
    const h = hold(name);
    await h.granted;
    const s1 = await locks.query();
    const s2 = await locks.query();
    assert.notEqual(s1, s2);
    assert.notEqual(s1.held, s2.held);
    const mine = s1.held.filter((i) => i.name === name);
    assert.equal(mine.length, 1);
    h.release();
    await h.done;
    assert.equal(s1.held.filter((i) => i.name === name).length, 1);
    assert.deepEqual(await stateOf(name), { held: [], pending: [] });
  });

  it('modifying a returned snapshot does not affect later snapshots', async function () {
    const name = uniq('q-mutate');
    const h = hold(name);
    await h.granted;
    const s1 = await locks.query();
    for (const e of s1.held) e.name = 'changed';
    s1.held.length = 0;
    s1.pending.push({ name, mode: 'shared', clientId: 'x' });
    const { held, pending } = await stateOf(name);
    assert.equal(held.length, 1);
    assert.deepEqual(pending, []);
    h.release();
    await h.done;
  });

  it('reflects a grant: after the first lock is released, the next request moves from pending to held', async function () {
    const name = uniq('q-move');
    const h1 = hold(name);
    await h1.granted;
    const h2 = hold(name, { mode: 'shared' });
    let state = await stateOf(name);
    assert.deepEqual([state.held.map((i) => i.mode), state.pending.map((i) => i.mode)], [['exclusive'], ['shared']]);
    h1.release();
    await h2.granted;
    state = await stateOf(name);
    assert.deepEqual([state.held.map((i) => i.mode), state.pending.map((i) => i.mode)], [['shared'], []]);
    h2.release();
    await Promise.all([h1.done, h2.done]);
  });

  it('accepts and ignores arguments', async function () {
    const snap = await locks.query('ignored', 1);
    assert.ok(Array.isArray(snap.held) && Array.isArray(snap.pending));
  });

  it('shows a request made in the same task, before query() was called', async function () {
    const name = uniq('q-same-task');
    const h = hold(name);
    await h.granted;
    const p = locks.request(name, { mode: 'shared' }, () => {});
    const { pending } = await stateOf(name);
    assert.deepEqual(pending.map((i) => i.mode), ['shared']);
    h.release();
    await Promise.all([p, h.done]);
  });
});
