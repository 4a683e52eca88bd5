'use strict';
// locks.acquire(name, [options]) (not in the spec): request() without a
// callback, as proposed in w3c/web-locks#122. It resolves with a
// ReleasableLock (or null for an ifAvailable miss) that holds the lock until
// its release() or [Symbol.asyncDispose]() (the end of an `await using`
// block). Everything else is request()'s: validation and its errors, queue,
// modes, signal, steal, tokens, query(), diagnostics. On each of the three
// managers.
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const diagnostics = require('node:diagnostics_channel');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { api, holdOn, only, rejects, isDOMException, scopeName, trackUnhandled, uniq, HAS_AWAIT_USING } = require('./fixtures/util');
const { postgres } = require('./fixtures/postgres');
const { spawnScript, terminateAll } = require('./fixtures/agent');

// `await using` where the running Node has it (24+). The blocks that use it
// are in a fixture loaded only there: this file must parse on Node 18 to 22.
const using = HAS_AWAIT_USING ? require('./fixtures/using') : null;
const NO_USING = HAS_AWAIT_USING ? '' : ` [skipped: Node ${process.version} has no \`await using\`]`;

const abortError = isDOMException('AbortError');

const MANAGERS = [
  ['the process-wide manager', null],
  ['a machine-wide scope', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-acquire-'));
    const scope = scopeName('acquire');
    const locks = await api().openLockManager(scope, { dir });
    return { locks, child: { scope, options: { dir } }, close: async () => { await locks.close(); fs.rmSync(dir, { recursive: true, force: true }); } };
  }],
  ['a PostgreSQL scope', async () => {
    const { url } = await postgres();
    const scope = scopeName('acquire');
    const locks = await api().openLockManager(scope, { postgres: url });
    return { locks, child: { scope, options: { postgres: url } }, close: () => locks.close() };
  }],
];

function processWide() {
  return { locks: api().locks, child: {}, close: async () => {} };
}

// Runs test/fixtures/unreleased.js with --expose-gc; resolves what it printed.
function runUnreleased(child) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--expose-gc', path.join(__dirname, 'fixtures', 'unreleased.js')], {
      env: Object.assign({}, process.env, { WEB_LOCKS_UNRELEASED: JSON.stringify(child) }),
      timeout: 30000,
    }, (error, stdout, stderr) => {
      if (error) reject(new Error(`unreleased.js failed: ${error.message}\n${stderr}`));
      else resolve(JSON.parse(stdout));
    });
  });
}

// The events of the channels locks.request.start, .grant, .miss and .end
// until stop(), as [channel, payload].
function recordChannels() {
  const seen = [];
  const subscribers = ['start', 'grant', 'miss', 'end'].map((what) => {
    const channel = diagnostics.channel(`locks.request.${what}`);
    const subscriber = (payload) => seen.push([what, payload]);
    channel.subscribe(subscriber);
    return () => channel.unsubscribe(subscriber);
  });
  return { seen, stop: () => subscribers.forEach((unsubscribe) => unsubscribe()) };
}

for (const [title, open] of MANAGERS) {
  describe(`locks.acquire(), on ${title}`, function () {
    this.timeout(20000);
    let manager;
    let locks;
    let ReleasableLock;
    let Lock;

    before(async function () {
      // The machine-wide manager exists on Linux; the PostgreSQL one is not
      // tested under Bun (see the README's platform table).
      if (title === 'a machine-wide scope' && process.platform !== 'linux') this.skip();
      if (title === 'a PostgreSQL scope' && process.versions.bun) this.skip();
      manager = open === null ? processWide() : await open();
      ({ locks } = manager);
      ({ ReleasableLock, Lock } = api());
    });
    after(async function () {
      if (manager !== undefined) await manager.close();
    });

    it('resolves with a ReleasableLock, a Lock with name, mode and token, held until release()', async function () {
      const name = uniq('acq');
      const other = holdOn(locks, uniq('acq-other'));
      const otherLock = await other.granted;
      const lock = await locks.acquire(name);
      assert.ok(lock instanceof ReleasableLock);
      assert.ok(lock instanceof Lock);
      assert.equal(lock.name, name);
      assert.equal(lock.mode, 'exclusive');
      assert.equal(typeof lock.token, 'bigint');
      assert.ok(lock.token > otherLock.token, 'a later grant, a greater token');

      // Held by this thread's agent, as a callback's lock is; a request
      // waits behind it.
      const waiter = holdOn(locks, name);
      const snapshot = await locks.query();
      const { clientId } = only(snapshot, otherLock.name).held[0];
      assert.deepEqual(only(snapshot, name), { held: [{ name, mode: 'exclusive', clientId }], pending: [{ name, mode: 'exclusive', clientId }] });

      const released = lock.release();
      assert.ok(released instanceof Promise);
      assert.equal(lock.release(), released, 'release() again: the same promise');
      assert.equal(lock[Symbol.asyncDispose](), released, 'disposal after release(): the same promise');
      assert.equal(await released, undefined);
      const next = await waiter.granted;
      assert.ok(next.token > lock.token);
      waiter.release();
      other.release();
      await Promise.all([waiter.done, other.done]);
      assert.deepEqual(only(await locks.query(), name), { held: [], pending: [] });
    });

    it('[Symbol.asyncDispose]() releases as release() does, and release() then gives the same promise', async function () {
      const name = uniq('acq-dispose');
      const lock = await locks.acquire(name);
      const disposed = lock[Symbol.asyncDispose]();
      assert.equal(lock.release(), disposed);
      assert.equal(await disposed, undefined);
      assert.deepEqual(only(await locks.query(), name), { held: [], pending: [] });
    });

    it('release() resolves once the lock is free: the manager then shows it free, and the next acquire() gets it', async function () {
      const name = uniq('acq-seq');
      const tokens = [];
      for (let i = 0; i < 5; i++) {
        const lock = await locks.acquire(name);
        tokens.push(lock.token);
        await lock.release();
        assert.deepEqual(only(await locks.query(), name), { held: [], pending: [] });
      }
      for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1]);
    });

    it('waits in the queue: grants in request order, acquire() and request() alike', async function () {
      const name = uniq('acq-fifo');
      const first = await locks.acquire(name);
      const order = [];
      const second = locks.acquire(name).then((lock) => { order.push('acquire'); return lock; });
      const third = locks.request(name, () => { order.push('request'); });
      assert.equal(only(await locks.query(), name).pending.length, 2);
      await first.release();
      const lock = await second;
      assert.deepEqual(order, ['acquire']);
      await lock.release();
      await third;
      assert.deepEqual(order, ['acquire', 'request']);
    });

    it('ifAvailable: null when the lock is held, with nothing queued; the lock when it is free', async function () {
      const name = uniq('acq-if');
      const holder = holdOn(locks, name);
      await holder.granted;
      assert.equal(await locks.acquire(name, { ifAvailable: true }), null);
      assert.deepEqual(only(await locks.query(), name).pending, []);
      holder.release();
      await holder.done;
      const lock = await locks.acquire(name, { ifAvailable: true });
      assert.ok(lock instanceof ReleasableLock);
      await lock.release();
    });

    it("mode 'shared': shared locks are held together, an exclusive one waits for both", async function () {
      const name = uniq('acq-shared');
      const a = await locks.acquire(name, { mode: 'shared' });
      const b = await locks.acquire(name, { mode: 'shared' });
      assert.equal(a.mode, 'shared');
      assert.equal(b.mode, 'shared');
      let granted = false;
      const exclusive = locks.acquire(name).then((lock) => { granted = true; return lock; });
      assert.deepEqual(only(await locks.query(), name).held.map((info) => info.mode), ['shared', 'shared']);
      await a.release();
      await locks.query();
      assert.equal(granted, false);
      await b.release();
      const lock = await exclusive;
      assert.equal(lock.mode, 'exclusive');
      await lock.release();
    });

    it("signal: an abort while waiting rejects with the signal's reason and leaves the queue; an aborted signal rejects at once", async function () {
      const name = uniq('acq-signal');
      const holder = await locks.acquire(name);
      const controller = new AbortController();
      const waiting = locks.acquire(name, { signal: controller.signal });
      assert.equal(only(await locks.query(), name).pending.length, 1);
      const reason = new Error('gave up');
      controller.abort(reason);
      await assert.rejects(waiting, (error) => error === reason);
      assert.deepEqual(only(await locks.query(), name).pending, []);
      await rejects(() => locks.acquire(name, { signal: AbortSignal.abort() }), abortError);
      assert.deepEqual(only(await locks.query(), name).pending, []);
      await holder.release();
      // Aborted after the grant: the lock stays (as a callback's would).
      const after = new AbortController();
      const lock = await locks.acquire(name, { signal: after.signal });
      after.abort();
      assert.equal(only(await locks.query(), name).held.length, 1);
      await lock.release();
    });

    it('steal: acquire() takes a lock from its holder, whose promise rejects with an AbortError', async function () {
      const name = uniq('acq-steal');
      const holder = holdOn(locks, name);
      const robbed = await holder.granted;
      const thief = await locks.acquire(name, { steal: true });
      await assert.rejects(holder.done, abortError);
      assert.ok(thief.token > robbed.token);
      assert.equal(only(await locks.query(), name).held.length, 1);
      await thief.release();
      assert.deepEqual(only(await locks.query(), name), { held: [], pending: [] });
    });

    it("a stolen lock: its release() rejects with the AbortError request() would, and the thief's lock is left alone", async function () {
      const name = uniq('acq-stolen');
      const lock = await locks.acquire(name);
      const thief = holdOn(locks, name, { steal: true });
      await thief.granted;
      await assert.rejects(lock.release(), abortError);
      await assert.rejects(lock[Symbol.asyncDispose](), abortError);
      assert.equal(only(await locks.query(), name).held.length, 1, "the thief's lock is still held");
      thief.release();
      await thief.done;
    });

    it('a lock stolen before acquire() resolved still resolves (as a callback still runs); its release() rejects with an AbortError', async function () {
      const name = uniq('acq-robbed');
      const first = await locks.acquire(name);
      const pending = locks.acquire(name);
      await first.release();
      await locks.request(name, { steal: true }, () => {});
      const lock = await pending;
      assert.ok(lock instanceof ReleasableLock);
      await assert.rejects(lock.release(), abortError);
      assert.deepEqual(only(await locks.query(), name), { held: [], pending: [] });
    });

    it('an unhandled failure of release() is reported; one never asked for is not', async function () {
      const tracker = trackUnhandled();
      const name = uniq('acq-unhandled');
      const ignored = await locks.acquire(name);
      await locks.request(name, { steal: true }, () => {});
      const unasked = await locks.acquire(name);
      await locks.request(name, { steal: true }, () => {});
      ignored.release();
      // (mocha hands a rejection it hears of on to the other listeners: the
      // same error may be seen twice.)
      const seen = new Set(await tracker.stop());
      assert.equal(seen.size, 1, 'one error: that of the release() nobody awaited');
      assert.ok(abortError([...seen][0]));
      assert.ok(unasked instanceof ReleasableLock);
    });

    it('invalid calls reject with the errors request() gives, and leave nothing in the manager', async function () {
      const name = uniq('acq-bad');
      await rejects(() => locks.acquire(), TypeError);
      await rejects(() => locks.acquire(Symbol('s')), TypeError);
      const boom = new Error('toString');
      await rejects(() => locks.acquire({ toString() { throw boom; } }), (error) => error === boom);
      await rejects(() => locks.acquire(name, 5), TypeError);
      await rejects(() => locks.acquire(name, 'exclusive'), TypeError);
      await rejects(() => locks.acquire(name, { mode: 'read' }), TypeError);
      await rejects(() => locks.acquire(name, { signal: {} }), TypeError);
      await rejects(() => locks.acquire(name, async () => {}), TypeError);
      await rejects(() => locks.acquire('-reserved'), isDOMException('NotSupportedError'));
      await rejects(() => locks.acquire(name, { steal: true, ifAvailable: true }), isDOMException('NotSupportedError'));
      await rejects(() => locks.acquire(name, { steal: true, mode: 'shared' }), isDOMException('NotSupportedError'));
      await rejects(() => locks.acquire(name, { steal: true, signal: new AbortController().signal }), isDOMException('NotSupportedError'));
      await rejects(() => locks.acquire(name, { ifAvailable: true, signal: new AbortController().signal }), isDOMException('NotSupportedError'));
      await rejects(() => locks.acquire.call({}, name), TypeError);
      const lock = await locks.acquire(name);
      await rejects(() => lock.release.call({}), TypeError);
      await rejects(() => lock[Symbol.asyncDispose].call(locks), TypeError);
      await lock.release();
      assert.deepEqual(only(await locks.query(), name), { held: [], pending: [] });
    });

    it("publishes the diagnostics a request does: start, then grant, and end at release()", async function () {
      const name = uniq('acq-diag');
      const recorder = recordChannels();
      try {
        const lock = await locks.acquire(name);
        const mine = () => recorder.seen.filter(([, payload]) => payload.name === name);
        assert.deepEqual(mine().map(([what]) => what), ['start', 'grant']);
        await lock.release();
        assert.deepEqual(mine().map(([what]) => what), ['start', 'grant', 'end']);
        assert.equal(mine()[2][1].error, undefined);
        const holder = await locks.acquire(name);
        assert.equal(await locks.acquire(name, { ifAvailable: true }), null);
        await holder.release();
        assert.deepEqual(mine().map(([what]) => what), ['start', 'grant', 'end', 'start', 'grant', 'start', 'miss', 'end', 'end']);
      } finally {
        recorder.stop();
      }
    });

    it('a lock never released stays held, and a warning says so once its object is collected (not for a released or a stolen one)', async function () {
      this.timeout(60000);
      const { warnings, held } = await runUnreleased(manager.child);
      assert.deepEqual(held, ['dropped', 'kept'], 'the dropped lock is held still; the released and the stolen ones are not');
      assert.equal(warnings.length, 1, JSON.stringify(warnings));
      assert.equal(warnings[0].code, 'WEB_LOCKS_UNRELEASED');
      assert.match(warnings[0].message, /^The lock 'dropped' that acquire\(\) gave was garbage-collected while held/);
    });

    if (open !== null) {
      it('closing the manager releases an acquired lock (its release() rejects with an AbortError) and rejects a waiting acquire(); acquire() then rejects with an InvalidStateError', async function () {
        const other = await open();
        try {
          const name = uniq('acq-close');
          const lock = await other.locks.acquire(name);
          const waiting = other.locks.acquire(name);
          waiting.catch(() => {});
          await other.locks.close();
          await assert.rejects(waiting, abortError);
          await assert.rejects(lock.release(), abortError);
          await rejects(() => other.locks.acquire(name), isDOMException('InvalidStateError'));
        } finally {
          await other.close();
        }
      });
    }

    it(`await using: the block holds the lock and releases it as it ends, before the code after it runs${NO_USING}`, async function () {
      if (using === null) this.skip();
      const name = uniq('acq-using');
      const inside = await using.withLock(locks, name, undefined, async (lock) => {
        assert.ok(lock instanceof ReleasableLock);
        return only(await locks.query(), name).held.length;
      });
      assert.equal(inside, 1);
      assert.deepEqual(only(await locks.query(), name), { held: [], pending: [] });
    });

    it(`await using: a block that throws releases the lock, and its error propagates${NO_USING}`, async function () {
      if (using === null) this.skip();
      const name = uniq('acq-using-throw');
      const boom = new Error('boom');
      await assert.rejects(using.withLock(locks, name, { mode: 'shared' }, async () => { throw boom; }), (error) => error === boom);
      assert.deepEqual(only(await locks.query(), name), { held: [], pending: [] });
    });

    it(`await using: a block whose lock was stolen ends with the AbortError (a SuppressedError if it threw too)${NO_USING}`, async function () {
      if (using === null) this.skip();
      const name = uniq('acq-using-stolen');
      const steal = () => locks.request(name, { steal: true }, () => {});
      await assert.rejects(using.withLock(locks, name, undefined, steal), abortError);
      const boom = new Error('boom');
      await assert.rejects(using.withLock(locks, name, undefined, async () => { await steal(); throw boom; }), (error) => {
        return error instanceof SuppressedError && abortError(error.error) && error.suppressed === boom;
      });
      assert.deepEqual(only(await locks.query(), name), { held: [], pending: [] });
    });

    it(`await using: null (an ifAvailable miss) is allowed, and breaking out of a loop releases the lock${NO_USING}`, async function () {
      if (using === null) this.skip();
      const busy = uniq('acq-using-busy');
      const free = uniq('acq-using-free');
      const holder = await locks.acquire(busy);
      assert.equal(await using.firstFree(locks, [busy, free, uniq('acq-using-never')]), free);
      assert.deepEqual(only(await locks.query(), free), { held: [], pending: [] });
      assert.equal(only(await locks.query(), busy).held.length, 1);
      await holder.release();
    });
  });
}

describe('acquire() near the stack limit', function () {
  this.timeout(60000);

  it('either fails (throwing or rejecting) with nothing left in the manager, or gives a lock: none lost, no unhandled rejection, no warning', async function () {
    // Fills the stack, then calls acquire() at every third depth on the way
    // back, the deepest first; the padding shifts where it overflows.
    const script = `
      const { locks } = require(${JSON.stringify(require('./fixtures/util').PKG)});
      const problems = [];
      process.on('uncaughtException', (e) => problems.push('uncaught: ' + e.stack));
      process.on('unhandledRejection', (e) => problems.push('unhandled: ' + (e && e.stack)));
      process.on('warning', (w) => problems.push('warning: ' + w.message));
      const controller = new AbortController();
      const variants = [
        (i) => ['deep'],
        (i) => ['deep', { mode: 'shared' }],
        (i) => ['deep', { signal: controller.signal }],
        (i) => ['deep', { ifAvailable: true }],
        (i) => ['deep-steal-' + i, { steal: true }],
      ];
      const promises = [];
      let thrown = 0;
      function attempt(variant) {
        const i = promises.length;
        promises[i] = null;
        try {
          promises[i] = locks.acquire(...variants[variant](i));
        } catch {
          thrown++;
        }
      }
      function recurse(depth, variant, a, b, c, d) {
        try { recurse(depth + 1, variant, a + 1, b, c, d); } catch {}
        if (depth % 3 === 0) attempt(variant);
      }
      (async () => {
        let granted = 0;
        for (let round = 0; round < 30; round++) {
          const from = promises.length;
          recurse(0, round % variants.length, round, 0, 0, 0);
          // Each lock is released as it comes, so that the next is granted.
          const outcomes = promises.slice(from).map((p) => p === null ? 'threw' : p.then(async (lock) => {
            if (lock === null) return 'missed';
            granted++;
            await lock.release();
            return 'granted';
          }, () => 'rejected'));
          const all = Promise.all(outcomes);
          const timedOut = await Promise.race([all.then(() => false), new Promise((r) => setTimeout(() => r(true), 10000))]);
          if (timedOut) { problems.push('round ' + round + ': an acquire() never settled'); break; }
        }
        for (let i = 0; i < 5; i++) {
          globalThis.gc();
          await new Promise((r) => setImmediate(r));
        }
        const { held, pending } = await locks.query();
        console.log(JSON.stringify({ attempts: promises.length, thrown, granted, held: held.length, pending: pending.length, problems: problems.slice(0, 5) }));
      })();
    `;
    const seen = await new Promise((resolve, reject) => {
      execFile(process.execPath, ['--expose-gc', '-e', script], { timeout: 50000, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
        if (error) reject(new Error(`child failed: ${error.message}\n${stderr}`));
        else resolve(JSON.parse(stdout.trim().split('\n').pop()));
      });
    });
    assert.deepEqual(seen.problems, []);
    assert.equal(seen.held, 0, 'no lock left held');
    assert.equal(seen.pending, 0, 'no request left queued');
    assert.ok(seen.attempts > 1000, `made ${seen.attempts} attempts`);
    assert.ok(seen.granted > 0, 'some acquire() calls near the limit went through');
  });
});

describe('acquire() in a thread that ends', function () {
  this.timeout(20000);
  afterEach(terminateAll);

  it('a lock the thread acquired and never released is released as the thread ends, and goes to the next in line', async function () {
    const name = uniq('acq-thread');
    // The worker holds the lock until told to end, and ends without
    // releasing it.
    const w = spawnScript(`
      (async () => {
        globalThis.lock = await locks.acquire(workerData.name);
        parentPort.once('message', () => parentPort.close());
        parentPort.postMessage('acquired');
      })();
    `, { name });
    await w.message((m) => m === 'acquired');
    const { locks } = api();
    assert.equal(only(await locks.query(), name).held.length, 1);
    const next = locks.acquire(name);
    w.post('end');
    await w.exited;
    const lock = await next;
    await lock.release();
  });
});

describe('ReleasableLock and LockManager.prototype.acquire', function () {
  let locks;
  let LockManager;
  let Lock;
  let ReleasableLock;
  before(function () {
    ({ locks, LockManager, Lock, ReleasableLock } = api());
  });

  it('ReleasableLock is exported, extends Lock, and cannot be constructed', function () {
    assert.equal(typeof ReleasableLock, 'function');
    assert.equal(Object.getPrototypeOf(ReleasableLock), Lock);
    assert.equal(Object.getPrototypeOf(ReleasableLock.prototype), Lock.prototype);
    assert.throws(() => new ReleasableLock(), TypeError);
    assert.throws(() => ReleasableLock(), TypeError);
    assert.equal(ReleasableLock.length, 0);
  });

  it('release is an enumerable method of its prototype, [Symbol.asyncDispose] a method; the tag is ReleasableLock', async function () {
    assert.deepEqual(Object.keys(ReleasableLock.prototype), ['release']);
    assert.equal(typeof ReleasableLock.prototype.release, 'function');
    assert.equal(typeof ReleasableLock.prototype[Symbol.asyncDispose], 'function');
    const lock = await locks.acquire(uniq('acq-class'));
    assert.equal(Object.prototype.toString.call(lock), '[object ReleasableLock]');
    assert.deepEqual(Object.keys(lock), []);
    await lock.release();
  });

  it('acquire is an enumerable method of LockManager.prototype, of length 1 (the name)', function () {
    const descriptor = Object.getOwnPropertyDescriptor(LockManager.prototype, 'acquire');
    assert.equal(typeof descriptor.value, 'function');
    assert.equal(descriptor.enumerable, true);
    assert.equal(LockManager.prototype.acquire.length, 1);
    assert.deepEqual(Object.keys(LockManager.prototype), ['request', 'acquire', 'query', 'close']);
  });
});
