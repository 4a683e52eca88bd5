'use strict';
// diagnostics_channel events (the names and payloads of Node's built-in
// navigator.locks) and monitorContention().
const assert = require('node:assert/strict');
const dc = require('node:diagnostics_channel');
const { api, deferred, uniq, hold } = require('./fixtures/util');

const CHANNELS = ['start', 'grant', 'miss', 'end'];

// Records every event of the four channels, as [kind, payload].
function record() {
  const events = [];
  const handlers = CHANNELS.map((kind) => {
    const handler = (message) => events.push([kind, message]);
    dc.subscribe(`locks.request.${kind}`, handler);
    return [kind, handler];
  });
  events.stop = () => {
    for (const [kind, handler] of handlers) dc.unsubscribe(`locks.request.${kind}`, handler);
  };
  return events;
}

describe('diagnostics_channel', () => {
  let events;
  beforeEach(() => { events = record(); });
  afterEach(() => events.stop());

  it('publishes start, grant and end for a granted request, with the built-in payload shapes', async () => {
    const { locks } = api();
    const name = uniq();
    assert.equal(await locks.request(name, () => 'ok'), 'ok');
    assert.deepEqual(events.map(([kind]) => kind), ['start', 'grant', 'end']);
    assert.deepEqual(events[0][1], { name, mode: 'exclusive' });
    assert.equal(events[1][1], events[0][1], 'start and grant share one payload object');
    assert.deepEqual(Object.keys(events[2][1]), ['name', 'mode', 'ifAvailable', 'steal', 'error']);
    assert.deepEqual(events[2][1], { name, mode: 'exclusive', ifAvailable: false, steal: false, error: undefined });
  });

  it('publishes miss, not grant, for an unavailable ifAvailable request', async () => {
    const { locks } = api();
    const name = uniq();
    const h = hold(name);
    await h.granted;
    events.length = 0;
    assert.equal(await locks.request(name, { mode: 'shared', ifAvailable: true }, (lock) => lock), null);
    assert.deepEqual(events.map(([kind]) => kind), ['start', 'miss', 'end']);
    assert.deepEqual(events[1][1], { name, mode: 'shared' });
    assert.equal(events[2][1].ifAvailable, true);
    h.release();
    await h.done;
  });

  it('reports the callback error in end', async () => {
    const { locks } = api();
    const error = new Error('boom');
    await assert.rejects(locks.request(uniq(), () => { throw error; }), (e) => e === error);
    const end = events.find(([kind]) => kind === 'end')[1];
    assert.equal(end.error, error);
  });

  it('ends a stolen request with an AbortError and the thief with no error', async () => {
    const { locks } = api();
    const name = uniq();
    const h = hold(name);
    await h.granted;
    await locks.request(name, { steal: true }, () => {});
    await assert.rejects(h.done, { name: 'AbortError' });
    h.release();
    const ends = events.filter(([kind]) => kind === 'end').map(([, m]) => m);
    assert.equal(ends.length, 2);
    const victim = ends.find((m) => !m.steal);
    const thief = ends.find((m) => m.steal);
    assert.equal(victim.error.name, 'AbortError');
    assert.equal(thief.error, undefined);
  });

  it('ends an aborted request once, with the signal reason, and publishes no grant', async () => {
    const { locks } = api();
    const name = uniq();
    const h = hold(name);
    await h.granted;
    const controller = new AbortController();
    const waiting = locks.request(name, { signal: controller.signal }, () => {});
    controller.abort('why');
    await assert.rejects(waiting, (e) => e === 'why');
    h.release();
    await h.done;
    const mine = events.filter(([, m]) => m.name === name);
    // The holder: start, grant, end; the aborted request: start, end.
    assert.deepEqual(mine.map(([kind]) => kind), ['start', 'grant', 'start', 'end', 'end']);
    assert.equal(mine[3][1].error, 'why');
    assert.equal(mine[4][1].error, undefined);
  });

  it('publishes nothing for a request rejected by validation', async () => {
    const { locks } = api();
    await assert.rejects(locks.request('-reserved', () => {}), { name: 'NotSupportedError' });
    assert.equal(events.length, 0);
  });

  it('uses the same channel names as the built-in on Node >= 24, which sees only its own requests', async function () {
    const builtin = globalThis.navigator && globalThis.navigator.locks;
    if (!builtin || builtin === api().locks) this.skip();
    const name = uniq();
    await builtin.request(name, () => {});
    const theirs = events.map(([kind, m]) => [kind, Object.keys(m)]);
    events.length = 0;
    await api().locks.request(name, () => {});
    const ours = events.map(([kind, m]) => [kind, Object.keys(m)]);
    assert.deepEqual(ours, theirs);
  });
});

describe('monitorContention()', () => {
  it('counts requests, waits with their wait time, misses, steals and aborts per name', async () => {
    const { locks, monitorContention } = api();
    const monitor = monitorContention();
    const name = uniq();
    try {
      const h = hold(name);
      await h.granted;
      const waiter = locks.request(name, () => {});
      const miss = locks.request(name, { ifAvailable: true }, (lock) => lock);
      const controller = new AbortController();
      const aborted = locks.request(name, { signal: controller.signal }, () => {});
      controller.abort();
      await assert.rejects(aborted, { name: 'AbortError' });
      assert.equal(await miss, null);
      h.release();
      await h.done;
      await waiter;
      const thief = deferred();
      const victim = hold(name);
      await victim.granted;
      await locks.request(name, { steal: true }, () => thief.resolve());
      await assert.rejects(victim.done, { name: 'AbortError' });
      victim.release();

      const figures = monitor.figures().get(name);
      assert.equal(figures.requests, 6);
      assert.equal(figures.granted, 4);
      assert.equal(figures.waited, 1);
      assert.ok(figures.waitMs > 0 && figures.maxWaitMs === figures.waitMs);
      assert.equal(figures.missed, 1);
      assert.equal(figures.stolen, 1);
      assert.equal(figures.aborted, 1);
      assert.equal(figures.failed, 0);
    } finally {
      monitor.stop();
    }
  });

  it('stops counting after stop()', async () => {
    const { locks, monitorContention } = api();
    const monitor = monitorContention();
    monitor.stop();
    await locks.request(uniq(), () => {});
    assert.equal(monitor.figures().size, 0);
  });
});
