'use strict';
// The tracing channel web-locks.request (a diagnostics_channel
// TracingChannel): its events and their context, for each manager.
const assert = require('node:assert/strict');
const { AsyncLocalStorage } = require('node:async_hooks');
const dc = require('node:diagnostics_channel');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { performance } = require('node:perf_hooks');
const { api, uniq, scopeName, holdOn, only } = require('./fixtures/util');
const { postgres } = require('./fixtures/postgres');

const CHANNEL = 'web-locks.request';
const EVENTS = ['start', 'end', 'asyncStart', 'asyncEnd', 'error'];
const KEYS = ['name', 'mode', 'ifAvailable', 'steal', 'signal', 'manager', 'scope', 'clientId', 'granted', 'waitMs', 'token', 'result', 'error'];

// Records the channel's events as { event, context, copy } (copy: the
// context's fields at that event), and the callbacks' marks as
// { event: 'callback', name }.
function record() {
  const events = [];
  const handlers = {};
  for (const event of EVENTS) handlers[event] = (context) => events.push({ event, context, copy: { ...context } });
  const channel = dc.tracingChannel(CHANNEL);
  channel.subscribe(handlers);
  events.stop = () => channel.unsubscribe(handlers);
  events.mark = (name) => events.push({ event: 'callback', name });
  return events;
}

// The events of the requests of `name` whose context passes `which`, and
// the marks of callbacks for that name, in order; checked to share one
// context object.
function eventsOf(events, name, which = () => true) {
  const mine = events.filter((e) => (e.event === 'callback' ? e.name === name : e.context.name === name && which(e.context)));
  const traced = mine.filter((e) => e.event !== 'callback');
  assert.ok(traced.length > 0, `no event for ${name}`);
  for (const e of traced) assert.equal(e.context, traced[0].context, 'one context object for all the events of a request');
  assert.deepEqual(Object.keys(traced[0].context), KEYS);
  return mine;
}

function at(mine, event) {
  return mine.find((e) => e.event === event).copy;
}

// The clientId that query() shows for this manager's locks.
async function clientIdOf(manager) {
  const name = uniq('client-id');
  const h = holdOn(manager, name);
  await h.granted;
  const { held } = only(await manager.query(), name);
  h.release();
  await h.done;
  return held[0].clientId;
}

const MANAGERS = [
  { kind: 'process', open: async () => ({ manager: api().locks, scope: undefined }) },
  {
    kind: 'machine',
    async open(dir) {
      const scope = scopeName('trace');
      return { manager: await api().openLockManager(scope, { dir }), scope };
    },
  },
  {
    kind: 'postgres',
    async open() {
      const scope = scopeName('trace');
      return { manager: await api().openLockManager(scope, { postgres: (await postgres()).url }), scope };
    },
  },
];

describe('tracing channel web-locks.request', function () {
  before(function () {
    if (typeof dc.tracingChannel !== 'function') this.skip(); // Node 18.18: none
  });

  for (const { kind, open } of MANAGERS) {
    describe(`${kind}`, function () {
      this.timeout(kind === 'postgres' ? 30000 : 10000);
      before(function () {
        // Under Bun, the PostgreSQL manager is not tested (scripts/test-runtimes.js).
        if (kind === 'postgres' && process.versions.bun !== undefined) this.skip();
      });
      let dir;
      let manager;
      let scope;
      let clientId;
      let events;

      before(function () {
        dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-trace-'));
      });
      beforeEach(async function () {
        ({ manager, scope } = await open(dir));
        clientId = await clientIdOf(manager);
        events = record();
      });
      afterEach(async function () {
        events.stop();
        if (kind !== 'process') await manager.close();
      });
      after(function () {
        if (dir) fs.rmSync(dir, { recursive: true, force: true });
      });

      const startContext = (name, options = {}) => ({
        name,
        mode: 'exclusive',
        ifAvailable: false,
        steal: false,
        signal: false,
        manager: kind,
        scope,
        clientId,
        granted: false,
        waitMs: undefined,
        token: undefined,
        result: undefined,
        error: undefined,
        ...options,
      });

      it('a granted request: start and end in request(), asyncStart just before the callback, asyncEnd with its result', async function () {
        const name = uniq('granted');
        const value = { value: 1 };
        let lock;
        assert.equal(await manager.request(name, (l) => { events.mark(name); lock = l; return value; }), value);
        const mine = eventsOf(events, name);
        assert.deepEqual(mine.map((e) => e.event), ['start', 'end', 'asyncStart', 'callback', 'asyncEnd']);
        assert.deepEqual(at(mine, 'start'), startContext(name));
        assert.deepEqual(at(mine, 'end'), startContext(name));
        const reached = at(mine, 'asyncStart');
        assert.equal(reached.granted, true);
        assert.equal(typeof reached.token, 'bigint');
        assert.equal(reached.token, lock.token);
        assert.ok(typeof reached.waitMs === 'number' && reached.waitMs >= 0, String(reached.waitMs));
        assert.deepEqual(at(mine, 'asyncEnd'), { ...reached, result: value });
      });

      it('a request that waited: waitMs spans the wait, on the monotonic clock', async function () {
        const name = uniq('waited');
        const h = holdOn(manager, name);
        const first = await h.granted;
        const before = performance.now();
        let reachedAt;
        const waiter = manager.request(name, { mode: 'shared' }, (lock) => {
          reachedAt = performance.now();
          return lock.token;
        });
        const made = performance.now();
        await manager.query(); // the request is in the manager (a round trip for PostgreSQL)
        const releasedAt = performance.now();
        h.release();
        await h.done;
        const token = await waiter;
        const theirs = eventsOf(events, name, (context) => context.mode === 'shared');
        assert.deepEqual(theirs.map((e) => e.event), ['start', 'end', 'asyncStart', 'asyncEnd']);
        assert.deepEqual(theirs[1].copy, startContext(name, { mode: 'shared' }), 'nothing known yet at end');
        const reached = at(theirs, 'asyncStart');
        assert.equal(reached.granted, true);
        assert.equal(reached.token, token);
        assert.ok(token > first.token);
        assert.ok(reached.waitMs >= releasedAt - made, `${reached.waitMs} ms, released ${releasedAt - made} ms after request() returned`);
        assert.ok(reached.waitMs <= reachedAt - before, `${reached.waitMs} ms, the callback reached ${reachedAt - before} ms after request() was called`);
        assert.equal(at(theirs, 'asyncEnd').result, token);
      });

      it('an ifAvailable request that missed: granted null, no token', async function () {
        const name = uniq('missed');
        const h = holdOn(manager, name);
        await h.granted;
        assert.equal(await manager.request(name, { ifAvailable: true }, (lock) => { events.mark(name); return lock; }), null);
        h.release();
        await h.done;
        const mine = eventsOf(events, name, (context) => context.ifAvailable);
        assert.deepEqual(mine.map((e) => e.event), ['start', 'end', 'asyncStart', 'callback', 'asyncEnd']);
        assert.deepEqual(at(mine, 'start'), startContext(name, { ifAvailable: true }));
        const reached = at(mine, 'asyncStart');
        assert.equal(reached.granted, null);
        assert.equal(reached.token, undefined);
        assert.equal(typeof reached.waitMs, 'number');
        assert.deepEqual(at(mine, 'asyncEnd'), { ...reached, result: null });
      });

      it('a request aborted by its signal: error, asyncStart and asyncEnd, no callback, granted false', async function () {
        const name = uniq('aborted');
        const h = holdOn(manager, name);
        await h.granted;
        const controller = new AbortController();
        const waiting = manager.request(name, { signal: controller.signal }, () => events.mark(name));
        await manager.query();
        controller.abort('why');
        await assert.rejects(waiting, (e) => e === 'why');
        h.release();
        await h.done;
        const mine = eventsOf(events, name, (context) => context.signal);
        assert.deepEqual(mine.map((e) => e.event), ['start', 'end', 'error', 'asyncStart', 'asyncEnd']);
        assert.deepEqual(at(mine, 'start'), startContext(name, { signal: true }));
        const failed = at(mine, 'error');
        assert.equal(failed.error, 'why');
        assert.equal(failed.granted, false);
        assert.equal(failed.token, undefined);
        assert.equal(typeof failed.waitMs, 'number');
        assert.deepEqual(at(mine, 'asyncEnd'), failed);
      });

      it('a callback that throws: error after asyncStart, with what it threw', async function () {
        const name = uniq('throws');
        const boom = new Error('boom');
        await assert.rejects(manager.request(name, () => { events.mark(name); throw boom; }), (e) => e === boom);
        const mine = eventsOf(events, name);
        assert.deepEqual(mine.map((e) => e.event), ['start', 'end', 'asyncStart', 'callback', 'error', 'asyncEnd']);
        const failed = at(mine, 'error');
        assert.equal(failed.error, boom);
        assert.equal(failed.granted, true);
        assert.equal(failed.result, undefined);
        assert.deepEqual(at(mine, 'asyncEnd'), failed);
      });

      it('a stolen lock: the holder\'s request ends with an AbortError, the thief\'s with its token', async function () {
        const name = uniq('stolen');
        const h = holdOn(manager, name);
        const held = await h.granted;
        const token = await manager.request(name, { steal: true }, (lock) => lock.token);
        await assert.rejects(h.done, { name: 'AbortError' });
        h.release();
        const victim = eventsOf(events, name, (context) => !context.steal);
        const thief = eventsOf(events, name, (context) => context.steal);
        assert.deepEqual(victim.map((e) => e.event), ['start', 'end', 'asyncStart', 'error', 'asyncEnd']);
        assert.equal(at(victim, 'error').error.name, 'AbortError');
        assert.equal(at(victim, 'error').granted, true);
        assert.equal(at(victim, 'error').token, held.token);
        assert.deepEqual(thief.map((e) => e.event), ['start', 'end', 'asyncStart', 'asyncEnd']);
        assert.deepEqual(at(thief, 'start'), startContext(name, { steal: true }));
        assert.equal(at(thief, 'asyncEnd').token, token);
        assert.ok(token > held.token);
      });

      if (kind !== 'process') {
        it('close(): the held and the waiting request end with an AbortError', async function () {
          const name = uniq('closed');
          const h = holdOn(manager, name);
          await h.granted;
          const waiting = manager.request(name, () => events.mark(name)).then(() => 'granted', (e) => e);
          await manager.query();
          await manager.close();
          assert.equal((await waiting).name, 'AbortError');
          await assert.rejects(h.done, { name: 'AbortError' });
          const held = events.find((e) => e.context.name === name).context;
          assert.deepEqual(eventsOf(events, name, (context) => context === held).map((e) => e.event), ['start', 'end', 'asyncStart', 'error', 'asyncEnd']);
          assert.deepEqual(eventsOf(events, name, (context) => context !== held).map((e) => e.event), ['start', 'end', 'error', 'asyncStart', 'asyncEnd']);
        });
      }
    });
  }

  describe('process-wide, and what is not traced', function () {
    let locks;
    let events;
    before(function () {
      ({ locks } = api());
    });
    beforeEach(function () {
      events = record();
    });
    afterEach(function () {
      events.stop();
    });

    it('traces only the requests that started while someone subscribed, and none rejected before it was made', async function () {
      const name = uniq('late');
      events.stop();
      const h = holdOn(locks, name);
      await h.granted;
      events = record();
      h.release();
      await h.done;
      await assert.rejects(locks.request('-reserved', () => {}), { name: 'NotSupportedError' });
      const controller = new AbortController();
      controller.abort();
      await assert.rejects(locks.request(name, { signal: controller.signal }, () => {}), { name: 'AbortError' });
      assert.equal(events.length, 0);
      await locks.request(name, () => {});
      assert.deepEqual(eventsOf(events, name).map((e) => e.event), ['start', 'end', 'asyncStart', 'asyncEnd']);
    });

    it('a request its manager refuses (a full scope): start, end, error, asyncStart, asyncEnd', async function () {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-trace-'));
      const manager = await api().openLockManager('full', { dir, size: 8192 });
      try {
        let refused;
        for (let i = 0; refused === undefined && i < 10000; i++) {
          const name = `full-${i}`.padEnd(60, 'x');
          const h = holdOn(manager, name);
          refused = await Promise.race([h.granted.then(() => undefined), h.done.then(() => undefined, () => name)]);
        }
        assert.ok(refused !== undefined, 'never full');
        const mine = eventsOf(events, refused);
        assert.deepEqual(mine.map((e) => e.event), ['start', 'end', 'error', 'asyncStart', 'asyncEnd']);
        const failed = at(mine, 'error');
        assert.equal(failed.error.name, 'QuotaExceededError');
        assert.equal(failed.granted, false);
        assert.equal(typeof failed.waitMs, 'number');
      } finally {
        await manager.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('stores bound to start apply to the callback, and to request() but not after it; those bound to asyncStart to the callback', async function () {
      const channel = dc.tracingChannel(CHANNEL);
      const atStart = new AsyncLocalStorage();
      const atCallback = new AsyncLocalStorage();
      channel.start.bindStore(atStart, (context) => `start ${context.name}`);
      channel.asyncStart.bindStore(atCallback, (context) => `callback ${context.name}`);
      try {
        const name = uniq('stores');
        let inStart;
        const onStart = () => { inStart = atStart.getStore(); };
        channel.start.subscribe(onStart);
        const seen = await locks.request(name, async () => {
          const now = [atStart.getStore(), atCallback.getStore()];
          await Promise.resolve();
          return [...now, atStart.getStore(), atCallback.getStore()];
        });
        channel.start.unsubscribe(onStart);
        assert.equal(inStart, `start ${name}`);
        assert.deepEqual(seen, [`start ${name}`, `callback ${name}`, `start ${name}`, `callback ${name}`]);
        assert.equal(atStart.getStore(), undefined);
        assert.equal(atCallback.getStore(), undefined);
      } finally {
        channel.start.unbindStore(atStart);
        channel.asyncStart.unbindStore(atCallback);
      }
    });
  });
});
