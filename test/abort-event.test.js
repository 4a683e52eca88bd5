'use strict';
// Spec §4.3: "signal to abort the request" is an algorithm added to the
// signal; it runs when the signal is aborted, not when someone dispatches an
// event named 'abort' on it. And Web IDL §3.7.1: an interface object without
// a constructor has a length of 0. On each of the three managers.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { api, holdOn, only, scopeName, trackUnhandled, uniq } = require('./fixtures/util');
const { postgres } = require('./fixtures/postgres');

const MANAGERS = [
  ['the process-wide manager', async () => ({ locks: api().locks, close: async () => {} })],
  ['a machine-wide scope', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-abort-event-'));
    const locks = await api().openLockManager(scopeName('abort-event'), { dir });
    return { locks, close: async () => { await locks.close(); fs.rmSync(dir, { recursive: true, force: true }); } };
  }],
  ['a PostgreSQL scope', async () => {
    const { url } = await postgres();
    const locks = await api().openLockManager(scopeName('abort-event'), { postgres: url });
    return { locks, close: () => locks.close() };
  }],
];

for (const [title, open] of MANAGERS) {
  describe(`an 'abort' event that is not an abort, on ${title}`, function () {
    this.timeout(20000);
    let manager;
    let locks;

    before(async function () {
      // The machine-wide manager exists on Linux; the PostgreSQL one is not
      // tested under Bun (see the README's platform table).
      if (title === 'a machine-wide scope' && process.platform !== 'linux') this.skip();
      if (title === 'a PostgreSQL scope' && process.versions.bun) this.skip();
      manager = await open();
      ({ locks } = manager);
    });
    after(async function () {
      if (manager !== undefined) await manager.close();
    });

    it('LockManager.length and Lock.length are 0, read-only and configurable', async function () {
      const { Lock } = api();
      const LockManager = Object.getPrototypeOf(locks).constructor;
      for (const Class of [LockManager, Lock]) {
        assert.deepEqual(Object.getOwnPropertyDescriptor(Class, 'length'),
          { value: 0, writable: false, enumerable: false, configurable: true });
      }
      const lock = await locks.request(uniq('length'), (l) => l);
      assert.equal(Object.getPrototypeOf(lock).constructor.length, 0);
    });

    it('leaves a waiting request in the queue, unsettled; a real abort later still aborts it', async function () {
      const name = uniq('dispatched');
      const h = holdOn(locks, name);
      await h.granted;
      const unhandled = trackUnhandled();
      const controller = new AbortController();
      let called = false;
      let settled = false;
      const p = locks.request(name, { signal: controller.signal }, () => { called = true; });
      p.then(() => { settled = true; }, () => { settled = true; });
      await locks.query();

      assert.equal(controller.signal.dispatchEvent(new Event('abort')), true);
      controller.signal.dispatchEvent(new Event('abort'));
      const snapshot = only(await locks.query(), name);
      assert.equal(snapshot.pending.length, 1, 'the request is still queued');
      assert.equal(settled, false);
      assert.deepEqual(await unhandled.stop(), []);

      controller.abort('later');
      await assert.rejects(p, (e) => e === 'later');
      assert.deepEqual(only(await locks.query(), name).pending, []);
      h.release();
      await h.done;
      assert.equal(called, false);
    });

    it('a request whose signal got a dispatched abort event is granted when the lock is released', async function () {
      const name = uniq('dispatched-granted');
      const h = holdOn(locks, name);
      await h.granted;
      const controller = new AbortController();
      const p = locks.request(name, { signal: controller.signal }, (lock) => lock.name);
      await locks.query();
      controller.signal.dispatchEvent(new Event('abort'));
      h.release();
      assert.equal(await p, name);
      await h.done;
    });

    it('several requests on one signal, the event dispatched among other listeners: all stay, then all abort in order', async function () {
      const name = uniq('dispatched-many');
      const h = holdOn(locks, name);
      await h.granted;
      const controller = new AbortController();
      const heard = [];
      controller.signal.addEventListener('abort', () => heard.push('before'));
      const order = [];
      const requests = [0, 1, 2].map((i) => locks.request(name, { signal: controller.signal }, () => {})
        .catch((e) => { order.push(i); return e; }));
      controller.signal.addEventListener('abort', () => heard.push('after'));
      await locks.query();
      controller.signal.dispatchEvent(new Event('abort'));
      assert.deepEqual(heard, ['before', 'after']);
      assert.equal(only(await locks.query(), name).pending.length, 3);
      controller.abort();
      for (const e of await Promise.all(requests)) assert.equal(e, controller.signal.reason);
      assert.deepEqual(order, [0, 1, 2]);
      h.release();
      await h.done;
    });

    it('a signal aborted by another listener of the dispatched event still aborts the request', async function () {
      const name = uniq('dispatched-then-aborted');
      const h = holdOn(locks, name);
      await h.granted;
      const controller = new AbortController();
      const p = locks.request(name, { signal: controller.signal }, () => {});
      controller.signal.addEventListener('abort', () => controller.abort('inside'), { once: true });
      await locks.query();
      controller.signal.dispatchEvent(new Event('abort'));
      await assert.rejects(p, (e) => e === 'inside');
      assert.deepEqual(only(await locks.query(), name).pending, []);
      h.release();
      await h.done;
    });
  });
}
