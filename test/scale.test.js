'use strict';
// Large numbers of requests and names: correct, and fast enough (each of
// these should take a few seconds at most).
const assert = require('node:assert/strict');
const { api, uniq, hold, stateOf } = require('./fixtures/util');

const N = 100000;

describe('scale', function () {
  let locks;
  before(function () {
    ({ locks } = api());
  });

  it(`grants ${N} requests queued on one name, in order`, async function () {
    this.timeout(30000);
    const name = uniq('scale-queue');
    const h = hold(name);
    await h.granted;
    const order = [];
    const all = new Array(N);
    for (let i = 0; i < N; i++) {
      all[i] = locks.request(name, () => { order.push(i); return i; });
    }
    const { held, pending } = await stateOf(name);
    assert.equal(held.length, 1);
    assert.equal(pending.length, N);
    h.release();
    const results = await Promise.all(all);
    assert.equal(order.length, N);
    for (let i = 0; i < N; i++) {
      if (order[i] !== i) assert.fail(`grant #${i} went to request ${order[i]}`);
      if (results[i] !== i) assert.fail(`request ${i} resolved with ${results[i]}`);
    }
    await h.done;
    assert.deepEqual(await stateOf(name), { held: [], pending: [] });
  });

  it(`grants ${N} shared requests queued behind an exclusive lock together`, async function () {
    this.timeout(30000);
    const name = uniq('scale-shared');
    const h = hold(name);
    await h.granted;
    let inside = 0;
    let maxInside = 0;
    let release;
    const gate = new Promise((r) => { release = r; });
    const all = [];
    for (let i = 0; i < N; i++) {
      all.push(locks.request(name, { mode: 'shared' }, () => {
        inside++;
        if (inside > maxInside) maxInside = inside;
        if (inside === N) release();
        return gate;
      }));
    }
    h.release();
    await gate;
    assert.equal(maxInside, N);
    const { held } = await stateOf(name);
    assert.equal(held.length, N);
    await Promise.all(all);
    assert.deepEqual(await stateOf(name), { held: [], pending: [] });
  });

  it(`holds ${N} different names at once and releases them all`, async function () {
    this.timeout(30000);
    const base = uniq('scale-names');
    let release;
    const gate = new Promise((r) => { release = r; });
    let granted = 0;
    let allGranted;
    const everyoneIn = new Promise((r) => { allGranted = r; });
    const all = new Array(N);
    for (let i = 0; i < N; i++) {
      all[i] = locks.request(`${base}/${i}`, (lock) => {
        if (lock.name !== `${base}/${i}`) throw new Error(`wrong lock ${lock.name} for ${i}`);
        if (++granted === N) allGranted();
        return gate;
      });
    }
    await everyoneIn;
    const snap = await locks.query();
    const mine = snap.held.filter((e) => e.name.startsWith(`${base}/`));
    assert.equal(mine.length, N);
    assert.equal(new Set(mine.map((e) => e.name)).size, N);
    assert.equal(snap.pending.filter((e) => e.name.startsWith(`${base}/`)).length, 0);
    release();
    await Promise.all(all);
    const after = await locks.query();
    assert.equal(after.held.filter((e) => e.name.startsWith(`${base}/`)).length, 0);
    // A name is free again at once.
    assert.equal(await locks.request(`${base}/${N - 1}`, { ifAvailable: true }, (l) => l !== null), true);
  });

  it(`aborts ${N} queued requests (one AbortController each) and leaves none behind`, async function () {
    this.timeout(30000);
    const name = uniq('scale-abort');
    const h = hold(name);
    await h.granted;
    const controllers = [];
    const all = [];
    for (let i = 0; i < N; i++) {
      const c = new AbortController();
      controllers.push(c);
      all.push(locks.request(name, { signal: c.signal }, () => 'granted?'));
    }
    const next = locks.request(name, () => 'next');
    for (let i = 0; i < N; i++) controllers[i].abort(i);
    const outcomes = await Promise.allSettled(all);
    outcomes.forEach((o, i) => {
      if (o.status !== 'rejected' || o.reason !== i) assert.fail(`request ${i}: ${o.status} ${o.reason}`);
    });
    assert.equal((await stateOf(name)).pending.length, 1);
    h.release();
    assert.equal(await next, 'next');
  });
});
