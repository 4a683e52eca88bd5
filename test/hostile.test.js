'use strict';
// The package under hostile conditions: polluted or replaced builtins, DOM
// globals installed first, stack exhaustion, user code that runs inside
// request(), thread termination, module reloads, huge names and hostile
// values seen by monitorContention(). Each must end with every promise
// settled once, no lock lost or held forever, and no crash.
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const diagnostics = require('node:diagnostics_channel');
const path = require('node:path');
const { api, uniq, hold, stateOf, nextTask } = require('./fixtures/util');
const { spawnScript, terminateAll } = require('./fixtures/agent');

const CHILD = path.join(__dirname, 'fixtures', 'hostile-child.js');

// Runs node with `args`; resolves { code, signal, stdout, stderr }.
function runNode(args, { timeout = 20000, execArgv = [] } = {}) {
  return new Promise((resolve) => {
    execFile(process.execPath, [...execArgv, ...args], { timeout, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      resolve({ code: error ? error.code : 0, signal: error ? error.signal : null, stdout, stderr });
    });
  });
}

// Script source: holds x until release(); `holder` settles with it.
const HOLD_X = `let release;
          const gate = new Promise((r) => { release = r; });
          let granted;
          const grantedP = new Promise((r) => { granted = r; });
          const holder = settle(locks.request('x', () => { granted(); return gate; }));
          await grantedP;`;

// Runs a script given as source in a fresh node; its last stdout line is
// JSON. Fails with the child's output if it did not exit 0.
async function runScript(source, options) {
  const script = `const PKG = ${JSON.stringify(require('./fixtures/util').PKG)};\n${source}`;
  const r = await runNode(['-e', script], options);
  assert.equal(r.code, 0, `child exited ${r.code} (${r.signal})\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
  const lines = r.stdout.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]);
}

describe('hostile environment', function () {
  this.timeout(30000);
  afterEach(terminateAll);

  describe('builtins polluted or replaced by other code (a fresh process each)', function () {
    const scenarios = [
      'Object.prototype.then swallows (after load)',
      'Object.prototype.then swallows (before load)',
      'Object.prototype.then throws',
      "Object.prototype setters for the shim's field names",
      'DOMException deleted',
      'DOMException and AbortSignal replaced before load',
      'Promise replaced',
      'Promise.prototype.then and Promise.resolve/reject replaced',
      'queueMicrotask deleted',
      'Array.prototype methods and iterator replaced',
      'Map, Set, WeakMap and WeakSet methods replaced',
      'Function.prototype.call, apply and bind, and Reflect.apply replaced',
      'AbortSignal.prototype getters lie',
      'String.prototype.charCodeAt replaced',
      'TypeError replaced',
    ];
    let baseline;

    before(async function () {
      const r = await runNode([CHILD, 'none']);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      baseline = JSON.parse(r.stdout);
      // The workload sees what the spec says, so the comparison below means
      // something.
      assert.deepEqual(baseline.handoff, ['ok:one', 'ok:2', 'ok:3', '123']);
      assert.deepEqual(baseline.abort, ['rejected:Error:stop', false]);
      assert.match(baseline.steal[0], /^rejected:AbortError:/);
      assert.equal(baseline.thrown, 'rejected:Error:boom');
      assert.match(baseline.invalid[0], /^rejected:NotSupportedError:/);
      assert.match(baseline.invalid[1], /^rejected:TypeError:/);
      assert.equal(baseline.left, 0);
    });

    for (const scenario of scenarios) {
      it(`${scenario}: every request behaves as without it, nothing is left held or queued`, async function () {
        const r = await runNode([CHILD, scenario]);
        assert.equal(r.code, 0, `exit ${r.code} (${r.signal})\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
        assert.notEqual(r.stdout.trim(), '', 'the workload finished (no promise left unsettled)');
        assert.deepEqual(JSON.parse(r.stdout), baseline);
      });
    }
  });

  describe("happy-dom's AbortSignal and AbortController installed as globals before the package loads", function () {
    it("accepts its signals (whose getters are on a base class and check no brand), aborts with their reason, and refuses an object made from its prototype", async function () {
      if (Number(process.versions.node.split('.')[0]) < 20) {
        this.test.title += ' (pending: happy-dom needs Node 20 or later)';
        this.skip();
      }
      const seen = await runScript(`
        const settle = (p) => p.then((v) => 'ok:' + v, (e) => 'rejected:' + (e && e.name) + ':' + (e && e.message));
        (async () => {
          // An ES module only.
          const { Window } = await import('happy-dom');
          const window = new Window();
          globalThis.AbortSignal = window.AbortSignal;
          globalThis.AbortController = window.AbortController;
          const { locks } = require(PKG);
          const out = {};
          ${HOLD_X}
          const c = new window.AbortController();
          const queued = settle(locks.request('x', { signal: c.signal }, () => 'ran'));
          c.abort(new Error('happy reason'));
          out.aborted = await queued;
          const done = new window.AbortController();
          done.abort(new Error('already'));
          out.already = await settle(locks.request('x', { signal: done.signal }, () => 'ran'));
          out.fake = await settle(locks.request('x', { signal: Object.create(window.AbortSignal.prototype) }, () => 'ran'));
          const free = new window.AbortController();
          release();
          out.holder = await holder;
          out.granted = await settle(locks.request('x', { signal: free.signal }, () => 'granted'));
          const { held, pending } = await locks.query();
          out.left = held.length + pending.length;
          await window.happyDOM.close();
          console.log(JSON.stringify(out));
        })();
      `);
      assert.deepEqual(seen.aborted, 'rejected:Error:happy reason');
      assert.deepEqual(seen.already, 'rejected:Error:already');
      assert.match(seen.fake, /^rejected:TypeError:.*AbortSignal/);
      assert.equal(seen.holder, 'ok:undefined');
      assert.equal(seen.granted, 'ok:granted');
      assert.equal(seen.left, 0);
    });
  });

  describe("jsdom's AbortSignal, AbortController and DOMException installed as globals before the package loads", function () {
    it("accepts both Node's and jsdom's signals, aborts each with its reason, and rejects a stolen holder with an AbortError", async function () {
      const seen = await runScript(`
        const NodeAbortController = AbortController;
        const { JSDOM } = require('jsdom');
        const { window } = new JSDOM('');
        globalThis.AbortSignal = window.AbortSignal;
        globalThis.AbortController = window.AbortController;
        globalThis.DOMException = window.DOMException;
        const { locks } = require(PKG);
        const settle = (p) => p.then((v) => 'ok:' + v, (e) => 'rejected:' + (e && e.name) + ':' + (e && e.message));
        (async () => {
          const out = {};
          ${HOLD_X}
          const nodeC = new NodeAbortController();
          const domC = new window.AbortController();
          const a = settle(locks.request('x', { signal: nodeC.signal }, () => 'ran'));
          const b = settle(locks.request('x', { signal: domC.signal }, () => 'ran'));
          nodeC.abort(new Error('node reason'));
          domC.abort(new window.Error('dom reason'));
          out.aborted = [await a, await b];
          out.fake = await settle(locks.request('x', { signal: Object.create(window.AbortSignal.prototype) }, () => 'ran'));
          const thief = settle(locks.request('x', { steal: true }, () => 'thief'));
          out.stolen = [await holder, await thief];
          release();
          const { held, pending } = await locks.query();
          out.left = held.length + pending.length;
          console.log(JSON.stringify(out));
        })();
      `);
      assert.deepEqual(seen.aborted, ['rejected:Error:node reason', 'rejected:Error:dom reason']);
      assert.match(seen.fake, /^rejected:TypeError:.*AbortSignal/);
      assert.match(seen.stolen[0], /^rejected:AbortError:Lock broken/);
      assert.equal(seen.stolen[1], 'ok:thief');
      assert.equal(seen.left, 0);
    });
  });

  describe('request() near the stack limit', function () {
    it('either fails (throwing or rejecting) with nothing left in the manager, or is fully tracked: no lost lock, no stray callback, no unhandled rejection', async function () {
      const seen = await runScript(`
        const diagnostics = require('node:diagnostics_channel');
        const { locks } = require(PKG);
        const problems = [];
        process.on('uncaughtException', (e) => problems.push('uncaught: ' + e.stack));
        process.on('unhandledRejection', (e) => problems.push('unhandled: ' + (e && e.stack)));
        // A start subscriber and a signal add steps inside request().
        const onStart = () => {};
        const controller = new AbortController();
        const variants = [
          (i) => ['deep'],
          (i) => ['deep', { mode: 'shared' }],
          (i) => ['deep', { signal: controller.signal }],
          (i) => ['deep', { ifAvailable: true }],
          (i) => ['deep-steal-' + i, { steal: true }],
        ];
        const promises = [];
        const ran = [];
        let thrown = 0;
        function attempt(variant) {
          const i = promises.length;
          promises[i] = null;
          try {
            const [name, options] = variants[variant](i);
            promises[i] = options === undefined
              ? locks.request(name, () => { ran[i] = true; })
              : locks.request(name, options, () => { ran[i] = true; });
          } catch (e) {
            thrown++;
          }
        }
        // Fills the stack, then calls request() at every third depth on the
        // way back, the deepest first; the padding shifts where it overflows.
        function recurse(depth, variant, a, b, c, d) {
          try { recurse(depth + 1, variant, a + 1, b, c, d); } catch {}
          if (depth % 3 === 0) attempt(variant);
        }
        (async () => {
          for (let round = 0; round < 30; round++) {
            if (round % 2) diagnostics.subscribe('locks.request.start', onStart);
            else diagnostics.unsubscribe('locks.request.start', onStart);
            const from = promises.length;
            recurse(0, round % variants.length, round, 0, 0, 0);
            // This round's requests settle before the next fills the stack.
            const outcomes = [];
            for (let i = from; i < promises.length; i++) {
              outcomes[i] = promises[i] === null ? 'threw' : promises[i].then(() => 'ok', () => 'rejected');
            }
            const all = Promise.all(outcomes.slice(from));
            const timedOut = await Promise.race([all.then(() => false), new Promise((r) => setTimeout(() => r(true), 10000))]);
            if (timedOut) { problems.push('round ' + round + ': a request never settled'); break; }
            const settled = await all;
            for (let k = 0; k < settled.length; k++) {
              const i = from + k;
              if (settled[k] === 'rejected' && ran[i]) problems.push('request ' + i + ' rejected but its callback ran');
              if (settled[k] === 'ok' && !ran[i]) problems.push('request ' + i + ' fulfilled without its callback');
            }
          }
          await new Promise((r) => setImmediate(r));
          const { held, pending } = await locks.query();
          console.log(JSON.stringify({
            attempts: promises.length, thrown, ran: ran.filter(Boolean).length,
            held: held.length, pending: pending.length, problems: problems.slice(0, 5),
          }));
          process.exit(0);
        })();
      `, { timeout: 60000 });
      assert.deepEqual(seen.problems, []);
      assert.equal(seen.held, 0, 'no lock left held');
      assert.equal(seen.pending, 0, 'no request left queued');
      assert.ok(seen.attempts > 1000, `made ${seen.attempts} attempts`);
      assert.ok(seen.ran > 0, 'some requests near the limit went through');
    });
  });

  describe('user code that runs inside request()', function () {
    let locks;
    before(function () {
      ({ locks } = api());
    });

    for (const free of [false, true]) {
      it(`a locks.request.start subscriber that aborts the request's signal: the promise rejects with the reason, the callback never runs, nothing is left (lock ${free ? 'free' : 'held by another'})`, async function () {
        const name = uniq('abort-in-start');
        const other = free ? null : hold(name);
        if (other) await other.granted;
        const controller = new AbortController();
        const reason = new Error('aborted by a subscriber');
        const onStart = (message) => { if (message.name === name) controller.abort(reason); };
        diagnostics.subscribe('locks.request.start', onStart);
        let ran = false;
        let p;
        try {
          p = locks.request(name, { signal: controller.signal }, () => { ran = true; });
        } finally {
          diagnostics.unsubscribe('locks.request.start', onStart);
        }
        await assert.rejects(p, (e) => e === reason);
        if (other) {
          other.release();
          await other.done;
        }
        await nextTask();
        await nextTask();
        assert.equal(ran, false);
        assert.deepEqual(await stateOf(name), { held: [], pending: [] });
      });
    }

    it("an earlier abort listener's stopImmediatePropagation() does not keep the request from being aborted", async function () {
      const name = uniq('stop-propagation');
      const other = hold(name);
      await other.granted;
      const controller = new AbortController();
      controller.signal.addEventListener('abort', (event) => event.stopImmediatePropagation());
      const p = locks.request(name, { signal: controller.signal }, () => 'ran');
      controller.abort('stop');
      await assert.rejects(p, (e) => e === 'stop');
      assert.equal((await stateOf(name)).pending.length, 0);
      other.release();
      await other.done;
    });
  });

  describe('a thread that ends while holding several locks', function () {
    it('the thread waiting for all of them is granted them in the order the ending thread was granted them', async function () {
      const { locks } = api();
      const [a, b, c, d] = ['A', 'B', 'C', 'D'].map((n) => uniq(`end-order-${n}`));
      // The worker requests D first, while this thread holds it, then A, B
      // and C: it is granted A, B, C, then D. Grant order is what counts.
      const hd = hold(d);
      await hd.granted;
      const w = spawnScript(`
        const forever = new Promise(() => {});
        const [a, b, c, d] = workerData.names;
        const granted = [];
        for (const name of [d, a, b, c]) {
          locks.request(name, () => {
            granted.push(name);
            parentPort.postMessage(granted.join(','));
            return forever;
          });
        }
        setInterval(() => {}, 1000);
      `, { names: [a, b, c, d] });
      await w.message((m) => m === [a, b, c].join(','));
      hd.release();
      await hd.done;
      await w.message((m) => m === [a, b, c, d].join(','));
      const order = [];
      const done = [d, c, b, a].map((name) => locks.request(name, () => { order.push(name); }));
      await w.terminate();
      await Promise.all(done);
      assert.deepEqual(order, [a, b, c, d]);
    });
  });

  describe('the addon loaded again in the same thread (fresh module registries)', function () {
    it('1,000 reloads: one agent (one clientId), no more libuv handles than after one load, and every copy shares the locks', async function () {
      const seen = await runScript(`
        const path = require('node:path');
        const root = path.dirname(require.resolve(PKG));
        function fresh() {
          for (const key of Object.keys(require.cache)) {
            if (key.startsWith(root + path.sep) || key.startsWith(path.join(root, '..') + path.sep + 'build')) delete require.cache[key];
          }
          return require(PKG);
        }
        function handles() {
          const counts = {};
          for (const h of process.report.getReport().libuv) counts[h.type] = (counts[h.type] || 0) + 1;
          return counts;
        }
        (async () => {
          const first = fresh();
          const after1 = handles();
          let last;
          for (let i = 0; i < 1000; i++) last = fresh();
          const after1000 = handles();
          const ids = new Set();
          let release;
          const gate = new Promise((r) => { release = r; });
          let granted;
          const g = new Promise((r) => { granted = r; });
          const held = first.locks.request('shared-across-copies', () => { granted(); return gate; });
          await g;
          const miss = await last.locks.request('shared-across-copies', { ifAvailable: true }, (lock) => lock === null);
          const other = last.locks.request('other', () => new Promise(() => {}));
          const snap = await first.locks.query();
          for (const e of [...snap.held, ...snap.pending]) ids.add(e.clientId);
          release();
          await held;
          console.log(JSON.stringify({ after1, after1000, clientIds: ids.size, miss, distinct: first.locks !== last.locks }));
          process.exit(0);
        })();
      `, { timeout: 60000 });
      assert.equal(seen.distinct, true, 'the reloads made new module instances');
      assert.deepEqual(seen.after1000, seen.after1);
      assert.equal(seen.clientIds, 1);
      assert.equal(seen.miss, true, "a copy sees the other copy's lock");
    });
  });

  describe('query() under an index setter on Array.prototype (after load)', function () {
    it('shows every entry, and the setter sees none of them', async function () {
      const r = await runScript(`
        const { locks } = require(PKG);
        let seen = 0;
        Object.defineProperty(Array.prototype, '0', { set() { seen++; }, configurable: true });
        Object.defineProperty(Array.prototype, '1', { set() { seen++; }, configurable: true });
        locks.request('q', async () => {
          const snapshot = await locks.request('r', () => locks.query()).then((s) => s, (e) => e.message);
          process.stdout.write(JSON.stringify({ seen, held: snapshot.held && snapshot.held.map((l) => l.name).sort() }) + '\\n');
          // Node 18 itself never ends a process whose Array.prototype has
          // index setters, package or not.
          process.exit(0);
        });
      `);
      assert.deepEqual(r, { seen: 0, held: ['q', 'r'] });
    });
  });

  describe('query() with many entries on one long name', function () {
    it('makes one string per distinct name: 200 entries on a 4 MB name cost one copy', async function () {
      const seen = await runScript(`
        const { locks } = require(PKG);
        const name = 'n'.repeat(4 << 20);
        const forever = new Promise(() => {});
        for (let i = 0; i < 200; i++) locks.request(name, { mode: 'shared' }, () => forever);
        for (let i = 0; i < 20; i++) locks.request(name, () => {});
        setImmediate(async () => {
          global.gc();
          const before = process.memoryUsage();
          const snap = await locks.query();
          const after = process.memoryUsage();
          const growth = (after.heapUsed + after.external) - (before.heapUsed + before.external);
          console.log(JSON.stringify({ held: snap.held.length, pending: snap.pending.length, growth, same: snap.held.every((e) => e.name === name) }));
          process.exit(0);
        });
      `, { execArgv: ['--expose-gc'] });
      assert.equal(seen.held, 200);
      assert.equal(seen.pending, 20);
      assert.ok(seen.same);
      // One two-byte copy is 8 MB; one per entry would be 1.7 GB.
      assert.ok(seen.growth < 64 << 20, `query() grew the heap by ${(seen.growth / 1048576).toFixed(1)} MB`);
    });
  });

  describe('monitorContention() under hostile values and late starts', function () {
    it('a callback that rejects with a revoked Proxy is counted as failed, without an uncaught exception', async function () {
      const { locks, monitorContention } = api();
      const monitor = monitorContention();
      const name = uniq('monitor-proxy');
      try {
        const { proxy, revoke } = Proxy.revocable({}, {});
        revoke();
        let caught;
        await locks.request(name, async () => { throw proxy; }).catch((e) => { caught = e; });
        assert.ok(caught === proxy, 'rejects with the revoked Proxy');
        const abortedReason = new DOMException('x', 'AbortError');
        await assert.rejects(locks.request(name, async () => { throw abortedReason; }));
        const figures = monitor.figures().get(name);
        assert.equal(figures.requests, 2);
        assert.equal(figures.failed, 2, "a callback's AbortError is a failure, not an abort by the signal");
        assert.equal(figures.aborted, 0);
      } finally {
        monitor.stop();
      }
    });

    it('a monitor started while requests wait (an earlier subscriber on the channels) counts only what it saw start: no NaN, granted <= requests', async function () {
      const { locks, monitorContention } = api();
      const name = uniq('monitor-late');
      const early = monitorContention();
      const other = hold(name);
      await other.granted;
      const waiting = [1, 2, 3].map(() => locks.request(name, () => {}));
      const late = monitorContention();
      const mine = locks.request(name, () => {});
      other.release();
      await Promise.all([...waiting, mine, other.done]);
      const f = late.figures().get(name);
      late.stop();
      early.stop();
      assert.equal(f.requests, 1);
      assert.equal(f.granted, 1);
      assert.equal(f.waited, 1);
      assert.ok(Number.isFinite(f.waitMs) && f.waitMs >= 0, `waitMs ${f.waitMs}`);
      assert.ok(f.maxWaitMs <= f.waitMs);
      const e = early.figures().get(name);
      assert.equal(e.requests, 5);
      assert.equal(e.granted, 5);
    });
  });
});
