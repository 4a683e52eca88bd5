'use strict';
// Spec §4.1 step 3.5.1: an ifAvailable request that is not grantable calls
// its callback with null in a later task and is never queued.
const assert = require('node:assert/strict');
const { api, uniq, hold, stateOf, deferred, microtasks } = require('./fixtures/util');

describe('request() with ifAvailable', function () {
  let locks;
  let Lock;
  before(function () {
    ({ locks, Lock } = api());
  });

  it('grants a free name like a normal request', async function () {
    const name = uniq('ia-free');
    const gate = deferred();
    const got = deferred();
    const p = locks.request(name, { ifAvailable: true }, (l) => {
      got.resolve(l);
      return gate.promise;
    });
    const lock = await got.promise;
    assert.ok(lock instanceof Lock);
    assert.equal(lock.name, name);
    assert.equal(lock.mode, 'exclusive');
    // It is held until the callback's promise settles.
    assert.equal((await stateOf(name)).held.length, 1);
    gate.resolve('done');
    assert.equal(await p, 'done');
    assert.deepEqual(await stateOf(name), { held: [], pending: [] });
  });

  it('calls the callback with null when the name is held exclusively, and queues nothing', async function () {
    const name = uniq('ia-held');
    const h = hold(name);
    await h.granted;
    let args;
    const result = await locks.request(name, { ifAvailable: true }, (...a) => {
      args = a;
      return 'no lock';
    });
    assert.equal(result, 'no lock');
    assert.deepEqual(args, [null]);
    const state = await stateOf(name);
    assert.equal(state.held.length, 1);
    assert.deepEqual(state.pending, []);
    h.release();
    await h.done;
  });

  it('calls back with null for an exclusive request while a shared lock is held', async function () {
    const name = uniq('ia-sh-ex');
    const h = hold(name, { mode: 'shared' });
    await h.granted;
    assert.equal(await locks.request(name, { ifAvailable: true }, (l) => l), null);
    assert.deepEqual((await stateOf(name)).pending, []);
    h.release();
    await h.done;
  });

  it('grants a shared request while only shared locks are held and nothing is queued', async function () {
    const name = uniq('ia-sh-sh');
    const h = hold(name, { mode: 'shared' });
    await h.granted;
    const mode = await locks.request(name, { mode: 'shared', ifAvailable: true }, async (l) => {
      assert.equal((await stateOf(name)).held.length, 2);
      return l && l.mode;
    });
    assert.equal(mode, 'shared');
    h.release();
    await h.done;
  });

  it('calls back with null for a shared request when the queue is not empty, even though it is compatible with the held locks', async function () {
    const name = uniq('ia-queue');
    const s = hold(name, { mode: 'shared' });
    await s.granted;
    const ex = hold(name);
    assert.deepEqual((await stateOf(name)).pending.map((i) => i.mode), ['exclusive']);
    assert.equal(await locks.request(name, { mode: 'shared', ifAvailable: true }, (l) => l), null);
    const state = await stateOf(name);
    assert.deepEqual(state.pending.map((i) => i.mode), ['exclusive']);
    assert.deepEqual(state.held.map((i) => i.mode), ['shared']);
    s.release();
    await ex.granted;
    ex.release();
    await Promise.all([s.done, ex.done]);
  });

  it('calls the null callback in a later task, not inside request()', async function () {
    const name = uniq('ia-later');
    const h = hold(name);
    await h.granted;
    let called = false;
    let afterRequest = false;
    const p = locks.request(name, { ifAvailable: true }, () => {
      called = true;
      assert.equal(afterRequest, true);
    });
    afterRequest = true;
    assert.equal(called, false);
    await microtasks();
    assert.equal(called, false, 'called during the microtasks of the current task');
    await p;
    assert.equal(called, true);
    h.release();
    await h.done;
  });

  it('with a null lock, request() adopts the callback\'s returned promise', async function () {
    const name = uniq('ia-adopt');
    const h = hold(name);
    await h.granted;
    const gate = deferred();
    let settled = false;
    const called = deferred();
    const p = locks.request(name, { ifAvailable: true }, (l) => {
      called.resolve(l);
      return gate.promise;
    });
    p.then(() => { settled = true; }, () => { settled = true; });
    assert.equal(await called.promise, null);
    await microtasks();
    assert.equal(settled, false);
    gate.resolve(7);
    assert.equal(await p, 7);
    h.release();
    await h.done;
  });

  it('with a null lock, a throwing callback rejects request() with that error', async function () {
    const name = uniq('ia-throw');
    const h = hold(name);
    await h.granted;
    const boom = new Error('boom');
    await assert.rejects(locks.request(name, { ifAvailable: true }, () => { throw boom; }), (e) => e === boom);
    await assert.rejects(locks.request(name, { ifAvailable: true }, () => Promise.reject(boom)), (e) => e === boom);
    // The holder is unaffected.
    assert.equal((await stateOf(name)).held.length, 1);
    h.release();
    await h.done;
  });

  it('an unavailable request does not get in the way of later ones', async function () {
    const name = uniq('ia-later-req');
    const h = hold(name);
    await h.granted;
    const none = locks.request(name, { ifAvailable: true }, (l) => l);
    const next = locks.request(name, (l) => l.name);
    assert.equal(await none, null);
    h.release();
    assert.equal(await next, name);
  });
});
