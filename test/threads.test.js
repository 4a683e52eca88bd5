'use strict';
// One lock manager per process (spec §2.2: agents sharing a storage bucket
// share a lock manager): the main thread and every worker_thread are agents
// of the same manager.
const assert = require('node:assert/strict');
const { api, uniq, hold, stateOf, myClientId, requestsMade, PROCESS_MODE } = require('./fixtures/util');
const { spawnAgent, spawnScript, terminateAll } = require('./fixtures/agent');

function abortError(err) {
  return err instanceof DOMException && err.name === 'AbortError';
}

describe('across threads', function () {
  let locks;
  before(function () {
    ({ locks } = api());
  });
  afterEach(terminateAll);

  describe('exclusion', function () {
    it('a lock held by a worker is not available to the main thread until the worker releases it', async function () {
      const name = uniq('t-ex');
      const agent = await spawnAgent();
      const id = await agent.request(name);
      const g = await agent.granted(id);
      assert.deepEqual(g.lock, { name, mode: 'exclusive' });
      assert.equal(await locks.request(name, { ifAvailable: true }, (l) => l), null);
      assert.equal(await locks.request(name, { mode: 'shared', ifAvailable: true }, (l) => l), null);
      let granted = false;
      const p = locks.request(name, () => { granted = true; return 'main'; });
      assert.equal((await stateOf(name)).pending.length, 1);
      assert.equal(granted, false);
      agent.release(id, 'worker value');
      assert.equal(await p, 'main');
      assert.deepEqual(await agent.settled(id), { type: 'resolved', id, value: 'worker value' });
    });

    it('a lock held by the main thread is not available to a worker until released', async function () {
      const name = uniq('t-ex2');
      const h = hold(name);
      await h.granted;
      const agent = await spawnAgent();
      const probe = await agent.request(name, { ifAvailable: true }, { hold: false });
      assert.equal((await agent.granted(probe)).lock, null);
      const id = await agent.request(name);
      assert.equal((await stateOf(name)).pending.length, 1);
      assert.equal(agent.isGranted(id), false);
      h.release();
      await agent.granted(id);
      agent.release(id);
      await agent.settled(id);
      await h.done;
    });

    it('shared locks are held by several threads at once', async function () {
      const name = uniq('t-sh');
      const a = await spawnAgent();
      const b = await spawnAgent();
      const ia = await a.request(name, { mode: 'shared' });
      const ib = await b.request(name, { mode: 'shared' });
      await Promise.all([a.granted(ia), b.granted(ib)]);
      const mode = await locks.request(name, { mode: 'shared', ifAvailable: true }, (l) => l && l.mode);
      assert.equal(mode, 'shared');
      assert.equal(await locks.request(name, { ifAvailable: true }, (l) => l), null);
      const { held } = await stateOf(name);
      assert.equal(held.length, 2);
      assert.notEqual(held[0].clientId, held[1].clientId);
      a.release(ia);
      b.release(ib);
      await Promise.all([a.settled(ia), b.settled(ib)]);
    });

    it('mutual exclusion holds under contention: 4 workers and the main thread do unsynchronised read-modify-write under the lock', async function () {
      // Agents share memory with this thread: workers only.
      if (PROCESS_MODE) this.skip();
      this.timeout(20000);
      const name = uniq('t-counter');
      const sab = new SharedArrayBuffer(8);
      const counter = new Int32Array(sab);
      const ROUNDS = 150;
      const code = `
        const c = new Int32Array(workerData.sab);
        (async () => {
          for (let i = 0; i < workerData.rounds; i++) {
            await locks.request(workerData.name, async () => {
              const v = c[0];
              c[1] = Math.max(c[1], 1);
              await new Promise((r) => setImmediate(r));
              c[0] = v + 1;
            });
          }
          parentPort.postMessage('done');
        })();
      `;
      const workers = [];
      for (let i = 0; i < 4; i++) workers.push(spawnScript(code, { sab, name, rounds: ROUNDS }));
      const mainWork = (async () => {
        for (let i = 0; i < ROUNDS; i++) {
          await locks.request(name, async () => {
            const v = counter[0];
            await new Promise((r) => setImmediate(r));
            counter[0] = v + 1;
          });
        }
      })();
      await Promise.all([mainWork, ...workers.map((w) => w.message((m) => m === 'done'))]);
      assert.equal(counter[0], ROUNDS * 5);
      assert.equal(counter[1], 1, 'the workers ran their critical sections');
    });
  });

  describe('FIFO across threads', function () {
    it('grants requests from several threads in request order, with one ticket counter shared by all', async function () {
      // Agents share memory with this thread: workers only.
      if (PROCESS_MODE) this.skip();
      const name = uniq('t-fifo');
      const sab = new SharedArrayBuffer(4);
      const seq = new Int32Array(sab);
      const h = hold(name);
      await h.granted;
      const agents = [];
      for (let i = 0; i < 3; i++) agents.push(await spawnAgent({ seq: sab }));
      const expected = [];
      const waits = [];
      for (let round = 0; round < 3; round++) {
        for (let i = 0; i < 3; i++) {
          const id = await agents[i].request(name, {}, { hold: false });
          expected.push(`w${i}`);
          waits.push(agents[i].granted(id).then((m) => ({ who: `w${i}`, seq: m.seq })));
        }
        let ticket;
        const p = locks.request(name, () => { ticket = Atomics.add(seq, 0, 1); });
        expected.push('main');
        waits.push(p.then(() => ({ who: 'main', seq: ticket })));
      }
      const { pending } = await stateOf(name);
      assert.equal(pending.length, 12);
      h.release();
      const got = await Promise.all(waits);
      got.sort((x, y) => x.seq - y.seq);
      assert.deepEqual(got.map((g) => g.who), expected);
      assert.deepEqual(got.map((g) => g.seq), Array.from({ length: 12 }, (_, i) => i));
    });

    it('a shared request behind another thread\'s queued exclusive request waits for it', async function () {
      const name = uniq('t-fifo-sh');
      const s = hold(name, { mode: 'shared' });
      await s.granted;
      const A = await spawnAgent();
      const B = await spawnAgent();
      const aid = await A.request(name);                     // exclusive, queued
      const mainShared = hold(name, { mode: 'shared' });     // shared, queued behind A
      const bid = await B.request(name, { mode: 'shared' }); // shared, queued behind that
      const [cidA, cidB, cidMain] = [await A.clientId(), await B.clientId(), await myClientId()];
      let state = await stateOf(name);
      assert.deepEqual(state.held.map((i) => [i.mode, i.clientId]), [['shared', cidMain]]);
      assert.deepEqual(state.pending.map((i) => [i.mode, i.clientId]), [['exclusive', cidA], ['shared', cidMain], ['shared', cidB]]);

      s.release();
      await A.granted(aid);
      state = await stateOf(name);
      assert.deepEqual(state.held.map((i) => [i.mode, i.clientId]), [['exclusive', cidA]]);
      assert.deepEqual(state.pending.map((i) => [i.mode, i.clientId]), [['shared', cidMain], ['shared', cidB]]);
      assert.equal(B.isGranted(bid), false);

      A.release(aid);
      const [lock] = await Promise.all([mainShared.granted, B.granted(bid)]);
      assert.equal(lock.mode, 'shared');
      state = await stateOf(name);
      assert.deepEqual(state.held.map((i) => i.mode), ['shared', 'shared']);
      assert.deepEqual(state.pending, []);
      mainShared.release();
      B.release(bid);
      await Promise.all([mainShared.done, B.settled(bid), s.done, A.settled(aid)]);
    });

    it('a worker\'s ifAvailable request gets null while the main thread has requests queued', async function () {
      const name = uniq('t-ia-queue');
      const s = hold(name, { mode: 'shared' });
      await s.granted;
      const queued = hold(name);
      const agent = await spawnAgent();
      const id = await agent.request(name, { mode: 'shared', ifAvailable: true }, { hold: false });
      assert.equal((await agent.granted(id)).lock, null);
      assert.deepEqual((await stateOf(name)).pending.length, 1);
      s.release();
      await queued.granted;
      queued.release();
      await Promise.all([s.done, queued.done]);
    });
  });

  describe('steal', function () {
    it('the main thread steals from a worker: the worker\'s request() rejects with AbortError on the worker, and its callback goes on', async function () {
      const name = uniq('t-steal-1');
      const agent = await spawnAgent();
      const id = await agent.request(name);
      await agent.granted(id);
      const thief = hold(name, { steal: true });
      await thief.granted;
      const outcome = await agent.settled(id);
      assert.equal(outcome.type, 'rejected');
      assert.equal(outcome.error.name, 'AbortError');
      assert.equal(outcome.error.isDOMException, true);
      // The worker's callback is still waiting for 'release'; ending it does
      // not release the thief's lock.
      agent.release(id, 'ignored');
      await agent.query();
      const { held } = await stateOf(name);
      assert.deepEqual(held.map((i) => i.clientId), [await myClientId()]);
      thief.release();
      await thief.done;
    });

    it('a worker steals from the main thread: the main thread\'s request() rejects with AbortError', async function () {
      const name = uniq('t-steal-2');
      const victim = hold(name);
      await victim.granted;
      const agent = await spawnAgent();
      const queued = locks.request(name, () => 'queued main');
      const id = await agent.request(name, { steal: true });
      await agent.granted(id);
      await assert.rejects(victim.done, abortError);
      const state = await stateOf(name);
      assert.deepEqual(state.held.map((i) => i.clientId), [await agent.clientId()]);
      assert.equal(state.pending.length, 1);
      agent.release(id, 'thief');
      assert.equal(await queued, 'queued main');
      assert.deepEqual(await agent.settled(id), { type: 'resolved', id, value: 'thief' });
      victim.release();
    });

    it('a steal takes shared locks held by several threads', async function () {
      const name = uniq('t-steal-3');
      const a = await spawnAgent();
      const b = await spawnAgent();
      const ia = await a.request(name, { mode: 'shared' });
      const ib = await b.request(name, { mode: 'shared' });
      const m = hold(name, { mode: 'shared' });
      await Promise.all([a.granted(ia), b.granted(ib), m.granted]);
      const result = await locks.request(name, { steal: true }, async () => {
        const { held } = await stateOf(name);
        return held.length;
      });
      assert.equal(result, 1);
      const [oa, ob] = await Promise.all([a.settled(ia), b.settled(ib)]);
      assert.equal(oa.error.name, 'AbortError');
      assert.equal(ob.error.name, 'AbortError');
      await assert.rejects(m.done, abortError);
      a.release(ia);
      b.release(ib);
      m.release();
    });
  });

  describe('races between threads', function () {
    it('a steal right after another thread\'s request for a free name: that thread\'s callback still runs, and its request() rejects with AbortError', async function () {
      this.timeout(20000);
      for (let i = 0; i < 10; i++) {
        const name = uniq('t-race-steal');
        const agent = await spawnAgent();
        const id = await agent.request(name, {}, { hold: false, value: 'victim' });
        // The worker's request was granted (the name was free) before this
        // steal; its callback may or may not have run yet.
        assert.equal(await locks.request(name, { steal: true }, (l) => l.name), name);
        const outcome = await agent.settled(id);
        if (outcome.type === 'rejected') {
          assert.equal(outcome.error.name, 'AbortError');
        } else {
          // The worker's callback ran and released before the steal.
          assert.deepEqual(outcome, { type: 'resolved', id, value: 'victim' });
        }
        await agent.granted(id); // the callback ran in either case
        assert.deepEqual(await stateOf(name), { held: [], pending: [] });
        await agent.terminate();
      }
    });

    it('an abort racing another thread\'s release: either the callback runs and the request resolves, or it rejects and the callback never runs; the lock ends up free', async function () {
      this.timeout(20000);
      const agent = await spawnAgent();
      for (let i = 0; i < 20; i++) {
        const name = uniq('t-race-abort');
        const h = hold(name);
        await h.granted;
        const id = await agent.request(name, {}, { abortable: true, hold: false, value: 'ran' });
        // Release here and abort there at (about) the same time.
        h.release();
        agent.abort(id, 'raced');
        const outcome = await agent.settled(id);
        await agent.query(); // every message of the worker up to now has arrived
        if (outcome.type === 'resolved') {
          assert.equal(outcome.value, 'ran');
          assert.equal(agent.isGranted(id), true);
        } else {
          assert.deepEqual(outcome.error, { value: 'raced' });
          assert.equal(agent.isGranted(id), false, 'the callback ran although request() rejected');
        }
        await h.done;
        assert.equal(await locks.request(name, (l) => l.name), name, 'the lock is free again');
        assert.deepEqual(await stateOf(name), { held: [], pending: [] });
      }
    });
  });

  describe('abort from a worker', function () {
    it('a worker aborts its queued request: it rejects there with the reason and leaves the queue for every thread', async function () {
      const name = uniq('t-abort');
      const h = hold(name);
      await h.granted;
      const agent = await spawnAgent();
      const id = await agent.request(name, {}, { abortable: true });
      const after = locks.request(name, () => 'after');
      assert.equal((await stateOf(name)).pending.length, 2);
      agent.abort(id, 'worker reason');
      const outcome = await agent.settled(id);
      assert.deepEqual(outcome.error, { value: 'worker reason' });
      // The abort has reached the manager once the worker's next call has.
      await agent.query();
      assert.equal((await stateOf(name)).pending.length, 1);
      h.release();
      assert.equal(await after, 'after');
      assert.equal(agent.isGranted(id), false);
    });
  });

  describe('query() and clientId', function () {
    it('the main thread\'s query() shows a worker\'s held locks and pending requests with the worker\'s clientId', async function () {
      const a = uniq('t-q-a');
      const b = uniq('t-q-b');
      const hb = hold(b);
      await hb.granted;
      const agent = await spawnAgent();
      const ia = await agent.request(a, { mode: 'shared' });
      await agent.granted(ia);
      const ib = await agent.request(b);
      const cid = await agent.clientId();
      const main = await myClientId();
      assert.notEqual(cid, main);
      const { held, pending } = await stateOf([a, b]);
      assert.deepEqual(held.filter((i) => i.name === a), [{ name: a, mode: 'shared', clientId: cid }]);
      assert.deepEqual(held.filter((i) => i.name === b), [{ name: b, mode: 'exclusive', clientId: main }]);
      assert.deepEqual(pending, [{ name: b, mode: 'exclusive', clientId: cid }]);
      hb.release();
      await agent.granted(ib);
      agent.release(ia);
      agent.release(ib);
      await Promise.all([agent.settled(ia), agent.settled(ib), hb.done]);
    });

    it('a worker\'s query() shows the main thread\'s locks and requests, and other workers\'', async function () {
      const name = uniq('t-q-w');
      const h = hold(name);
      await h.granted;
      const other = await spawnAgent();
      const agent = await spawnAgent();
      const oid = await other.request(name, { mode: 'shared' });
      const queuedMain = locks.request(name, () => {});
      await requestsMade(locks);
      const snap = await agent.query();
      const main = await myClientId();
      const otherId = await other.clientId();
      assert.deepEqual(snap.held.filter((i) => i.name === name), [{ name, mode: 'exclusive', clientId: main }]);
      assert.deepEqual(snap.pending.filter((i) => i.name === name), [
        { name, mode: 'shared', clientId: otherId },
        { name, mode: 'exclusive', clientId: main },
      ]);
      h.release();
      await other.granted(oid);
      other.release(oid);
      await Promise.all([queuedMain, h.done]);
    });

    it('clientIds are strings, unique per thread, the same for all requests of a thread and stable for its life', async function () {
      const agents = [await spawnAgent(), await spawnAgent(), await spawnAgent()];
      const ids1 = [await myClientId(), ...(await Promise.all(agents.map((a) => a.clientId())))];
      for (const id of ids1) assert.equal(typeof id, 'string');
      assert.equal(new Set(ids1).size, 4, `not unique: ${JSON.stringify(ids1)}`);
      // Several requests of one worker share its id.
      const name = uniq('t-cid');
      const r1 = await agents[0].request(name, { mode: 'shared' });
      const r2 = await agents[0].request(name, { mode: 'shared' });
      await Promise.all([agents[0].granted(r1), agents[0].granted(r2)]);
      const { held } = await stateOf(name);
      assert.deepEqual(held.map((i) => i.clientId), [ids1[1], ids1[1]]);
      agents[0].release(r1);
      agents[0].release(r2);
      await Promise.all([agents[0].settled(r1), agents[0].settled(r2)]);
      const ids2 = [await myClientId(), ...(await Promise.all(agents.map((a) => a.clientId())))];
      assert.deepEqual(ids2, ids1);
    });

    // The addon reuses the clientId string of an entry for later entries of
    // the same agent (a few at a time): entries of more agents than it
    // keeps, in turn, must each still name their own.
    it('entries of six threads in turn, held and pending, each carry their own thread\'s clientId', async function () {
      const agents = [];
      for (let i = 0; i < 6; i++) agents.push(await spawnAgent());
      const ids = await Promise.all(agents.map((a) => a.clientId()));
      const names = [uniq('t-cid6-a'), uniq('t-cid6-b')];
      const holds = names.map((name) => hold(name, { mode: 'shared' }));
      await Promise.all(holds.map((h) => h.granted));
      // Each name: a shared lock of each agent (held beside the main
      // thread's), then an exclusive request of each (queued), in turn.
      for (const name of names) {
        for (const agent of agents) {
          const id = await agent.request(name, { mode: 'shared' });
          await agent.granted(id);
        }
        for (const agent of agents) await agent.request(name);
      }
      const main = await myClientId();
      const { held, pending } = await stateOf(names);
      for (const name of names) {
        assert.deepEqual(held.filter((i) => i.name === name).map((i) => i.clientId), [main, ...ids]);
        assert.deepEqual(pending.filter((i) => i.name === name).map((i) => i.clientId), ids);
      }
      // Ending the threads ends their locks and requests (spec 2.6).
      await Promise.all(agents.map((a) => a.terminate()));
      for (const h of holds) h.release();
      await Promise.all(holds.map((h) => h.done));
    });

    it('a new worker does not reuse the clientId of a worker that has ended', async function () {
      const a = await spawnAgent();
      const first = await a.clientId();
      await a.terminate();
      const seen = new Set([first, await myClientId()]);
      for (let i = 0; i < 3; i++) {
        const b = await spawnAgent();
        const id = await b.clientId();
        assert.ok(!seen.has(id), `clientId ${id} reused`);
        seen.add(id);
        await b.terminate();
      }
    });
  });

  it('many workers contend for one name and each gets it once, one at a time', async function () {
    // Agents share memory with this thread: workers only.
    if (PROCESS_MODE) this.skip();
    this.timeout(20000);
    const name = uniq('t-contend');
    const sab = new SharedArrayBuffer(8);
    const state = new Int32Array(sab);
    const code = `
      const s = new Int32Array(workerData.sab);
      locks.request(workerData.name, async () => {
        if (Atomics.add(s, 0, 1) !== 0) s[1] = 1; // someone else is inside
        await new Promise((r) => setImmediate(r));
        Atomics.sub(s, 0, 1);
      }).then(() => parentPort.postMessage('done'));
      parentPort.postMessage('requested');
    `;
    const h = hold(name);
    await h.granted;
    const ws = [];
    for (let i = 0; i < 8; i++) ws.push(spawnScript(code, { sab, name }));
    await Promise.all(ws.map((w) => w.message((m) => m === 'requested')));
    assert.equal((await stateOf(name)).pending.length, 8);
    h.release();
    await Promise.all(ws.map((w) => w.message((m) => m === 'done')));
    assert.equal(state[1], 0, 'two holders were inside at once');
    assert.equal(state[0], 0);
    await h.done;
  });
});
