'use strict';
// Bad input never crashes or wedges the lock manager. Each test feeds one
// kind of hostile input and then checks that the manager still works: the
// names involved are free (nothing left held or pending), and a fresh
// request for each is granted at once.
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const { api, uniq, hold, stateOf, deferred, trackUnhandled, PKG } = require('./fixtures/util');
const { spawnAgent, spawnScript, terminateAll } = require('./fixtures/agent');

describe('bad input', function () {
  this.timeout(20000);
  let locks;
  before(function () {
    ({ locks } = api());
  });
  afterEach(terminateAll);

  // Nothing of `names` is left in the manager, and each is free again.
  async function assertHealthy(names) {
    assert.deepEqual(await stateOf(names), { held: [], pending: [] }, 'nothing left held or pending');
    for (const name of names) {
      const got = await locks.request(name, { ifAvailable: true }, (lock) => lock !== null);
      assert.equal(got, true, 'the name is free again');
    }
  }

  describe('huge names (10 MB)', function () {
    const MB10 = 10 * 1024 * 1024;

    it('are held, queued, queried and released like any name; two that differ only in the last unit are different names', async function () {
      const base = uniq('huge');
      const a = base + 'x'.repeat(MB10) + 'a';
      const b = base + 'x'.repeat(MB10) + 'b';
      const ha = hold(a);
      const lock = await ha.granted;
      assert.equal(lock.name.length, a.length);
      assert.ok(lock.name === a);
      // b is a different name: free although a is held.
      assert.equal(await locks.request(b, { ifAvailable: true }, (l) => l !== null), true);
      // A second request for a queues behind the first.
      const order = [];
      const second = locks.request(a, { mode: 'shared' }, () => { order.push('second'); });
      const snap = await locks.query();
      assert.equal(snap.held.filter((e) => e.name === a).length, 1);
      assert.equal(snap.pending.filter((e) => e.name === a).length, 1);
      order.push('release');
      ha.release();
      await ha.done;
      await second;
      assert.deepEqual(order, ['release', 'second']);
      await assertHealthy([a, b]);
    });

    it('cross threads intact: a worker waits on the main thread\'s 10 MB name and gets the exact same string back', async function () {
      const name = uniq('huge-x') + '\u00e9'.repeat(MB10);
      const h = hold(name);
      await h.granted;
      const agent = await spawnAgent();
      const id = await agent.request(name);
      const { pending } = await stateOf(name);
      assert.equal(pending.length, 1, 'the worker waits on the same name');
      h.release();
      const g = await agent.granted(id);
      assert.ok(g.lock.name === name, 'Lock.name in the worker is the same string');
      agent.release(id);
      await agent.settled(id);
      await assertHealthy([name]);
    });

    it('many requests on 10 MB names do not grow memory without bound', async function () {
      const name = uniq('huge-many') + 'y'.repeat(MB10);
      const rss0 = process.memoryUsage().rss;
      for (let i = 0; i < 30; i++) {
        await locks.request(name, () => {});
        await locks.request(name, { ifAvailable: true }, () => {});
      }
      if (global.gc) global.gc();
      const grown = process.memoryUsage().rss - rss0;
      // 60 requests copy 20 MB each into the manager: 1.2 GB if never freed.
      assert.ok(grown < 400 * 1024 * 1024, `RSS grew by ${(grown / 1048576).toFixed(0)} MB`);
      await assertHealthy([name]);
    });
  });

  describe('names with NUL and lone surrogates', function () {
    it('stay distinct and exact across threads', async function () {
      const base = uniq('odd');
      const names = [`${base}\0`, `${base}\0\0`, `${base}\uD800`, `${base}\uDC00`, `${base}\uD800\0\uDBFF`, `\0${base}`];
      const hs = names.map((n) => hold(n));
      await Promise.all(hs.map((h) => h.granted));
      const agent = await spawnAgent();
      const ids = [];
      for (const n of names) ids.push(await agent.request(n, { ifAvailable: true }, { hold: false }));
      // Every one is held here, so every ifAvailable request in the worker
      // gets null; a name the main thread does not hold is granted.
      for (const id of ids) assert.equal((await agent.granted(id)).lock, null);
      const free = await agent.request(`${base}\uD800\uDC00`, {}, { hold: false });
      assert.notEqual((await agent.granted(free)).lock, null);
      const queued = await agent.request(names[4]);
      const { pending } = await stateOf(names);
      assert.deepEqual(pending.map((e) => e.name), [names[4]]);
      hs.forEach((h) => h.release());
      const g = await agent.granted(queued);
      assert.ok(g.lock.name === names[4]);
      agent.release(queued);
      await agent.settled(queued);
      await Promise.all(hs.map((h) => h.done));
      await assertHealthy(names);
    });
  });

  describe('callbacks that throw non-Error values', function () {
    const values = [undefined, null, 0, '', 'text', false, Symbol('s'), { an: 'object' }, [1, 2], () => 'fn', Object.create(null)];

    it('reject request() with that very value, release the lock, and leave no unhandled rejection', async function () {
      const name = uniq('throw');
      const unhandled = trackUnhandled();
      for (const v of values) {
        const robbed = locks.request(name, () => new Promise(() => {})).catch((e) => e.name);
        const p = locks.request(name, { steal: true }, () => { throw v; });
        await assert.rejects(p, (e) => Object.is(e, v));
        assert.equal(await robbed, 'AbortError');
        const q = locks.request(name, async () => { await null; throw v; });
        await assert.rejects(q, (e) => Object.is(e, v));
      }
      assert.deepEqual(await unhandled.stop(), []);
      await assertHealthy([name]);
    });

    it('a worker\'s callback that throws a non-Error releases the lock the main thread waits for', async function () {
      const name = uniq('throw-x');
      const w = spawnScript(`
        const name = workerData.name;
        parentPort.on('message', () => {
          locks.request(name, () => { throw Symbol.for('x'); })
            .catch((e) => parentPort.postMessage(e === Symbol.for('x') ? 'rejected with it' : 'other'));
          parentPort.postMessage('requested');
        });
        parentPort.postMessage('ready');
      `, { name });
      await w.message((m) => m === 'ready');
      const h = hold(name);
      await h.granted;
      w.post('go');
      // The worker's request is queued once request() has returned there;
      // the main thread's goes behind it.
      await w.message((m) => m === 'requested');
      const after = locks.request(name, () => 'mine');
      h.release();
      assert.equal(await w.message((m) => m === 'rejected with it' || m === 'other'), 'rejected with it');
      assert.equal(await after, 'mine');
      await assertHealthy([name]);
    });
  });

  describe('options objects with throwing getters', function () {
    it('reject with the getter\'s error (any value), queue nothing and hold nothing', async function () {
      const name = uniq('getter');
      const thrown = [new Error('getter'), 7, undefined, Symbol('g')];
      for (const v of thrown) {
        for (const member of ['ifAvailable', 'mode', 'signal', 'steal']) {
          const options = { get [member]() { throw v; } };
          let called = false;
          await assert.rejects(locks.request(name, options, () => { called = true; }), (e) => Object.is(e, v));
          assert.equal(called, false);
        }
        // A Proxy whose every trap throws.
        const proxy = new Proxy({}, { get() { throw v; }, has() { throw v; }, ownKeys() { throw v; } });
        await assert.rejects(locks.request(name, proxy, () => {}), (e) => Object.is(e, v));
        // A mode whose toString throws.
        await assert.rejects(locks.request(name, { mode: { toString() { throw v; } } }, () => {}), (e) => Object.is(e, v));
      }
      await assertHealthy([name]);
    });

    it('a getter that calls request() itself, and then throws, leaves only the inner request', async function () {
      const name = uniq('getter-reentrant');
      let inner;
      const options = {
        get mode() {
          inner = locks.request(name, () => 'inner');
          throw new Error('after the inner request');
        },
      };
      await assert.rejects(locks.request(name, options, () => 'outer'), /after the inner request/);
      assert.equal(await inner, 'inner');
      await assertHealthy([name]);
    });

    it('a getter that aborts a queued request and lets go of a held lock on the way', async function () {
      const name = uniq('getter-side');
      const h = hold(name);
      await h.granted;
      const controller = new AbortController();
      const queued = locks.request(name, { signal: controller.signal }, () => 'never');
      const options = {
        get ifAvailable() {
          controller.abort('from a getter');
          h.release(); // the lock goes only after this task's microtasks
          return true;
        },
      };
      // The getter runs inside request(), before the request reaches the
      // manager, where the name is still held: the callback gets null.
      const p = locks.request(name, options, (lock) => lock);
      await assert.rejects(queued, (e) => e === 'from a getter');
      assert.equal(await p, null);
      await h.done;
      await assertHealthy([name]);
    });
  });

  describe('signals aborted at awkward moments', function () {
    it('from inside the callback: its own signal does nothing; another queued request\'s signal rejects only that one', async function () {
      const name = uniq('sig-in-cb');
      const own = new AbortController();
      const other = new AbortController();
      const order = [];
      let second;
      let third;
      const first = locks.request(name, { signal: own.signal }, async () => {
        second = locks.request(name, { signal: other.signal }, () => { order.push('second'); });
        third = locks.request(name, () => { order.push('third'); });
        own.abort('own');
        other.abort('other');
        await null;
        return 'first';
      });
      assert.equal(await first, 'first');
      await assert.rejects(second, (e) => e === 'other');
      await third;
      assert.deepEqual(order, ['third']);
      await assertHealthy([name]);
    });

    it('from another thread\'s lock callback, racing the grant: every outcome is consistent and nothing wedges (200 rounds)', async function () {
      const name = uniq('sig-x');
      // The worker takes the lock, tells the main thread to abort its queued
      // request from inside its callback (through shared memory, so the
      // abort and the release race), and releases at once.
      const flag = new Int32Array(new SharedArrayBuffer(8));
      const w = spawnScript(`
        const flag = new Int32Array(workerData.flag);
        parentPort.on('message', (round) => {
          locks.request(workerData.name, () => {
            Atomics.store(flag, 0, round);
            Atomics.notify(flag, 0);
            // Let go now or a little later, round by round.
            const until = process.hrtime.bigint() + BigInt((round % 5) * 50000);
            while (process.hrtime.bigint() < until);
          }).then(() => parentPort.postMessage({ released: round }));
          parentPort.postMessage({ requested: round });
        });
        parentPort.postMessage('ready');
      `, { name, flag: flag.buffer });
      await w.message((m) => m === 'ready');
      const outcomes = { aborted: 0, ran: 0 };
      for (let round = 1; round <= 200; round++) {
        const h = hold(name);
        await h.granted;
        w.post(round);
        await w.message((m) => m && m.requested === round);
        const controller = new AbortController();
        let ran = false;
        const mine = locks.request(name, { signal: controller.signal }, () => { ran = true; return 'ran'; });
        const behind = locks.request(name, { mode: 'shared' }, () => 'behind');
        h.release();
        // Abort as soon as the worker's callback says so.
        await Atomics.waitAsync(flag, 0, round - 1).value;
        for (let i = 0; i < round % 3; i++) await new Promise((r) => setImmediate(r));
        controller.abort('aborted');
        const result = await mine.then((v) => v, (e) => e);
        if (result === 'aborted') {
          assert.equal(ran, false, 'aborted before its callback ran, so it never runs');
          outcomes.aborted++;
        } else {
          assert.equal(result, 'ran');
          outcomes.ran++;
        }
        assert.equal(await behind, 'behind');
        await w.message((m) => m && m.released === round);
      }
      assert.equal(outcomes.aborted + outcomes.ran, 200);
      assert.ok(outcomes.aborted > 0, 'some aborts came first');
      if (process.env.BAD_INPUT_VERBOSE) console.log(outcomes);
      await assertHealthy([name]);
    });

    it('a signal aborted from another request\'s callback on this thread while its request is granted but not yet delivered', async function () {
      const name = uniq('sig-undelivered');
      let ranAny = false;
      for (let i = 0; i < 50; i++) {
        const controller = new AbortController();
        let ran = false;
        // The first callback releases synchronously, which grants the second
        // request at once; the abort comes before that grant is delivered.
        const first = locks.request(name, () => {
          queueMicrotask(() => controller.abort('late'));
        });
        const second = locks.request(name, { signal: controller.signal }, () => { ran = true; ranAny = true; });
        await first;
        await assert.rejects(second, (e) => e === 'late');
        assert.equal(ran, false);
        ranAny = ranAny || ran;
      }
      // The last aborted request's lock is let go when its grant reaches
      // this thread (the spec's "if signal is aborted, release the lock");
      // a request behind it is then granted.
      assert.equal(await locks.request(name, () => 'after'), 'after');
      assert.equal(ranAny, false);
      await assertHealthy([name]);
    });
  });

  describe('re-entrant and badly timed calls', function () {
    it('request() from inside a query() reaction and query() from inside a callback', async function () {
      const name = uniq('in-query');
      const inner = deferred();
      const snap = await locks.query().then((s) => {
        inner.resolve(locks.request(name, async () => {
          const q = await locks.query();
          return q.held.filter((e) => e.name === name).length;
        }));
        return s;
      });
      assert.ok(Array.isArray(snap.held));
      assert.equal(await inner.promise, 1);
      await assertHealthy([name]);
    });

    it('request() during a worker\'s teardown (its "exit" handlers, a request loop cut by terminate()) leaves nothing behind', async function () {
      const name = uniq('teardown');
      for (let i = 0; i < 20; i++) {
        const w = spawnScript(`
          process.on('exit', () => {
            locks.request(workerData.name, () => {});
            locks.request(workerData.name + '-other', { mode: 'shared' }, () => {});
            locks.query();
          });
          locks.request(workerData.name, () => {
            // Round by round: exit from inside the lock callback (exit
            // handlers run), or keep requesting until terminated.
            if (workerData.exit) process.exit(3);
            return new Promise(() => {});
          });
          const again = () => { locks.request(workerData.name + '-other', () => {}); setImmediate(again); };
          again();
          parentPort.postMessage('running');
        `, { name, exit: i % 2 === 0 });
        if (i % 2 === 0) {
          assert.equal(await w.exited, 3);
        } else {
          await w.message((m) => m === 'running');
          await w.terminate();
        }
      }
      await assertHealthy([name, `${name}-other`]);
    });

    it('request() in the main thread\'s "exit" handler: the process still exits cleanly', function () {
      const r = spawnSync(process.execPath, ['-e', `
        const { locks } = require(${JSON.stringify(PKG)});
        locks.request('held', () => new Promise(() => {}));
        process.on('exit', () => {
          locks.request('in-exit', () => { throw new Error('never runs'); });
          locks.request('held', { steal: true }, () => {});
          locks.query();
        });
        setTimeout(() => process.exit(5), 10);
      `], { encoding: 'utf8', timeout: 15000 });
      assert.equal(r.signal, null, r.stderr);
      assert.equal(r.status, 5, r.stderr);
      assert.equal(r.stderr, '');
    });
  });
});
