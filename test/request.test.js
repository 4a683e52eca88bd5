'use strict';
// Spec §2.3 (modes), §2.5 (grantable), §4.1/§4.4: when requests on this
// thread are granted.
const assert = require('node:assert/strict');
const { api, uniq, hold, stateOf, deferred } = require('./fixtures/util');

describe('request(): granting', function () {
  let locks;
  let Lock;
  before(function () {
    ({ locks, Lock } = api());
  });

  it('returns a Promise and grants a free name, passing a Lock with its name and mode "exclusive" by default', async function () {
    const name = uniq('free');
    let seen;
    const p = locks.request(name, (lock) => {
      seen = lock;
      return 'result';
    });
    assert.ok(p instanceof Promise);
    assert.equal(await p, 'result');
    assert.ok(seen instanceof Lock);
    assert.equal(seen.name, name);
    assert.equal(seen.mode, 'exclusive');
  });

  it('passes a Lock with mode "shared" for a shared request and "exclusive" for an explicit exclusive one', async function () {
    const name = uniq('modes');
    const shared = await locks.request(name, { mode: 'shared' }, (lock) => lock.mode);
    const exclusive = await locks.request(name, { mode: 'exclusive' }, (lock) => lock.mode);
    assert.equal(shared, 'shared');
    assert.equal(exclusive, 'exclusive');
  });

  it('an exclusive lock keeps a second exclusive request waiting until it is released', async function () {
    const name = uniq('ex-ex');
    const first = hold(name);
    await first.granted;
    let secondRan = false;
    const second = locks.request(name, () => {
      secondRan = true;
    });
    const during = await stateOf(name);
    assert.equal(during.held.length, 1);
    assert.deepEqual(during.pending.map((i) => i.mode), ['exclusive']);
    assert.equal(secondRan, false);
    first.release();
    await first.done;
    await second;
    assert.equal(secondRan, true);
    assert.deepEqual(await stateOf(name), { held: [], pending: [] });
  });

  it('shared locks on one name are held at the same time', async function () {
    const name = uniq('sh-sh');
    const a = hold(name, { mode: 'shared' });
    const b = hold(name, { mode: 'shared' });
    const c = hold(name, { mode: 'shared' });
    await Promise.all([a.granted, b.granted, c.granted]);
    const state = await stateOf(name);
    assert.deepEqual(state.held.map((i) => i.mode), ['shared', 'shared', 'shared']);
    assert.deepEqual(state.pending, []);
    a.release();
    b.release();
    c.release();
    await Promise.all([a.done, b.done, c.done]);
  });

  it('a held shared lock keeps an exclusive request waiting', async function () {
    const name = uniq('sh-ex');
    const s = hold(name, { mode: 'shared' });
    await s.granted;
    const order = [];
    const ex = locks.request(name, () => order.push('exclusive'));
    const state = await stateOf(name);
    assert.deepEqual(state.held.map((i) => i.mode), ['shared']);
    assert.deepEqual(state.pending.map((i) => i.mode), ['exclusive']);
    order.push('release shared');
    s.release();
    await ex;
    assert.deepEqual(order, ['release shared', 'exclusive']);
  });

  it('a held exclusive lock keeps a shared request waiting', async function () {
    const name = uniq('ex-sh');
    const e = hold(name);
    await e.granted;
    const order = [];
    const sh = locks.request(name, { mode: 'shared' }, () => order.push('shared'));
    const state = await stateOf(name);
    assert.deepEqual(state.held.map((i) => i.mode), ['exclusive']);
    assert.deepEqual(state.pending.map((i) => i.mode), ['shared']);
    order.push('release exclusive');
    e.release();
    await sh;
    assert.deepEqual(order, ['release exclusive', 'shared']);
  });

  it('FIFO: a shared request queued behind an exclusive one waits, even though only shared locks are held', async function () {
    const name = uniq('fifo-sh');
    const s1 = hold(name, { mode: 'shared' });
    await s1.granted;
    const ex = hold(name);
    const s2 = hold(name, { mode: 'shared' });
    let state = await stateOf(name);
    assert.deepEqual(state.held.map((i) => i.mode), ['shared']);
    assert.deepEqual(state.pending.map((i) => i.mode), ['exclusive', 'shared']);

    s1.release();
    await ex.granted;
    state = await stateOf(name);
    assert.deepEqual(state.held.map((i) => i.mode), ['exclusive']);
    assert.deepEqual(state.pending.map((i) => i.mode), ['shared']);

    ex.release();
    const lock = await s2.granted;
    assert.equal(lock.mode, 'shared');
    s2.release();
    await Promise.all([s1.done, ex.done, s2.done]);
  });

  it('releasing an exclusive lock grants every shared request at the head of the queue, up to the next exclusive one', async function () {
    const name = uniq('batch');
    const e1 = hold(name);
    await e1.granted;
    const s1 = hold(name, { mode: 'shared' });
    const s2 = hold(name, { mode: 'shared' });
    const e2 = hold(name);
    const s3 = hold(name, { mode: 'shared' });
    e1.release();
    await Promise.all([s1.granted, s2.granted]);
    const state = await stateOf(name);
    assert.deepEqual(state.held.map((i) => i.mode), ['shared', 'shared']);
    assert.deepEqual(state.pending.map((i) => i.mode), ['exclusive', 'shared']);

    s1.release();
    s2.release();
    await e2.granted;
    assert.deepEqual((await stateOf(name)).pending.map((i) => i.mode), ['shared']);
    e2.release();
    await s3.granted;
    s3.release();
    await Promise.all([e1.done, s1.done, s2.done, e2.done, s3.done]);
  });

  it('grants the requests on one name in the order they were made', async function () {
    const name = uniq('order');
    const first = hold(name);
    await first.granted;
    const order = [];
    const all = [];
    for (let i = 0; i < 50; i++) {
      const mode = i % 7 === 3 ? 'shared' : 'exclusive';
      all.push(locks.request(name, { mode }, async () => {
        order.push(i);
        await null;
      }));
    }
    first.release();
    await Promise.all(all);
    assert.deepEqual(order, Array.from({ length: 50 }, (_, i) => i));
  });

  it('different names are independent', async function () {
    const a = uniq('indep-a');
    const b = uniq('indep-b');
    const ha = hold(a);
    await ha.granted;
    // b is free even though a is held exclusively.
    const got = await locks.request(b, { ifAvailable: true }, (lock) => lock && lock.name);
    assert.equal(got, b);
    const hb = hold(b);
    await hb.granted;
    const state = await stateOf([a, b]);
    assert.deepEqual(state.held.map((i) => i.name).sort(), [a, b].sort());
    assert.deepEqual(state.pending, []);
    ha.release();
    hb.release();
    await Promise.all([ha.done, hb.done]);
  });

  it('is not re-entrant: a request for a held name from inside its own callback waits for the release', async function () {
    const name = uniq('reentrant');
    const order = [];
    let inner;
    await locks.request(name, async () => {
      const none = await locks.request(name, { ifAvailable: true }, (lock) => lock);
      assert.equal(none, null);
      inner = locks.request(name, () => order.push('inner'));
      assert.deepEqual((await stateOf(name)).pending.map((i) => i.mode), ['exclusive']);
      order.push('outer done');
    });
    await inner;
    assert.deepEqual(order, ['outer done', 'inner']);
  });

  it('holds nested locks on different names', async function () {
    const a = uniq('nest-a');
    const b = uniq('nest-b');
    const result = await locks.request(a, async (la) => {
      return locks.request(b, async (lb) => {
        const state = await stateOf([a, b]);
        assert.equal(state.held.length, 2);
        return `${la.name}+${lb.name}`;
      });
    });
    assert.equal(result, `${a}+${b}`);
    assert.deepEqual(await stateOf([a, b]), { held: [], pending: [] });
  });

  it('a request made while the lock is being released waits for its turn behind earlier requests', async function () {
    const name = uniq('turn');
    const gate = deferred();
    const order = [];
    const p1 = locks.request(name, async () => {
      order.push(1);
      await gate.promise;
    });
    const p2 = locks.request(name, () => {
      order.push(2);
    });
    await stateOf(name);
    gate.resolve();
    const p3 = locks.request(name, () => {
      order.push(3);
    });
    await Promise.all([p1, p2, p3]);
    assert.deepEqual(order, [1, 2, 3]);
  });
});
