'use strict';
// Spec §4.1 step 3.4: a steal removes every held lock of the name, rejects
// each one's released promise (the holder's request() promise) with an
// "AbortError" DOMException, prepends the thief to the queue and processes
// it. The stolen holder's callback is not interrupted. Cross-thread steals
// are in threads.test.js.
const assert = require('node:assert/strict');
const { api, uniq, hold, stateOf, deferred, trackUnhandled, microtasks } = require('./fixtures/util');

function abortError(err) {
  return err instanceof DOMException && err.name === 'AbortError' && err.code === 20;
}

describe('request() with steal', function () {
  let locks;
  let Lock;
  before(function () {
    ({ locks, Lock } = api());
  });

  it('grants a free name like a normal exclusive request', async function () {
    const name = uniq('steal-free');
    const lock = await locks.request(name, { steal: true }, (l) => l);
    assert.ok(lock instanceof Lock);
    assert.equal(lock.name, name);
    assert.equal(lock.mode, 'exclusive');
    assert.deepEqual(await stateOf(name), { held: [], pending: [] });
  });

  it('takes an exclusive lock: the holder\'s request() rejects with an AbortError DOMException and the thief holds the lock alone', async function () {
    const name = uniq('steal-ex');
    const victim = hold(name);
    await victim.granted;
    const thief = hold(name, { steal: true });
    const lock = await thief.granted;
    assert.equal(lock.name, name);
    await assert.rejects(victim.done, abortError);
    const state = await stateOf(name);
    assert.deepEqual(state.held.map((i) => i.mode), ['exclusive']);
    assert.deepEqual(state.pending, []);
    victim.release('ignored');
    thief.release('thief');
    assert.equal(await thief.done, 'thief');
  });

  it('takes every shared lock of the name at once', async function () {
    const name = uniq('steal-sh');
    const holders = [hold(name, { mode: 'shared' }), hold(name, { mode: 'shared' }), hold(name, { mode: 'shared' })];
    await Promise.all(holders.map((h) => h.granted));
    const thief = hold(name, { steal: true });
    await thief.granted;
    for (const h of holders) await assert.rejects(h.done, abortError);
    const state = await stateOf(name);
    assert.deepEqual(state.held.map((i) => i.mode), ['exclusive']);
    thief.release();
    await thief.done;
    for (const h of holders) h.release();
  });

  it('does not touch locks on other names', async function () {
    const name = uniq('steal-target');
    const other = uniq('steal-other');
    const victim = hold(name);
    const bystander = hold(other);
    await Promise.all([victim.granted, bystander.granted]);
    await locks.request(name, { steal: true }, () => {});
    await assert.rejects(victim.done, abortError);
    assert.equal((await stateOf(other)).held.length, 1);
    bystander.release('still mine');
    assert.equal(await bystander.done, 'still mine');
  });

  it('the stolen holder\'s callback keeps running to completion, and its end releases nothing of the thief\'s', async function () {
    const name = uniq('steal-run');
    const gate = deferred();
    const log = [];
    let callbackPromise;
    const granted = deferred();
    const victim = locks.request(name, (lock) => {
      callbackPromise = (async () => {
        granted.resolve();
        log.push(`start ${lock.name === name}`);
        await gate.promise;
        log.push('end');
        return 'callback result';
      })();
      return callbackPromise;
    });
    victim.catch(() => {});
    await granted.promise;
    const thief = hold(name, { steal: true });
    await thief.granted;
    const queued = hold(name);
    await assert.rejects(victim, abortError);
    assert.deepEqual(log, ['start true']);

    gate.resolve();
    assert.equal(await callbackPromise, 'callback result');
    assert.deepEqual(log, ['start true', 'end']);
    // The victim's request stays rejected with the AbortError.
    await assert.rejects(victim, abortError);
    // Let any release the victim's end might wrongly do happen.
    await stateOf(name);
    const state = await stateOf(name);
    assert.equal(state.held.length, 1, 'the thief still holds the lock');
    assert.deepEqual(state.pending.map((i) => i.mode), ['exclusive'], 'the queued request still waits for the thief');
    thief.release();
    await queued.granted;
    queued.release();
    await Promise.all([thief.done, queued.done]);
  });

  it('a stolen holder whose callback later rejects causes no unhandled rejection and its request() keeps the AbortError', async function () {
    const name = uniq('steal-reject');
    const tracker = trackUnhandled();
    try {
      const victim = hold(name);
      await victim.granted;
      const thief = hold(name, { steal: true });
      await thief.granted;
      const boom = new Error('late failure of a stolen lock\'s callback');
      victim.fail(boom);
      await assert.rejects(victim.done, abortError);
      thief.release();
      await thief.done;
      const seen = await tracker.stop();
      assert.deepEqual(seen.filter((r) => r === boom || abortError(r)), []);
    } finally {
      await tracker.stop();
    }
  });

  it('the thief goes to the front of the queue: requests queued before and after it wait for it, in their order', async function () {
    const name = uniq('steal-front');
    const victim = hold(name);
    await victim.granted;
    const order = [];
    const q1 = locks.request(name, () => order.push('q1'));
    const q2 = locks.request(name, { mode: 'shared' }, () => order.push('q2'));
    const thief = hold(name, { steal: true });
    await thief.granted;
    order.push('thief');
    const q3 = locks.request(name, () => order.push('q3'));
    const state = await stateOf(name);
    assert.deepEqual(state.held.map((i) => i.mode), ['exclusive']);
    assert.deepEqual(state.pending.map((i) => i.mode), ['exclusive', 'shared', 'exclusive']);
    await assert.rejects(victim.done, abortError);
    thief.release();
    await Promise.all([q1, q2, q3, thief.done]);
    assert.deepEqual(order, ['thief', 'q1', 'q2', 'q3']);
    victim.release();
  });

  it('a second thief steals from the first', async function () {
    const name = uniq('steal-twice');
    const t1 = hold(name, { steal: true });
    await t1.granted;
    const t2 = hold(name, { steal: true });
    await t2.granted;
    await assert.rejects(t1.done, abortError);
    t2.release(2);
    assert.equal(await t2.done, 2);
    t1.release();
  });

  it('a lock stolen before its callback ran: the callback is still called with its Lock, and request() rejects with AbortError', async function () {
    const name = uniq('steal-early');
    let lockSeen;
    const victim = locks.request(name, (lock) => {
      lockSeen = lock;
      return 'victim';
    });
    victim.catch(() => {});
    // Same task: the victim was granted first (the name was free), then the
    // steal took its lock away before its callback task ran.
    const thief = locks.request(name, { steal: true }, (lock) => lock.name);
    assert.equal(await thief, name);
    await assert.rejects(victim, abortError);
    await microtasks();
    assert.ok(lockSeen instanceof Lock, 'the victim\'s callback was called with a Lock');
    assert.equal(lockSeen.name, name);
    assert.deepEqual(await stateOf(name), { held: [], pending: [] });
  });

  it('the released promise is rejected at the time of the steal, before the stolen callback settles', async function () {
    const name = uniq('steal-timing');
    const victim = hold(name);
    await victim.granted;
    let rejected = false;
    victim.done.catch(() => { rejected = true; });
    await locks.request(name, { steal: true }, () => {});
    await microtasks();
    assert.equal(rejected, true);
    victim.release();
  });
});
