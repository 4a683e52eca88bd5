'use strict';
// Spec §3.2.1 step 9, §4.1 step 2, §4.3 ("signal to abort the request",
// "abort the request") and §4.4 step 14.1: aborting a request.
const assert = require('node:assert/strict');
const { getEventListeners, setMaxListeners } = require('node:events');
const { api, uniq, hold, stateOf, deferred, trackUnhandled, microtasks, rejects } = require('./fixtures/util');

function abortError(err) {
  return err instanceof DOMException && err.name === 'AbortError' && err.code === 20;
}

describe('request() with signal', function () {
  let locks;
  before(function () {
    ({ locks } = api());
  });

  it('a queued request aborted with the default reason rejects with signal.reason (an AbortError DOMException) and leaves the queue at once', async function () {
    const name = uniq('sig-queued');
    const h = hold(name);
    await h.granted;
    const controller = new AbortController();
    let called = false;
    const p = locks.request(name, { signal: controller.signal }, () => { called = true; });
    assert.equal((await stateOf(name)).pending.length, 1);
    controller.abort();
    await assert.rejects(p, (e) => e === controller.signal.reason && abortError(e));
    assert.deepEqual((await stateOf(name)).pending, []);
    h.release();
    await h.done;
    assert.equal(called, false);
    assert.deepEqual(await stateOf(name), { held: [], pending: [] });
  });

  it('rejects with a custom reason: a string, an object, an Error', async function () {
    const name = uniq('sig-reason');
    const h = hold(name);
    await h.granted;
    for (const reason of ['x', { why: 'object' }, new Error('error reason'), 0]) {
      const controller = new AbortController();
      const p = locks.request(name, { signal: controller.signal }, () => 'granted?');
      controller.abort(reason);
      await assert.rejects(p, (e) => e === reason);
    }
    assert.deepEqual((await stateOf(name)).pending, []);
    h.release();
    await h.done;
  });

  it('rejects with the TimeoutError of AbortSignal.timeout() when the lock is not granted in time', async function () {
    const name = uniq('sig-timeout');
    const h = hold(name);
    await h.granted;
    const signal = AbortSignal.timeout(30);
    let called = false;
    await assert.rejects(locks.request(name, { signal }, () => { called = true; }),
      (e) => e === signal.reason && e instanceof DOMException && e.name === 'TimeoutError');
    assert.deepEqual((await stateOf(name)).pending, []);
    h.release();
    await h.done;
    assert.equal(called, false);
  });

  it('the request behind an aborted one is granted when the lock is released', async function () {
    const name = uniq('sig-next');
    const h = hold(name);
    await h.granted;
    const controller = new AbortController();
    const aborted = locks.request(name, { signal: controller.signal }, () => 'aborted one');
    const next = locks.request(name, (lock) => lock.name);
    controller.abort();
    await assert.rejects(aborted, abortError);
    assert.deepEqual((await stateOf(name)).pending.length, 1);
    h.release();
    assert.equal(await next, name);
    await h.done;
  });

  it('aborting the head of the queue grants what is behind it at once when that is compatible with the held locks', async function () {
    const name = uniq('sig-head');
    const s = hold(name, { mode: 'shared' });
    await s.granted;
    const controller = new AbortController();
    const ex = locks.request(name, { signal: controller.signal }, () => {});
    const sh = hold(name, { mode: 'shared' });
    assert.deepEqual((await stateOf(name)).pending.map((i) => i.mode), ['exclusive', 'shared']);
    controller.abort();
    await assert.rejects(ex, abortError);
    // The shared request is granted while the first shared lock is still held.
    const lock = await sh.granted;
    assert.equal(lock.mode, 'shared');
    const state = await stateOf(name);
    assert.deepEqual(state.held.map((i) => i.mode), ['shared', 'shared']);
    s.release();
    sh.release();
    await Promise.all([s.done, sh.done]);
  });

  it('an abort after the grant (while the callback runs) does nothing: request() resolves with the callback\'s result', async function () {
    const name = uniq('sig-after');
    const controller = new AbortController();
    const gate = deferred();
    const granted = deferred();
    const p = locks.request(name, { signal: controller.signal }, async (lock) => {
      granted.resolve(lock);
      await gate.promise;
      return 'result';
    });
    await granted.promise;
    controller.abort();
    // Still held: the abort did not release it.
    assert.equal((await stateOf(name)).held.length, 1);
    gate.resolve();
    assert.equal(await p, 'result');
    assert.deepEqual(await stateOf(name), { held: [], pending: [] });
  });

  it('an abort from inside the callback does nothing', async function () {
    const name = uniq('sig-inside');
    const controller = new AbortController();
    const result = await locks.request(name, { signal: controller.signal }, () => {
      controller.abort('too late');
      return 'kept';
    });
    assert.equal(result, 'kept');
  });

  it('an abort in the same task as a request for a free name rejects with the reason, never calls the callback, and leaves the name free', async function () {
    // Whether the lock was already granted or not, the callback has not run
    // yet when the abort happens (§4.4 step 14.1 releases the lock).
    const name = uniq('sig-same-task');
    const controller = new AbortController();
    let called = false;
    const p = locks.request(name, { signal: controller.signal }, () => { called = true; });
    controller.abort('early');
    await assert.rejects(p, (e) => e === 'early');
    // The lock ends up free.
    const next = await locks.request(name, (lock) => lock.name);
    assert.equal(next, name);
    assert.equal(called, false);
    assert.deepEqual(await stateOf(name), { held: [], pending: [] });
  });

  it('an already aborted signal rejects with its reason, never calls the callback and queues nothing, even for a free name', async function () {
    const name = uniq('sig-pre');
    const reason = { custom: true };
    let called = false;
    await rejects(() => locks.request(name, { signal: AbortSignal.abort(reason) }, () => { called = true; }), (e) => e === reason);
    await microtasks();
    assert.equal(called, false);
    assert.deepEqual(await stateOf(name), { held: [], pending: [] });
  });

  it('does not leave an abort listener on the signal once the request has settled (granted and released)', async function () {
    const name = uniq('sig-listeners');
    const controller = new AbortController();
    const { signal } = controller;
    setMaxListeners(1000, signal); // up to 200 requests wait on it at once
    for (let i = 0; i < 200; i++) {
      await locks.request(name, { signal }, () => i);
    }
    await Promise.all(Array.from({ length: 200 }, (_, i) => locks.request(name, { signal, mode: 'shared' }, () => i)));
    assert.equal(getEventListeners(signal, 'abort').length, 0);
  });

  it('does not leave an abort listener once an aborted request has settled', async function () {
    const name = uniq('sig-listeners-aborted');
    const h = hold(name);
    await h.granted;
    const controller = new AbortController();
    const p = locks.request(name, { signal: controller.signal }, () => {});
    controller.abort();
    await assert.rejects(p, abortError);
    assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
    h.release();
    await h.done;
  });

  it('a signal shared by many queued requests gets one listener, none once they are granted, and no MaxListeners warning', async function () {
    const name = uniq('sig-shared');
    const { signal } = new AbortController();
    const warnings = [];
    const onWarning = (warning) => warnings.push(warning.name);
    process.on('warning', onWarning);
    const h = hold(name);
    await h.granted;
    const all = [];
    for (let i = 0; i < 100; i++) all.push(locks.request(name, { signal }, () => i));
    assert.equal(getEventListeners(signal, 'abort').length, 1);
    await new Promise((resolve) => setImmediate(resolve));
    process.off('warning', onWarning);
    assert.deepEqual(warnings, []);
    h.release();
    const results = await Promise.all(all);
    assert.deepEqual(results, Array.from({ length: 100 }, (_, i) => i));
    assert.equal(getEventListeners(signal, 'abort').length, 0);
  });

  it('aborting the signal after its requests settled causes no unhandled rejection and no callback', async function () {
    const name = uniq('sig-late');
    const controller = new AbortController();
    const tracker = trackUnhandled();
    try {
      let calls = 0;
      assert.equal(await locks.request(name, { signal: controller.signal }, () => { calls++; return 'a'; }), 'a');
      const boom = new Error('callback failure');
      await assert.rejects(locks.request(name, { signal: controller.signal }, () => { calls++; throw boom; }), (e) => e === boom);
      controller.abort(new Error('late abort'));
      const seen = await tracker.stop();
      assert.deepEqual(seen, []);
      assert.equal(calls, 2);
    } finally {
      await tracker.stop();
    }
  });

  it('one abort rejects every queued request that uses the signal, and only those', async function () {
    const name = uniq('sig-many');
    const h = hold(name);
    await h.granted;
    const controller = new AbortController();
    const withSignal = [];
    const without = [];
    for (let i = 0; i < 5; i++) {
      withSignal.push(locks.request(name, { signal: controller.signal }, () => 'no'));
      without.push(locks.request(name, () => i));
    }
    controller.abort('all');
    for (const p of withSignal) await assert.rejects(p, (e) => e === 'all');
    const state = await stateOf(name);
    assert.equal(state.pending.length, 5);
    h.release();
    assert.deepEqual(await Promise.all(without), [0, 1, 2, 3, 4]);
    await h.done;
  });

  it('an aborted shared request in the middle of the queue keeps the rest in order', async function () {
    const name = uniq('sig-middle');
    const h = hold(name);
    await h.granted;
    const order = [];
    const c = new AbortController();
    const a = locks.request(name, () => order.push('a'));
    const b = locks.request(name, { mode: 'shared', signal: c.signal }, () => order.push('b'));
    const d = locks.request(name, () => order.push('d'));
    c.abort();
    await assert.rejects(b, abortError);
    assert.deepEqual((await stateOf(name)).pending.map((i) => i.mode), ['exclusive', 'exclusive']);
    h.release();
    await Promise.all([a, d, h.done]);
    assert.deepEqual(order, ['a', 'd']);
  });
});
