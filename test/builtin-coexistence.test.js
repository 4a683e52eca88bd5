'use strict';
// Node 24+ has its own navigator.locks. This package's lock manager and the
// built-in one are separate: a lock held in one never blocks, is never stolen
// by, and never shows up in the query() of the other, and loading the polyfill
// leaves the built-in in place. Skipped on Node < 24, which has no built-in.
const assert = require('node:assert/strict');
const { Worker } = require('node:worker_threads');
const path = require('node:path');
const { PKG, api, uniq, hold, deferred } = require('./fixtures/util');

// The polyfill's CommonJS entry (what require('web-locks/polyfill') loads).
const POLYFILL = path.join(PKG, 'polyfill.js');

// The built-in navigator.locks, or undefined (Node < 24, or a navigator.locks
// that is this package's, installed by the polyfill on an older Node).
function builtinLocks() {
  const nav = globalThis.navigator;
  const candidate = nav && nav.locks;
  if (!candidate || candidate === api().locks || candidate instanceof api().LockManager) return undefined;
  return candidate;
}

// Holds `name` in the built-in manager until release() is called.
function holdBuiltin(builtin, name, options = {}) {
  const granted = deferred();
  const gate = deferred();
  const done = builtin.request(name, options, (lock) => {
    granted.resolve(lock);
    return gate.promise;
  });
  done.catch(() => {});
  return { granted: granted.promise, done, release: (value) => gate.resolve(value) };
}

const only = (snapshot, names) => ({
  held: snapshot.held.filter((i) => names.includes(i.name)).map((i) => `${i.name}:${i.mode}`).sort(),
  pending: snapshot.pending.filter((i) => names.includes(i.name)).map((i) => `${i.name}:${i.mode}`).sort(),
});

describe('side by side with Node\'s built-in navigator.locks (Node >= 24)', function () {
  let builtin;
  before(function () {
    builtin = builtinLocks();
    if (builtin) return;
    // Node 24 and later ship navigator.locks: its absence there is a change
    // to look at, not a reason to skip.
    assert.ok(Number(process.versions.node.split('.')[0]) < 24, 'Node >= 24 without a built-in navigator.locks');
    this.skip();
  });

  it('are different objects of different classes', async function () {
    const { locks, LockManager, Lock } = api();
    assert.notEqual(builtin, locks);
    assert.ok(!(builtin instanceof LockManager));
    assert.notEqual(Object.getPrototypeOf(builtin), LockManager.prototype);
    const name = uniq('classes');
    const theirs = await builtin.request(name, (lock) => lock);
    const ours = await locks.request(name, (lock) => lock);
    assert.ok(ours instanceof Lock);
    assert.ok(!(theirs instanceof Lock));
    assert.ok(!(ours instanceof Object.getPrototypeOf(theirs).constructor));
  });

  it('an exclusive lock held in web-locks does not block the built-in on the same name', async function () {
    const { locks } = api();
    const name = uniq('ours-held');
    const h = hold(name);
    await h.granted;
    // Really held on our side:
    assert.equal(await locks.request(name, { ifAvailable: true }, (lock) => lock), null);
    // ...and free on the built-in's, both for ifAvailable and a plain request.
    const lock = await builtin.request(name, { ifAvailable: true }, (l) => l && { name: l.name, mode: l.mode });
    assert.deepEqual(lock, { name, mode: 'exclusive' });
    assert.equal(await builtin.request(name, () => 'granted'), 'granted');
    h.release('ours');
    assert.equal(await h.done, 'ours');
  });

  it('an exclusive lock held in the built-in does not block web-locks on the same name', async function () {
    const { locks } = api();
    const name = uniq('theirs-held');
    const h = holdBuiltin(builtin, name);
    await h.granted;
    assert.equal(await builtin.request(name, { ifAvailable: true }, (lock) => lock), null);
    const lock = await locks.request(name, { ifAvailable: true }, (l) => l && { name: l.name, mode: l.mode });
    assert.deepEqual(lock, { name, mode: 'exclusive' });
    assert.equal(await locks.request(name, () => 'granted'), 'granted');
    h.release('theirs');
    assert.equal(await h.done, 'theirs');
  });

  it('a steal in web-locks does not break a built-in holder, and a steal in the built-in does not break ours', async function () {
    const { locks } = api();
    const name = uniq('steal');
    const theirs = holdBuiltin(builtin, name);
    const ours = hold(name);
    await Promise.all([theirs.granted, ours.granted]);

    // Each side steals from itself; only its own holder is broken.
    assert.equal(await locks.request(name, { steal: true }, () => 'stole ours'), 'stole ours');
    await assert.rejects(ours.done, (e) => e instanceof DOMException && e.name === 'AbortError');
    const stillTheirs = await builtin.query();
    assert.deepEqual(only(stillTheirs, [name]).held, [`${name}:exclusive`]);

    const ours2 = hold(name);
    await ours2.granted;
    assert.equal(await builtin.request(name, { steal: true }, () => 'stole theirs'), 'stole theirs');
    await assert.rejects(theirs.done, (e) => e && e.name === 'AbortError');
    assert.deepEqual(only(await locks.query(), [name]).held, [`${name}:exclusive`]);
    ours2.release('ok');
    assert.equal(await ours2.done, 'ok');
  });

  it('each query() shows only its own manager\'s held locks and pending requests', async function () {
    const { locks } = api();
    const a = uniq('ours-only');
    const b = uniq('theirs-only');
    const names = [a, b];

    const oursHeld = hold(a);
    await oursHeld.granted;
    const oursPending = hold(a, { mode: 'shared' });
    const theirsHeld = holdBuiltin(builtin, b, { mode: 'shared' });
    await theirsHeld.granted;
    const theirsPending = holdBuiltin(builtin, b);

    assert.deepEqual(only(await locks.query(), names), { held: [`${a}:exclusive`], pending: [`${a}:shared`] });
    assert.deepEqual(only(await builtin.query(), names), { held: [`${b}:shared`], pending: [`${b}:exclusive`] });

    oursHeld.release();
    await oursPending.granted;
    oursPending.release();
    theirsHeld.release();
    await theirsPending.granted;
    theirsPending.release();
    await Promise.all([oursHeld.done, oursPending.done, theirsHeld.done, theirsPending.done]);
    assert.deepEqual(only(await locks.query(), names), { held: [], pending: [] });
    assert.deepEqual(only(await builtin.query(), names), { held: [], pending: [] });
  });

  it('across threads: a worker holding a name in web-locks does not block the built-in in this thread', async function () {
    const { locks } = api();
    const name = uniq('worker');
    const worker = new Worker(`
      const { parentPort, workerData } = require('node:worker_threads');
      const { locks } = require(workerData.pkg);
      locks.request(workerData.name, () => new Promise((resolve) => {
        parentPort.postMessage('held');
        parentPort.once('message', resolve);
      })).then(() => parentPort.postMessage('released'));
    `, { eval: true, workerData: { pkg: PKG, name } });
    try {
      const messages = [];
      const next = () => new Promise((resolve, reject) => {
        if (messages.length) return resolve(messages.shift());
        worker.once('message', resolve);
        worker.once('error', reject);
      });
      assert.equal(await next(), 'held');
      assert.equal(await locks.request(name, { ifAvailable: true }, (l) => l), null);
      assert.equal(await builtin.request(name, { ifAvailable: true }, (l) => l && l.name), name);
      worker.postMessage('release');
      assert.equal(await next(), 'released');
    } finally {
      await worker.terminate();
    }
  });

  it('the polyfill keeps the built-in navigator.locks (installed === false) and both keep working', async function () {
    const worker = new Worker(`
      const { parentPort, workerData } = require('node:worker_threads');
      (async () => {
        const before = navigator.locks;
        const polyfill = require(workerData.polyfill);
        const { locks } = require(workerData.pkg);
        const name = 'polyfill-coexistence';
        const crossed = await locks.request(name, () =>
          navigator.locks.request(name, { ifAvailable: true }, (l) => l !== null));
        return {
          installed: polyfill.installed,
          same: navigator.locks === before,
          ours: navigator.locks === locks,
          crossed,
        };
      })().then((r) => parentPort.postMessage(r), (e) => parentPort.postMessage({ error: String(e && e.stack || e) }));
    `, { eval: true, workerData: { pkg: PKG, polyfill: POLYFILL } });
    try {
      const r = await new Promise((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      });
      assert.deepEqual(r, { installed: false, same: true, ours: false, crossed: true });
    } finally {
      await worker.terminate();
    }
  });
});
