'use strict';
// A thread with pending requests must stay alive until they are granted or
// aborted (otherwise the grant the spec promises would never be delivered);
// a held lock alone does not keep a thread alive (a thread that has nothing
// left to do ends, and ending releases its locks, spec §2.6).
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const { PKG, api, uniq, hold, stateOf, delay } = require('./fixtures/util');
const { spawnScript, terminateAll } = require('./fixtures/agent');

// Under Bun a waiting request keeps its thread alive whatever blocks it (Bun
// has no uv_loop_alive, which telling a stuck thread needs: see README).
function needsStuckCheck(test) {
  if (process.versions.bun !== undefined) {
    test.test.title += ' (pending: not under Bun)';
    test.skip();
  }
}

// The child ended by itself (it was not killed for its timeout), with exit
// code 0, having printed stdout.
function assertEnded(r, stdout, message = 'the process had to be killed') {
  assert.equal(r.killed, false, message);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.trim(), stdout);
}

function runNode(code, timeout = 10000) {
  return new Promise((resolve) => {
    execFile(process.execPath, ['-e', code], { timeout, env: Object.assign({}, process.env, { PKG }) }, (error, stdout, stderr) => {
      resolve({ code: error ? (error.code === undefined ? null : error.code) : 0, killed: Boolean(error && error.killed), signal: error && error.signal, stdout, stderr });
    });
  });
}

describe('keeping threads alive', function () {
  let locks;
  before(function () {
    ({ locks } = api());
  });
  afterEach(terminateAll);

  it('a worker whose only work is a pending request stays alive until it is granted, then exits on its own', async function () {
    const name = uniq('ka-pending');
    const h = hold(name);
    await h.granted;
    const w = spawnScript(`
      locks.request(workerData.name, (lock) => {
        parentPort.postMessage('granted ' + lock.name);
      });
      parentPort.postMessage('requested');
    `, { name });
    await w.message((m) => m === 'requested');
    const { pending } = await stateOf(name);
    assert.equal(pending.length, 1, 'the worker\'s request is queued');
    // Nothing else keeps the worker alive: it must not exit now.
    await delay(50);
    assert.equal(w.exitCode, undefined, 'the worker exited with a request pending');
    assert.equal((await stateOf(name)).pending.length, 1);
    h.release();
    await w.message((m) => m === `granted ${name}`);
    assert.equal(await w.exited, 0);
    await h.done;
    assert.deepEqual(await stateOf(name), { held: [], pending: [] });
  });

  it('a worker that holds a lock with a never-settling callback and has nothing else to do exits on its own, and its lock is released', async function () {
    const name = uniq('ka-held');
    const w = spawnScript(`
      locks.request(workerData.name, () => {
        parentPort.postMessage('granted');
        return new Promise(() => {});
      });
    `, { name });
    await w.message((m) => m === 'granted');
    assert.equal(await w.exited, 0);
    assert.deepEqual(await stateOf(name), { held: [], pending: [] });
    assert.equal(await locks.request(name, { ifAvailable: true }, (l) => l !== null), true);
  });

  it('a request waiting behind a lock held by an idle worker is granted when that worker exits on its own', async function () {
    const name = uniq('ka-held-waiter');
    const w = spawnScript(`
      locks.request(workerData.name, () => {
        parentPort.postMessage('granted');
        return new Promise(() => {});
      });
    `, { name });
    await w.message((m) => m === 'granted');
    const got = await locks.request(name, (l) => l.name);
    assert.equal(got, name);
    assert.equal(await w.exited, 0);
  });

  it('a worker whose pending request is aborted (by an unref\'d AbortSignal.timeout) gets the rejection and then exits on its own', async function () {
    const name = uniq('ka-abort');
    const h = hold(name);
    await h.granted;
    const w = spawnScript(`
      locks.request(workerData.name, { signal: AbortSignal.timeout(50) }, () => {
        parentPort.postMessage('granted?!');
      }).catch((e) => parentPort.postMessage('rejected ' + e.name));
      parentPort.postMessage('requested');
    `, { name });
    await w.message((m) => m === 'requested');
    await w.message((m) => m === 'rejected TimeoutError');
    assert.equal(await w.exited, 0);
    assert.deepEqual((await stateOf(name)).pending, []);
    h.release();
    await h.done;
  });

  it('a worker whose ifAvailable request got null exits on its own', async function () {
    const name = uniq('ka-ifavail');
    const h = hold(name);
    await h.granted;
    const w = spawnScript(`
      locks.request(workerData.name, { ifAvailable: true }, (lock) => {
        parentPort.postMessage(lock === null ? 'null' : 'lock');
      });
    `, { name });
    await w.message((m) => m === 'null');
    assert.equal(await w.exited, 0);
    h.release();
    await h.done;
  });

  it('a worker whose lock was stolen gets the AbortError and exits on its own', async function () {
    const name = uniq('ka-stolen');
    const w = spawnScript(`
      const keep = setInterval(() => {}, 1000); // alive until the steal
      locks.request(workerData.name, () => {
        parentPort.postMessage('granted');
        return new Promise(() => {});
      }).catch((e) => {
        parentPort.postMessage('rejected ' + e.name);
        clearInterval(keep);
      });
    `, { name });
    await w.message((m) => m === 'granted');
    await locks.request(name, { steal: true }, () => {});
    await w.message((m) => m === 'rejected AbortError');
    assert.equal(await w.exited, 0);
  });

  it('a worker whose request waits behind its own lock ends on its own: its lock is released and its request gone', async function () {
    needsStuckCheck(this);
    const name = uniq('ka-self');
    const w = spawnScript(`
      locks.request(workerData.name, () => new Promise(() => {}));
      locks.request(workerData.name, () => parentPort.postMessage('granted'));
      parentPort.postMessage('requested');
    `, { name });
    await w.message((m) => m === 'requested');
    assert.equal(await w.exited, 0);
    assert.deepEqual(await stateOf(name), { held: [], pending: [] });
  });

  it('many pending requests in one worker keep it alive until the last is granted', async function () {
    const name = uniq('ka-many');
    const h = hold(name);
    await h.granted;
    const w = spawnScript(`
      let n = 0;
      for (let i = 0; i < 20; i++) {
        locks.request(workerData.name, () => { if (++n === 20) parentPort.postMessage('all'); });
      }
      parentPort.postMessage('requested');
    `, { name });
    await w.message((m) => m === 'requested');
    await delay(50);
    assert.equal(w.exitCode, undefined);
    h.release();
    await w.message((m) => m === 'all');
    assert.equal(await w.exited, 0);
  });

  describe('the main thread (in a child process)', function () {
    this.timeout(20000);

    it('a process whose main thread holds a lock with a never-settling callback exits on its own with code 0', async function () {
      const r = await runNode(`
        const { locks } = require(process.env.PKG);
        locks.request('held-forever', () => {
          console.log('granted');
          return new Promise(() => {});
        });
      `);
      assertEnded(r, 'granted', 'the process had to be killed: the held lock kept it alive');
    });

    it('a main thread with a pending request stays alive until another thread releases the lock', async function () {
      const r = await runNode(`
        const { Worker } = require('node:worker_threads');
        const { locks } = require(process.env.PKG);
        const w = new Worker(
          "const { locks } = require(process.env.PKG);" +
          "const { parentPort } = require('node:worker_threads');" +
          "locks.request('x', () => { parentPort.postMessage('held'); return new Promise((r) => setTimeout(r, 200)); });",
          { eval: true });
        w.once('message', () => {
          w.unref(); // from here on only the pending request keeps the main thread alive
          locks.request('x', () => console.log('main granted'));
        });
      `);
      assertEnded(r, 'main granted');
    });

    it('a main thread whose request waits behind a lock it leaked itself ends on its own (a deadlocked test run), saying hasRef() false', async function () {
      needsStuckCheck(this);
      const r = await runNode(`
        const asyncHooks = require('node:async_hooks');
        let resource;
        asyncHooks.createHook({ init(id, type, trigger, r) { if (type === 'WebLocks') resource = r; } }).enable();
        const { locks } = require(process.env.PKG);
        locks.request('leaked', () => new Promise(() => {}));
        locks.request('leaked', () => console.log('granted'));
        locks.request('leaked', { mode: 'shared' }, () => console.log('granted'));
        process.on('exit', () => console.log('exit', resource.hasRef()));
      `);
      assertEnded(r, 'exit false', 'the process had to be killed: a request that only its own lock blocked kept it alive');
    });

    it('behind its own shared lock, an exclusive request does not keep it alive either, whoever else shares the lock', async function () {
      needsStuckCheck(this);
      const r = await runNode(`
        const { Worker } = require('node:worker_threads');
        const { locks } = require(process.env.PKG);
        const w = new Worker(
          "const { locks } = require(process.env.PKG);" +
          "const { parentPort } = require('node:worker_threads');" +
          "locks.request('s', { mode: 'shared' }, () => { parentPort.postMessage('held'); setInterval(() => {}, 1000); return new Promise(() => {}); });",
          { eval: true });
        w.once('message', () => {
          locks.request('s', { mode: 'shared' }, () => new Promise(() => {}));
          locks.request('s', () => console.log('granted'));
          w.unref(); // it stays busy, holding its shared lock, but not this thread
          process.on('exit', () => console.log('exit'));
        });
      `);
      assertEnded(r, 'exit');
    });

    it('a request behind its own lock does not keep it alive, one behind another thread\'s lock does, both in one thread', async function () {
      needsStuckCheck(this);
      const r = await runNode(`
        const { Worker } = require('node:worker_threads');
        const { locks } = require(process.env.PKG);
        locks.request('mine', () => new Promise(() => {}));
        locks.request('mine', () => console.log('mine granted'));
        const w = new Worker(
          "const { locks } = require(process.env.PKG);" +
          "const { parentPort } = require('node:worker_threads');" +
          "locks.request('theirs', () => { parentPort.postMessage('held'); return new Promise((r) => setTimeout(r, 300)); });",
          { eval: true });
        w.once('message', () => {
          w.unref(); // only the request on 'theirs' can keep this thread alive now
          locks.request('theirs', () => console.log('theirs granted'));
        });
      `);
      assertEnded(r, 'theirs granted');
    });

    it("the thread's async resource says it keeps the loop alive (hasRef()) exactly while a request waits", async function () {
      if (process.versions.bun !== undefined) this.skip(); // no async_hooks.createHook in Bun
      // As jest's --detectOpenHandles asks every async resource still there.
      const r = await runNode(`
        const asyncHooks = require('node:async_hooks');
        let resource;
        asyncHooks.createHook({ init(id, type, trigger, r) { if (type === 'WebLocks') resource = r; } }).enable();
        const { locks } = require(process.env.PKG);
        const seen = [resource.hasRef()];
        process.on('exit', () => console.log(JSON.stringify(seen)));
        locks.request('x', () => {
          seen.push(resource.hasRef());
          locks.request('x', () => { seen.push(resource.hasRef()); });
          seen.push(resource.hasRef());
          return new Promise((r) => setImmediate(r));
        });
      `);
      assert.equal(r.code, 0, r.stderr);
      // Nothing, a held lock, a waiting request, and that request granted.
      assert.deepEqual(JSON.parse(r.stdout), [false, false, true, false]);
    });
  });
});
