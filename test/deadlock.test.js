'use strict';
// Deadlocks found and named (lib/deadlock.js), on each manager: cycles of
// two and three agents (threads of this process; processes on a scope;
// processes on PostgreSQL) and an agent waiting on its own lock are
// published on the web-locks.deadlock channel of every thread with a
// request in them, once, within a second; nothing is rejected unless a
// thread asked for it with rejectDeadlocks, and then one request of the
// cycle rejects with an OperationError that names it.
const assert = require('node:assert/strict');
const childProcess = require('node:child_process');
const diagnostics = require('node:diagnostics_channel');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { AsyncResource } = require('node:async_hooks');
const { Worker } = require('node:worker_threads');
const { PKG, uniq, scopeName } = require('./fixtures/util');
const { postgres } = require('./fixtures/postgres');

const { locks, openLockManager, rejectDeadlocks } = require(PKG);
const AGENT = path.join(__dirname, 'fixtures', 'deadlock-agent.js');
const machine = ['linux', 'darwin', 'win32'].includes(process.platform);

// A deadlock agent (fixtures/deadlock-agent.js) in a worker or a process.
function spawn(kind, data) {
  const full = Object.assign({ pkg: PKG }, data);
  const emitter = kind === 'worker'
    ? new Worker(AGENT, { workerData: full, stdout: false, stderr: false })
    : childProcess.fork(AGENT, [], { env: Object.assign({}, process.env, { WEB_LOCKS_DEADLOCK: JSON.stringify(full) }), stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const messages = [];
  const waiters = [];
  const wake = () => {
    for (const w of [...waiters]) {
      const found = messages.find(w.pred);
      if (found !== undefined) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(found);
      }
    }
  };
  emitter.on('message', (m) => {
    messages.push(m);
    wake();
  });
  const exited = new Promise((resolve) => emitter.once('exit', resolve));
  const agent = {
    messages,
    exited,
    post: (m) => (kind === 'worker' ? emitter.postMessage(m) : emitter.send(m)),
    message: (pred, what) => within(new Promise((resolve) => {
      waiters.push({ pred, resolve });
      wake();
    }), 10000, what),
    end: () => (kind === 'worker' ? emitter.terminate() : emitter.kill('SIGKILL')),
  };
  spawned.push(agent);
  return agent;
}
const spawned = [];

function within(promise, ms, what) {
  let timer;
  return Promise.race([promise, new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms);
  })]).finally(() => clearTimeout(timer));
}

// What this thread hears on the channel, while a test runs.
function listen() {
  const heard = [];
  let wake = () => {};
  const onMessage = (m) => {
    heard.push({ at: performance.now(), message: m });
    wake();
  };
  diagnostics.subscribe('web-locks.deadlock', onMessage);
  return {
    heard,
    next: (what) => within(new Promise((resolve) => {
      if (heard.length > 0) resolve(heard[0]);
      else wake = () => resolve(heard[0]);
    }), 10000, what),
    stop: () => diagnostics.unsubscribe('web-locks.deadlock', onMessage),
  };
}

// This thread holds `first` until release(); second(name) asks for name
// from inside that callback (in its async context, as the callback's own
// code would), with a signal that ends it.
async function holdOn(manager, first) {
  let release;
  let granted;
  let inside;
  const held = new Promise((resolve) => { granted = resolve; });
  const done = manager.request(first, () => {
    inside = AsyncResource.bind((fn) => fn());
    granted();
    return new Promise((resolve) => { release = resolve; });
  });
  await held;
  const { held: all } = await manager.query();
  const clientId = all.find((h) => h.name === first).clientId;
  const controller = new AbortController();
  return {
    clientId,
    done,
    second: (name) => inside(() => manager.request(name, { signal: controller.signal }, () => 'second')),
    abort: () => controller.abort(),
    release: () => release(),
  };
}

const sortCycle = (cycle) => [...cycle].sort((a, b) => (a.name < b.name ? -1 : 1));
const naps = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const SETUPS = [
  { title: 'the process-wide manager (threads)', kind: 'worker', open: async () => ({ manager: locks, data: {} }) },
  {
    title: 'a scope (processes)',
    kind: 'process',
    skip: !machine && 'no machine-wide manager on this platform',
    open: async (dir) => {
      const scope = scopeName('deadlock');
      return { manager: await openLockManager(scope, { dir }), data: { scope, options: { dir } } };
    },
  },
  {
    title: 'PostgreSQL (processes)',
    kind: 'process',
    agentPerOpen: true,
    open: async () => {
      const { url } = await postgres();
      const scope = scopeName('deadlock');
      return { manager: await openLockManager(scope, { postgres: url }), data: { scope, options: { postgres: url } } };
    },
  },
];

for (const setup of SETUPS) {
  describe(`deadlocks on ${setup.title}`, function () {
    this.timeout(30000);
    let dir;
    let manager;
    let data;
    let ears;

    before(function () {
      if (setup.skip) this.skip();
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-deadlock-'));
    });
    after(() => { if (dir) fs.rmSync(dir, { recursive: true, force: true }); });
    beforeEach(async () => {
      ({ manager, data } = await setup.open(dir));
      ears = listen();
    });
    afterEach(async () => {
      ears.stop();
      rejectDeadlocks(manager, false);
      await Promise.all(spawned.splice(0).map((a) => a.end()));
      if (manager !== locks) await manager.close();
    });

    it('a cycle of two agents: each thread hears it once, within a second, with each request and whom it waits for; nothing is rejected', async function () {
      const [a, b] = [uniq('a'), uniq('b')];
      const me = await holdOn(manager, a);
      const other = spawn(setup.kind, Object.assign({ first: b, second: a }, data));
      const { holding } = await other.message((m) => m.holding, 'the other agent holding');
      const mine = me.second(b);
      mine.catch(() => {});
      const t0 = performance.now();
      other.post('go');
      const { at, message } = await ears.next('a deadlock heard here');
      const theirs = await other.message((m) => m.deadlock, 'a deadlock heard there');
      assert.ok(at - t0 < 1000, `heard after ${at - t0} ms`);
      const expected = sortCycle([
        { name: b, mode: 'exclusive', clientId: me.clientId, waitsFor: holding },
        { name: a, mode: 'exclusive', clientId: holding, waitsFor: me.clientId },
      ]);
      assert.deepEqual(sortCycle(message.cycle), expected);
      assert.deepEqual(sortCycle(theirs.deadlock.cycle), expected);
      // Two more looks each: still once, and both still wait.
      await naps(600);
      assert.equal(ears.heard.length, 1);
      assert.equal(other.messages.filter((m) => m.deadlock).length, 1);
      assert.equal(other.messages.some((m) => m.second), false);
      const { pending } = await manager.query();
      assert.deepEqual(pending.filter((p) => p.name === a || p.name === b).length, 2);
      // Broken by an abort: the other agent is granted once this one lets go.
      me.abort();
      await assert.rejects(mine, { name: 'AbortError' });
      me.release();
      await me.done;
      assert.deepEqual(await other.message((m) => m.second, 'the other agent granted'), { second: 'granted' });
    });

    it('a cycle of three agents: each of the three threads hears it once', async function () {
      const [a, b, c] = [uniq('a'), uniq('b'), uniq('c')];
      const me = await holdOn(manager, a);
      const one = spawn(setup.kind, Object.assign({ first: b, second: c }, data));
      const two = spawn(setup.kind, Object.assign({ first: c, second: a }, data));
      const ids = [(await one.message((m) => m.holding, 'one holding')).holding, (await two.message((m) => m.holding, 'two holding')).holding];
      const mine = me.second(b);
      mine.catch(() => {});
      one.post('go');
      two.post('go');
      const { message } = await ears.next('a deadlock heard here');
      const heardThere = await Promise.all([one, two].map((x) => x.message((m) => m.deadlock, 'a deadlock heard there')));
      const expected = sortCycle([
        { name: b, mode: 'exclusive', clientId: me.clientId, waitsFor: ids[0] },
        { name: c, mode: 'exclusive', clientId: ids[0], waitsFor: ids[1] },
        { name: a, mode: 'exclusive', clientId: ids[1], waitsFor: me.clientId },
      ]);
      assert.deepEqual(sortCycle(message.cycle), expected);
      for (const h of heardThere) assert.deepEqual(sortCycle(h.deadlock.cycle), expected);
      await naps(600);
      assert.equal(ears.heard.length, 1);
      me.abort();
      await assert.rejects(mine, { name: 'AbortError' });
      me.release();
      await me.done;
      assert.deepEqual(await two.message((m) => m.second, 'two granted'), { second: 'granted' });
    });

    it('an agent waiting on its own lock is a cycle of one', async function () {
      const x = uniq('x');
      const me = await holdOn(manager, x);
      const mine = me.second(x);
      mine.catch(() => {});
      const { message } = await ears.next('a deadlock heard here');
      assert.deepEqual(message.cycle, [{ name: x, mode: 'exclusive', clientId: me.clientId, waitsFor: me.clientId }]);
      me.abort();
      await assert.rejects(mine, { name: 'AbortError' });
      me.release();
      await me.done;
    });

    it('two agents of one thread in one cycle: the thread hears of it once', async function () {
      if (!setup.agentPerOpen) this.skip(); // a thread is one agent of a scope, however often it opens it
      const [a, b] = [uniq('a'), uniq('b')];
      const second = await openLockManager(data.scope, data.options);
      try {
        const one = await holdOn(manager, a);
        const two = await holdOn(second, b);
        const waits = [one.second(b), two.second(a)];
        for (const p of waits) p.catch(() => {});
        const { message } = await ears.next('a deadlock heard here');
        assert.deepEqual(sortCycle(message.cycle), sortCycle([
          { name: b, mode: 'exclusive', clientId: one.clientId, waitsFor: two.clientId },
          { name: a, mode: 'exclusive', clientId: two.clientId, waitsFor: one.clientId },
        ]));
        await naps(600);
        assert.equal(ears.heard.length, 1);
        one.abort();
        await assert.rejects(waits[0], { name: 'AbortError' });
        one.release();
        await one.done;
        assert.equal(await waits[1], 'second');
        two.release();
        await two.done;
      } finally {
        await second.close();
      }
    });

    it('with rejectDeadlocks, one request of the cycle rejects with an OperationError that names it, and the rest go on', async function () {
      const [a, b] = [uniq('a'), uniq('b')];
      rejectDeadlocks(manager);
      const me = await holdOn(manager, a);
      const other = spawn(setup.kind, Object.assign({ first: b, second: a }, data));
      const { holding } = await other.message((m) => m.holding, 'the other agent holding');
      const mine = me.second(b);
      other.post('go');
      const error = await within(mine.then(() => null, (e) => e), 10000, 'the rejection');
      assert.equal(error && error.name, 'OperationError');
      assert.match(error.message, new RegExp(`${b}.*${holding}|${holding}.*${b}`));
      assert.deepEqual(sortCycle(error.cycle), sortCycle([
        { name: b, mode: 'exclusive', clientId: me.clientId, waitsFor: holding },
        { name: a, mode: 'exclusive', clientId: holding, waitsFor: me.clientId },
      ]));
      me.release();
      await me.done;
      assert.deepEqual(await other.message((m) => m.second, 'the other agent granted'), { second: 'granted' });
      // And where only the other agent asked for it, its request rejects.
      const [c, d] = [uniq('c'), uniq('d')];
      rejectDeadlocks(manager, false);
      const me2 = await holdOn(manager, c);
      const asker = spawn(setup.kind, Object.assign({ first: d, second: c, reject: true }, data));
      await asker.message((m) => m.holding, 'the asking agent holding');
      const mine2 = me2.second(d);
      asker.post('go');
      const said = await asker.message((m) => m.second, 'the asking agent\'s outcome');
      assert.equal(said.second, 'OperationError');
      asker.post('release');
      assert.equal(await within(mine2, 10000, 'the grant here'), 'second');
      me2.release();
      await me2.done;
    });
  });
}

describe('rejectDeadlocks()', function () {
  it('takes a LockManager and a boolean, and throws a TypeError for anything else', function () {
    assert.throws(() => rejectDeadlocks({}), TypeError);
    assert.throws(() => rejectDeadlocks(locks, 'yes'), TypeError);
    rejectDeadlocks(locks, true);
    rejectDeadlocks(locks, false);
    rejectDeadlocks(locks);
    rejectDeadlocks(locks, false);
  });
});

describe('the deadlock watch, whatever the thread does with timers', function () {
  this.timeout(20000);
  const run = (script, env = {}) => new Promise((resolve) => {
    childProcess.execFile(process.execPath, ['-e', script], { timeout: 10000, env: Object.assign({}, process.env, env) },
      (error, stdout, stderr) => resolve({ code: error ? error.code : 0, stdout: stdout.trim(), stderr }));
  });

  // Fake timers installed before the package loads (vitest's
  // vi.useFakeTimers() in a setup file) replace the `timers` module's
  // functions too: the looks run on the addon's timer, which they cannot stop.
  it('rejects a deadlock under fake timers installed before the package loaded', async function () {
    const script = `
      const FakeTimers = require('@sinonjs/fake-timers');
      FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'setImmediate', 'Date', 'performance', 'hrtime'] });
      const { locks, rejectDeadlocks } = require(${JSON.stringify(PKG)});
      rejectDeadlocks(locks);
      locks.request('z', () => locks.request('z', () => 'granted').catch((e) => e.name)).then((outcome) => console.log(outcome));
    `;
    const { stdout, stderr } = await run(script);
    assert.equal(stdout, 'OperationError', stderr);
  });

  // Nothing on the thread listens or asked: WEB_LOCKS_DEADLOCKS=reject in
  // the environment makes every thread watch and reject.
  it('WEB_LOCKS_DEADLOCKS=reject makes a thread that did nothing else reject its deadlock; unset, it waits', async function () {
    const script = `
      const { locks } = require(${JSON.stringify(PKG)});
      const helper = new AbortController();
      setTimeout(() => helper.abort(), 1000);
      locks.request('z', () => locks.request('z', { signal: helper.signal }, () => 'granted').catch((e) => e.name)).then((outcome) => console.log(outcome));
    `;
    assert.equal((await run(script, { WEB_LOCKS_DEADLOCKS: 'reject' })).stdout, 'OperationError');
    assert.equal((await run(script, { WEB_LOCKS_DEADLOCKS: '' })).stdout, 'AbortError');
  });
});

