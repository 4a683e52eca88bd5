'use strict';
// Spec §2.4 (waiting and released promises), §4.4 step 14 (the callback is
// invoked in a task queued on the requester's event loop; the lock is held
// until the callback's result settles; then it is released and request()'s
// promise is resolved with the waiting promise).
const assert = require('node:assert/strict');
const { api, uniq, hold, stateOf, deferred, microtasks, trackUnhandled } = require('./fixtures/util');

describe('the callback and the lock\'s lifetime', function () {
  let locks;
  before(function () {
    ({ locks } = api());
  });

  it('runs the callback in a later task, never inside request(), even when the lock is free', async function () {
    const name = uniq('cb-later');
    let afterRequest = false;
    let sawFlag;
    const p = locks.request(name, () => {
      sawFlag = afterRequest;
    });
    afterRequest = true;
    assert.equal(sawFlag, undefined, 'callback ran inside request()');
    await p;
    assert.equal(sawFlag, true);
  });

  it('does not run the callback during the microtasks of the task that called request()', async function () {
    const name = uniq('cb-microtasks');
    let called = false;
    const p = locks.request(name, () => { called = true; });
    await microtasks(50);
    assert.equal(called, false);
    await p;
    assert.equal(called, true);
  });

  it('calls the callback with exactly one argument (the Lock) and an undefined this', async function () {
    const name = uniq('cb-args');
    let args;
    let self = 'unset';
    await locks.request(name, function (...a) { // strict: the file is
      args = a;
      self = this;
    });
    assert.equal(args.length, 1);
    assert.equal(args[0].name, name);
    assert.equal(self, undefined);
  });

  it('resolves request() with a non-promise return value', async function () {
    const obj = { some: 'object' };
    assert.equal(await locks.request(uniq('cb-val'), () => obj), obj);
    assert.equal(await locks.request(uniq('cb-undef'), () => {}), undefined);
  });

  it('holds the lock until the returned promise settles', async function () {
    const name = uniq('cb-hold');
    const gate = deferred();
    const granted = deferred();
    let resolved = false;
    const p = locks.request(name, () => {
      granted.resolve();
      return gate.promise;
    });
    p.then(() => { resolved = true; });
    await granted.promise;
    for (let i = 0; i < 3; i++) {
      assert.equal((await stateOf(name)).held.length, 1);
      assert.equal(await locks.request(name, { ifAvailable: true }, (l) => l), null);
    }
    assert.equal(resolved, false);
    gate.resolve('late value');
    assert.equal(await p, 'late value');
    assert.deepEqual(await stateOf(name), { held: [], pending: [] });
  });

  it('adopts a returned thenable that is not a Promise', async function () {
    const name = uniq('cb-thenable');
    let resolveThenable;
    const granted = deferred();
    const thenable = {
      then(onFulfilled) {
        resolveThenable = onFulfilled;
      },
    };
    const p = locks.request(name, () => {
      granted.resolve();
      return thenable;
    });
    await granted.promise;
    // Give the promise machinery time to call then().
    await stateOf(name);
    assert.equal(typeof resolveThenable, 'function', 'then() was called');
    assert.equal((await stateOf(name)).held.length, 1, 'held while the thenable is pending');
    resolveThenable(42);
    assert.equal(await p, 42);
    assert.deepEqual(await stateOf(name), { held: [], pending: [] });
  });

  it('a rejecting thenable releases the lock and rejects request() with its reason', async function () {
    const name = uniq('cb-thenable-reject');
    const boom = new Error('thenable');
    await assert.rejects(locks.request(name, () => ({ then(_, onRejected) { onRejected(boom); } })), (e) => e === boom);
    const getterBoom = new Error('then getter');
    const bad = {};
    Object.defineProperty(bad, 'then', { get() { throw getterBoom; } });
    await assert.rejects(locks.request(name, () => bad), (e) => e === getterBoom);
    assert.deepEqual(await stateOf(name), { held: [], pending: [] });
  });

  it('a synchronous throw releases the lock and rejects request() with the same error object', async function () {
    const name = uniq('cb-throw');
    const boom = new Error('sync');
    await assert.rejects(locks.request(name, () => { throw boom; }), (e) => e === boom);
    assert.deepEqual(await stateOf(name), { held: [], pending: [] });
    // Non-Error values too.
    await assert.rejects(locks.request(name, () => { throw 'a string'; }), (e) => e === 'a string');
    await assert.rejects(locks.request(name, () => { throw undefined; }), (e) => e === undefined);
    assert.equal(await locks.request(name, { ifAvailable: true }, (l) => l !== null), true);
  });

  it('a rejected promise releases the lock and rejects request() with the same reason', async function () {
    const name = uniq('cb-reject');
    const boom = new Error('async');
    const next = [];
    const p = locks.request(name, async () => {
      await null;
      throw boom;
    });
    const after = locks.request(name, () => next.push('next granted'));
    await assert.rejects(p, (e) => e === boom);
    await after;
    assert.deepEqual(next, ['next granted']);
  });

  it('a rejection or throw in the callback causes no unhandled rejection when request() is awaited', async function () {
    const tracker = trackUnhandled();
    try {
      const boom = new Error('handled');
      await assert.rejects(locks.request(uniq('cb-h1'), () => { throw boom; }), (e) => e === boom);
      await assert.rejects(locks.request(uniq('cb-h2'), () => Promise.reject(boom)), (e) => e === boom);
      assert.deepEqual(await tracker.stop(), []);
    } finally {
      await tracker.stop();
    }
  });

  it('resolves request() only after the release: in its .then, query() no longer shows the lock and an ifAvailable request gets it', async function () {
    const name = uniq('cb-after');
    const checks = await locks.request(name, async () => 'value').then(async (value) => {
      const state = await stateOf(name);
      const lock = await locks.request(name, { ifAvailable: true }, (l) => l && l.name);
      return { value, state, lock };
    });
    assert.deepEqual(checks, { value: 'value', state: { held: [], pending: [] }, lock: name });
  });

  it('resolves request() only after the release, also for a synchronous callback and a rejected one', async function () {
    const name = uniq('cb-after-sync');
    const seen = await locks.request(name, () => 1).then(() => locks.request(name, { ifAvailable: true }, (l) => l !== null));
    assert.equal(seen, true);
    const seenAfterError = await locks.request(name, () => { throw new Error('x'); })
      .catch(() => locks.request(name, { ifAvailable: true }, (l) => l !== null));
    assert.equal(seenAfterError, true);
  });

  it('a synchronous callback\'s lock is released only after the microtasks it queued: they still see it held', async function () {
    // §4.4 step 14: "resolve waiting with r"; §2.4: when waiting settles
    // (a promise reaction, so a later microtask) the lock is released.
    const name = uniq('cb-sync-microtask');
    const seen = deferred();
    const p = locks.request(name, () => {
      queueMicrotask(() => {
        // Both made in this microtask, before the release.
        const snapshot = locks.query();
        const probe = locks.request(name, { ifAvailable: true }, (l) => l === null);
        Promise.all([snapshot, probe]).then(([snap, unavailable]) => {
          seen.resolve({ held: snap.held.filter((i) => i.name === name).length, unavailable });
        }, seen.reject);
      });
      return 'sync value';
    });
    assert.equal(await p, 'sync value');
    assert.deepEqual(await seen.promise, { held: 1, unavailable: true });
  });

  it('a synchronous throw releases the lock only after the microtasks the callback queued', async function () {
    const name = uniq('cb-throw-microtask');
    const seen = deferred();
    const boom = new Error('sync throw');
    const p = locks.request(name, () => {
      queueMicrotask(() => {
        locks.query().then((snap) => seen.resolve(snap.held.filter((i) => i.name === name).length), seen.reject);
      });
      throw boom;
    });
    await assert.rejects(p, (e) => e === boom);
    assert.equal(await seen.promise, 1);
  });

  it('a synchronous callback holds the lock only while it runs: the next queued request follows right after', async function () {
    const name = uniq('cb-sync');
    const order = [];
    const a = locks.request(name, () => { order.push('a'); });
    const b = locks.request(name, () => { order.push('b'); });
    await Promise.all([a, b]);
    assert.deepEqual(order, ['a', 'b']);
  });

  it('the Lock object keeps its name and mode after the release', async function () {
    const name = uniq('cb-keep');
    const lock = await locks.request(name, { mode: 'shared' }, (l) => l);
    assert.equal(lock.name, name);
    assert.equal(lock.mode, 'shared');
  });

  it('each grant gets its own Lock object', async function () {
    const name = uniq('cb-distinct');
    const l1 = await locks.request(name, (l) => l);
    const l2 = await locks.request(name, (l) => l);
    assert.notEqual(l1, l2);
  });

  it('the same function can be the callback of many requests at once', async function () {
    const name = uniq('cb-same-fn');
    const seen = [];
    const cb = (lock) => { seen.push(lock.mode); return seen.length; };
    const results = await Promise.all([
      locks.request(name, cb),
      locks.request(name, { mode: 'shared' }, cb),
      locks.request(name, cb),
    ]);
    assert.deepEqual(results, [1, 2, 3]);
    assert.deepEqual(seen, ['exclusive', 'shared', 'exclusive']);
  });

  it('a lock held by a pending callback does not delay requests on other names', async function () {
    const stuck = uniq('cb-stuck');
    const gate = deferred();
    const h = locks.request(stuck, () => gate.promise);
    const other = await locks.request(uniq('cb-other'), (l) => l.name);
    assert.ok(other.startsWith('cb-other'));
    gate.resolve();
    await h;
  });

  it('a callback can wait for a lock on another name that is held elsewhere', async function () {
    const a = uniq('cb-a');
    const b = uniq('cb-b');
    const hb = hold(b);
    await hb.granted;
    const innerRequested = deferred();
    const p = locks.request(a, () => {
      const inner = locks.request(b, () => 'inner');
      innerRequested.resolve();
      return inner;
    });
    await innerRequested.promise;
    assert.equal((await stateOf(a)).held.length, 1);
    assert.equal((await stateOf(b)).pending.length, 1);
    hb.release();
    assert.equal(await p, 'inner');
    await hb.done;
  });

  describe('adopting the result as the spec\'s "resolve waiting with r"', function () {
    it('reads then exactly once, and calls it in a later microtask with this = the result', async function () {
      const name = uniq('cb-then-once');
      let reads = 0;
      let calledWith;
      let calledSync = true;
      const thenable = {};
      Object.defineProperty(thenable, 'then', {
        get() {
          reads++;
          return function (onFulfilled) {
            calledWith = this;
            onFulfilled('v');
          };
        },
      });
      const p = locks.request(name, () => {
        Promise.resolve().then(() => { calledSync = calledWith === undefined; });
        return thenable;
      });
      assert.equal(await p, 'v');
      assert.equal(reads, 1);
      assert.equal(calledWith, thenable);
      assert.equal(calledSync, true, 'then() was not called synchronously inside the task');
    });

    it('ignores every call of the resolving functions after the first, and a throw after resolving', async function () {
      const name = uniq('cb-then-twice');
      const result = await locks.request(name, () => ({
        then(onFulfilled, onRejected) {
          onFulfilled('first');
          onFulfilled('second');
          onRejected(new Error('late'));
          throw new Error('after');
        },
      }));
      assert.equal(result, 'first');
      assert.deepEqual(await stateOf(name), { held: [], pending: [] });
    });

    it('a then that throws before resolving rejects with that error', async function () {
      const boom = new Error('then threw');
      await assert.rejects(locks.request(uniq('cb-then-throws'), () => ({ then() { throw boom; } })), (e) => e === boom);
    });

    it('adopts a thenable fulfilled with another thenable, holding the lock until the innermost settles', async function () {
      const name = uniq('cb-then-nested');
      const inner = deferred();
      const p = locks.request(name, () => ({ then(onFulfilled) { onFulfilled({ then(f) { inner.promise.then(f); } }); } }));
      await stateOf(name);
      await microtasks(10);
      assert.equal((await stateOf(name)).held.length, 1, 'held until the inner thenable settles');
      inner.resolve('deep');
      assert.equal(await p, 'deep');
    });

    it('uses a promise\'s own then when it is overridden', async function () {
      const promise = Promise.resolve('original');
      promise.then = function (onFulfilled) { onFulfilled('overridden'); };
      assert.equal(await locks.request(uniq('cb-own-then'), () => promise), 'overridden');
    });

    it('settles with an object whose then is not callable as that object', async function () {
      const value = { then: 42 };
      assert.equal(await locks.request(uniq('cb-then-not-fn'), () => value), value);
    });

    it('treats a function result as a possible thenable', async function () {
      const fn = () => {};
      fn.then = (onFulfilled) => onFulfilled('from function');
      assert.equal(await locks.request(uniq('cb-fn-thenable'), () => fn), 'from function');
    });
  });
});
