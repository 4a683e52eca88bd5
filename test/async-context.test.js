'use strict';
// The callback is invoked as a continuation of its request() call: it runs
// in the async context (AsyncLocalStorage store) that was current when
// request() was called, whatever released the lock that let it be granted.
const assert = require('node:assert/strict');
const { AsyncLocalStorage } = require('node:async_hooks');
const { api, uniq, hold } = require('./fixtures/util');
const { spawnAgent, terminateAll } = require('./fixtures/agent');

describe('async context of the callback', function () {
  let locks;
  const als = new AsyncLocalStorage();
  before(function () {
    ({ locks } = api());
  });
  afterEach(terminateAll);

  it('sees the requester\'s store when the lock is free', async function () {
    const name = uniq('als-free');
    const store = await als.run({ id: 'requester' }, () => locks.request(name, () => als.getStore()));
    assert.deepEqual(store, { id: 'requester' });
  });

  it('sees no store when request() was called outside any store', async function () {
    const name = uniq('als-none');
    const h = hold(name);
    await h.granted;
    const p = locks.request(name, () => als.getStore());
    als.run('releaser', () => h.release());
    assert.equal(await p, undefined);
  });

  it('sees the requester\'s store when the grant comes from a release made in another store', async function () {
    const name = uniq('als-release');
    const h = als.run('holder', () => hold(name));
    await h.granted;
    const p = als.run('waiter', () => locks.request(name, () => als.getStore()));
    als.run('releaser', () => h.release());
    assert.equal(await p, 'waiter');
  });

  it('gives each of several queued requests its own store', async function () {
    const name = uniq('als-many');
    const h = hold(name);
    await h.granted;
    const ps = [];
    for (let i = 0; i < 10; i++) {
      const mode = i % 2 ? 'shared' : 'exclusive';
      ps.push(als.run(`store ${i}`, () => locks.request(name, { mode }, async () => {
        const first = als.getStore();
        await new Promise((r) => setImmediate(r));
        return [first, als.getStore()];
      })));
    }
    h.release();
    const got = await Promise.all(ps);
    assert.deepEqual(got, Array.from({ length: 10 }, (_, i) => [`store ${i}`, `store ${i}`]));
  });

  it('sees the requester\'s store in the null callback of an unavailable ifAvailable request', async function () {
    const name = uniq('als-ifavail');
    const h = hold(name);
    await h.granted;
    const got = await als.run('ifAvailable', () => locks.request(name, { ifAvailable: true }, (l) => [l, als.getStore()]));
    assert.deepEqual(got, [null, 'ifAvailable']);
    h.release();
    await h.done;
  });

  it('sees the thief\'s store in a steal', async function () {
    const name = uniq('als-steal');
    const h = als.run('victim', () => hold(name));
    await h.granted;
    const thief = await als.run('thief', () => locks.request(name, { steal: true }, () => als.getStore()));
    assert.equal(thief, 'thief');
    h.release();
  });

  it('sees the requester\'s store when another thread\'s release granted the lock', async function () {
    const name = uniq('als-thread');
    const agent = await spawnAgent();
    const id = await agent.request(name);
    await agent.granted(id);
    const p = als.run({ from: 'main' }, () => locks.request(name, () => als.getStore()));
    const p2 = als.run({ from: 'main, shared' }, () => locks.request(name, { mode: 'shared' }, () => als.getStore()));
    agent.release(id);
    assert.deepEqual(await p, { from: 'main' });
    assert.deepEqual(await p2, { from: 'main, shared' });
  });

  it('sees the requester\'s store when another thread ended and its lock was released', async function () {
    const name = uniq('als-thread-end');
    const agent = await spawnAgent();
    const id = await agent.request(name);
    await agent.granted(id);
    const p = als.run('after terminate', () => locks.request(name, () => als.getStore()));
    await agent.terminate();
    assert.equal(await p, 'after terminate');
  });

  it('nested stores: a request made inside a callback sees the inner store', async function () {
    const a = uniq('als-outer');
    const b = uniq('als-inner');
    const got = await als.run('outer', () => locks.request(a, () => {
      const outer = als.getStore();
      return als.run('inner', () => locks.request(b, () => als.getStore())).then((inner) => [outer, inner, als.getStore()]);
    }));
    assert.deepEqual(got, ['outer', 'inner', 'outer']);
  });
});
