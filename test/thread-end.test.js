'use strict';
// Spec §2.6: when an agent terminates, "terminate remaining locks and
// requests": every request of the agent is aborted and every lock it holds
// is released, so that requests queued behind them on other threads are
// granted (in queue order).
const assert = require('node:assert/strict');
const { api, uniq, hold, stateOf, stateAfterEnd, myClientId, PROCESS_MODE } = require('./fixtures/util');
const { spawnAgent, spawnScript, terminateAll } = require('./fixtures/agent');

describe('a thread that ends', function () {
  let locks;
  before(function () {
    ({ locks } = api());
  });
  afterEach(terminateAll);

  // The worker holds `name`; the main thread queues three requests behind
  // it; returns a promise of the order in which they were granted.
  function queueBehind(name) {
    const order = [];
    const all = [
      locks.request(name, () => { order.push(1); }),
      locks.request(name, { mode: 'shared' }, () => { order.push(2); }),
      locks.request(name, () => { order.push(3); }),
    ];
    return Promise.all(all).then(() => order);
  }

  async function nothingOf(clientId, names) {
    const { held, pending } = await stateOf(names);
    assert.deepEqual(held.filter((i) => i.clientId === clientId), [], 'held entries of the ended thread');
    assert.deepEqual(pending.filter((i) => i.clientId === clientId), [], 'pending entries of the ended thread');
  }

  it('worker.terminate(): its locks are released, its requests are removed, and the requests waiting behind them are granted in order', async function () {
    const a = uniq('end-term-a');
    const b = uniq('end-term-b');
    const hb = hold(b);
    await hb.granted;
    const agent = await spawnAgent();
    const ia = await agent.request(a);
    await agent.granted(ia);
    await agent.request(b);                  // pending behind the main thread
    const cid = await agent.clientId();
    const order = queueBehind(a);
    let { held, pending } = await stateOf([a, b]);
    assert.equal(held.filter((i) => i.clientId === cid).length, 1);
    assert.equal(pending.filter((i) => i.clientId === cid).length, 1);

    await agent.terminate();
    assert.deepEqual(await order, [1, 2, 3]);
    await nothingOf(cid, [a, b]);
    // b goes to nobody when the main thread lets it go.
    hb.release();
    await hb.done;
    ({ held, pending } = await stateOf([a, b]));
    assert.deepEqual({ held, pending }, { held: [], pending: [] });
  });

  it('process.exit() in a worker releases its locks and removes its requests', async function () {
    const name = uniq('end-exit');
    const other = uniq('end-exit-other');
    const ho = hold(other);
    await ho.granted;
    const agent = await spawnAgent();
    const id = await agent.request(name, { mode: 'shared' });
    await agent.granted(id);
    await agent.request(other);
    const cid = await agent.clientId();
    const order = queueBehind(name);
    agent.post({ cmd: 'exit', code: 3 });
    assert.equal(await agent.exited, 3);
    assert.deepEqual(await order, [1, 2, 3]);
    await nothingOf(cid, [name, other]);
    ho.release();
    await ho.done;
    assert.deepEqual(await stateOf(other), { held: [], pending: [] });
  });

  it('an uncaught exception in a worker releases its locks and removes its requests', async function () {
    const name = uniq('end-throw');
    const other = uniq('end-throw-other');
    const ho = hold(other);
    await ho.granted;
    const agent = await spawnAgent();
    const id = await agent.request(name);
    await agent.granted(id);
    await agent.request(other);
    const cid = await agent.clientId();
    const order = queueBehind(name);
    agent.post({ cmd: 'throw', message: 'uncaught in worker' });
    assert.equal(await agent.exited, 1);
    assert.equal(agent.errors.length, 1);
    assert.match(agent.errors[0].message, /uncaught in worker/);
    assert.deepEqual(await order, [1, 2, 3]);
    await nothingOf(cid, [name, other]);
    ho.release();
    await ho.done;
  });

  it('an exception thrown by a worker\'s lock callback that nobody handles ends the worker and releases the lock', async function () {
    const name = uniq('end-cb-throw');
    const w = spawnScript(`
      locks.request(workerData.name, () => {
        parentPort.postMessage('granted');
        return new Promise(() => {});
      });
      locks.request(workerData.name + '/2', () => {
        throw new Error('callback failure nobody handles');
      });
    `, { name });
    await w.message((m) => m === 'granted');
    const order = queueBehind(name);
    const code = await w.exited;
    // Bun ends such a worker with exit code 0, and no error event.
    if (process.versions.bun === undefined) {
      assert.equal(code, 1);
      assert.match(String(w.errors[0] && w.errors[0].message), /callback failure nobody handles/);
    }
    assert.deepEqual(await order, [1, 2, 3]);
  });

  it('terminate() while the worker\'s callback spins in an infinite loop releases the lock', async function () {
    const name = uniq('end-spin');
    const agent = await spawnAgent();
    const id = await agent.request(name, {}, { spin: true });
    await agent.granted(id);
    const cid = (await stateOf(name)).held[0].clientId;
    const order = queueBehind(name);
    assert.equal((await stateOf(name)).pending.length, 3);
    await agent.terminate();
    assert.deepEqual(await order, [1, 2, 3]);
    await nothingOf(cid, [name]);
  });

  it('the next thread in line is granted: a queued worker gets the lock before the main thread queued after it', async function () {
    // Agents share memory with this thread: workers only.
    if (PROCESS_MODE) this.skip();
    const name = uniq('end-chain');
    const sab = new SharedArrayBuffer(4);
    const seq = new Int32Array(sab);
    const holder = await spawnAgent({ seq: sab });
    const next = await spawnAgent({ seq: sab });
    const ih = await holder.request(name);
    await holder.granted(ih);
    const inx = await next.request(name, {}, { hold: false });
    let mainTicket;
    const mainP = locks.request(name, () => { mainTicket = Atomics.add(seq, 0, 1); });
    await holder.terminate();
    const g = await next.granted(inx);
    await mainP;
    assert.equal(g.seq, 1);
    assert.equal(mainTicket, 2);
  });

  it('ending a shared holder keeps the other shared holders, and an exclusive waiter is granted when the last one goes', async function () {
    const name = uniq('end-shared');
    const a = await spawnAgent();
    const b = await spawnAgent();
    const ia = await a.request(name, { mode: 'shared' });
    const ib = await b.request(name, { mode: 'shared' });
    await Promise.all([a.granted(ia), b.granted(ib)]);
    let granted = false;
    const ex = locks.request(name, () => { granted = true; });
    await a.terminate();
    const { held, pending } = await stateAfterEnd(name, (state) => state.held.length === 1);
    assert.equal(held.length, 1);
    assert.equal(pending.length, 1);
    assert.equal(granted, false);
    await b.terminate();
    await ex;
    assert.equal(granted, true);
  });

  it('a worker holding many locks and requests releases all of them when terminated', async function () {
    if (PROCESS_MODE) this.skip(); // a worker's script
    this.timeout(10000);
    const base = uniq('end-many');
    const blocked = `${base}/blocked`;
    const hb = hold(blocked);
    await hb.granted;
    const w = spawnScript(`
      let granted = 0;
      for (let i = 0; i < 1000; i++) {
        locks.request(workerData.base + '/' + i, () => {
          if (++granted === 1000) parentPort.postMessage('all granted');
          return new Promise(() => {});
        });
      }
      for (let i = 0; i < 1000; i++) locks.request(workerData.blocked, { mode: i % 2 ? 'shared' : 'exclusive' }, () => {});
      setInterval(() => {}, 1000); // stays alive until terminated
    `, { base, blocked });
    await w.message((m) => m === 'all granted');
    const names = [blocked, ...Array.from({ length: 1000 }, (_, i) => `${base}/${i}`)];
    let state = await stateOf(names);
    assert.equal(state.held.length, 1001);
    assert.equal(state.pending.length, 1000);
    await w.terminate();
    state = await stateOf(names);
    assert.equal(state.held.length, 1);
    assert.equal(state.pending.length, 0);
    const free = await Promise.all(names.slice(1, 50).map((n) => locks.request(n, { ifAvailable: true }, (l) => l !== null)));
    assert.ok(free.every(Boolean));
    hb.release();
    await hb.done;
  });

  it('a worker terminated right after requesting never blocks the name (repeated)', async function () {
    this.timeout(20000);
    const name = uniq('end-race');
    for (let i = 0; i < 10; i++) {
      const agent = await spawnAgent();
      agent.post({ cmd: 'request', id: 1, name, options: {} });
      if (i % 2) await agent.message((m) => m.type === 'requested');
      await agent.terminate();
      assert.equal(await locks.request(name, (l) => l.name), name);
    }
    assert.deepEqual(await stateOf(name), { held: [], pending: [] });
  });

  it('the main thread\'s clientId is unaffected by workers ending', async function () {
    const before = await myClientId();
    const agent = await spawnAgent();
    await agent.clientId();
    await agent.terminate();
    assert.equal(await myClientId(), before);
  });
});
