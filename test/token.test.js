'use strict';
// lock.token (not in the spec): each grant's fencing token, a BigInt that
// the lock manager gives in grant order, greater than every token it gave
// before, whatever the name or thread. The machine-wide manager's tokens
// across processes are tested in machine.test.js.
const assert = require('node:assert/strict');
const { api, uniq, hold, deferred } = require('./fixtures/util');
const { spawnScript, terminateAll } = require('./fixtures/agent');

function abortError(err) {
  return err instanceof DOMException && err.name === 'AbortError';
}

// Asserts that tokens is strictly increasing.
function assertIncreasing(tokens, what) {
  for (let i = 1; i < tokens.length; i++) {
    assert.ok(tokens[i] > tokens[i - 1], `${what}: token ${tokens[i]} after ${tokens[i - 1]} (at ${i})`);
  }
}

describe('lock.token', function () {
  let locks;
  let Lock;
  before(function () {
    ({ locks, Lock } = api());
  });
  afterEach(terminateAll);

  it('is a positive BigInt, the same on every read, from an enumerable getter on Lock.prototype', async function () {
    const lock = await locks.request(uniq('tok'), (l) => l);
    assert.equal(typeof lock.token, 'bigint');
    assert.ok(lock.token > 0n);
    assert.equal(lock.token, lock.token);
    assert.equal(Object.prototype.hasOwnProperty.call(lock, 'token'), false);
    const desc = Object.getOwnPropertyDescriptor(Lock.prototype, 'token');
    assert.equal(typeof desc.get, 'function');
    assert.equal(desc.set, undefined);
    assert.equal(desc.enumerable, true);
    assert.deepEqual(Object.keys(Lock.prototype), ['name', 'mode', 'token']);
    assert.throws(() => desc.get.call({}), TypeError);
    assert.throws(() => { lock.token = 0n; }, TypeError);
  });

  it('increases strictly across sequential grants, of one name and of others', async function () {
    const names = [uniq('tok-a'), uniq('tok-b'), uniq('tok-c')];
    const tokens = [];
    for (let i = 0; i < 60; i++) {
      tokens.push(await locks.request(names[i % 3], i % 2 ? { mode: 'shared' } : {}, (l) => l.token));
    }
    assertIncreasing(tokens, 'sequential grants');
  });

  it('gives waiters tokens in grant order, and shared holders granted together distinct ones', async function () {
    const name = uniq('tok-queue');
    const h = hold(name);
    const first = (await h.granted).token;
    const order = [];
    const record = (what) => (l) => { order.push([what, l.token]); };
    const waiting = [
      locks.request(name, { mode: 'shared' }, record('s1')),
      locks.request(name, { mode: 'shared' }, record('s2')),
      locks.request(name, { mode: 'shared' }, record('s3')),
      locks.request(name, record('e')),
    ];
    h.release();
    await Promise.all(waiting);
    assert.deepEqual(order.map(([what]) => what), ['s1', 's2', 's3', 'e']);
    assertIncreasing([first, ...order.map(([, token]) => token)], 'grant order');
  });

  it('gives a thief a greater token than the holder it robbed, even one robbed before its callback ran', async function () {
    const name = uniq('tok-steal');
    const h = hold(name);
    const held = (await h.granted).token;
    const thief = await locks.request(name, { steal: true }, (l) => l.token);
    assert.ok(thief > held, `thief ${thief}, holder ${held}`);
    await assert.rejects(h.done, abortError);

    // w is granted by h2's release, and robbed before its grant reaches
    // this thread: its callback still runs, with the smaller token.
    const h2 = hold(name);
    await h2.granted;
    const w = deferred();
    const robbed = assert.rejects(locks.request(name, (l) => { w.resolve(l.token); }), abortError);
    h2.release();
    await h2.done;
    const second = await locks.request(name, { steal: true }, (l) => l.token);
    await robbed;
    const token = await w.promise;
    assert.ok(token > thief && second > token, `thief ${thief}, then robbed ${token}, then thief ${second}`);
  });

  it('an ifAvailable request that misses gets null; one that is granted, a token', async function () {
    const name = uniq('tok-if');
    const h = hold(name);
    const held = (await h.granted).token;
    assert.equal(await locks.request(name, { ifAvailable: true }, (l) => l), null);
    h.release();
    await h.done;
    const token = await locks.request(name, { ifAvailable: true }, (l) => l.token);
    assert.ok(token > held);
  });

  it('is one counter for every thread of the process: tokens increase in the order grants are made', async function () {
    this.timeout(20000);
    const ROUNDS = 200;
    const name = uniq('tok-threads');
    const sab = new SharedArrayBuffer(4);
    const ticket = new Int32Array(sab);
    // Each grant of the exclusive lock takes a ticket while it holds the
    // lock: tickets are in grant order, whichever thread holds it.
    const code = `
      const ticket = new Int32Array(workerData.sab);
      const seen = [];
      (async () => {
        for (let i = 0; i < workerData.rounds; i++) {
          await locks.request(workerData.name, (lock) => {
            seen.push([Atomics.add(ticket, 0, 1), lock.token]);
          });
          await locks.request(workerData.own, (lock) => { seen.push([-1, lock.token]); });
        }
        parentPort.postMessage({ seen });
      })();
    `;
    const workers = [0, 1, 2].map((i) => spawnScript(code, { sab, name, own: uniq(`tok-own${i}`), rounds: ROUNDS }));
    const mine = [];
    for (let i = 0; i < ROUNDS; i++) {
      await locks.request(name, (lock) => { mine.push([Atomics.add(ticket, 0, 1), lock.token]); });
    }
    const all = [mine];
    for (const w of workers) all.push((await w.message((m) => m && m.seen)).seen);
    for (const [i, seen] of all.entries()) {
      assert.equal(typeof seen[0][1], 'bigint');
      assertIncreasing(seen.map(([, token]) => token), `thread ${i}`);
    }
    const shared = all.flat().filter(([t]) => t >= 0).sort((a, b) => a[0] - b[0]);
    assert.deepEqual(shared.map(([t]) => t), [...Array(ROUNDS * 4).keys()]);
    assertIncreasing(shared.map(([, token]) => token), 'grants in ticket order');
    const every = all.flat().map(([, token]) => token);
    assert.equal(new Set(every).size, every.length, 'every token is unique');
  });
});
