'use strict';
// What the polyfill's per-realm install (lib/install.js) and the errors it
// makes (lib/intrinsics.js) assume of the environment, each tried where it
// breaks, in a process of its own (what breaks may end it):
// - the realm's DOMException, adopted when the polyfill loads, is used for
//   every error after; a look-alike that passed the check at load but
//   throws for another name (or later) gives way to Node's for that error;
// - an environment's AbortSignal, whose getters are taken from its
//   prototype and checked once per request, may throw later: its error is
//   the request's, and nothing is thrown in an abort listener or the addon's
//   dispatcher;
// - globals read at load (DOMException, navigator) may be getters that
//   throw: the polyfill loads, with Node's DOMException, and leaves a
//   navigator it cannot read alone;
// - another installed copy of the package (another addon: another lock
//   manager) is to this copy's plain polyfill what a platform's
//   navigator.locks is: kept; the forced entry replaces it.
// (Other realms of the thread, a test runner's per-file registries, are in
// test/polyfill.test.js and test/runners.test.js.)
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { PKG } = require('./fixtures/util');
const { newRealm } = require('./fixtures/realm');

const POLYFILL = path.join(PKG, 'polyfill.js');
const FORCE = path.join(PKG, 'polyfill', 'force.js');

// Runs `body` (an async function body, with POLYFILL, FORCE, PKG,
// nodeDOMException() and hold(name) in scope) in a new node process; resolves with { code, stdout, stderr,
// result: what body returned, as JSON }.
function inProcess(body, env = {}) {
  // Node 24+ has a navigator.locks of its own, which the plain polyfill
  // keeps: these are tests of this package's, so the process starts
  // without Node's navigator.
  const code = `'use strict';
    delete globalThis.navigator;
    const POLYFILL = ${JSON.stringify(POLYFILL)}, FORCE = ${JSON.stringify(FORCE)}, PKG = ${JSON.stringify(PKG)};
    const nodeDOMException = () => { try { require('buffer').atob('~'); } catch (e) { return Object.getPrototypeOf(e).constructor; } };
    // Holds the lock name of navigator.locks; resolves, once granted, with
    // { held, release }.
    const hold = (name) => new Promise((granted) => {
      const held = navigator.locks.request(name, () => new Promise((release) => { granted({ held, release }); }));
    });
    (async () => { ${body} })().then((r) => { process.stdout.write(JSON.stringify(r)); });`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', code], { env: Object.assign({}, process.env, env), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s) => { stdout += s; });
    child.stderr.setEncoding('utf8').on('data', (s) => { stderr += s; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 15000);
    child.on('error', reject);
    child.on('close', (status, signal) => {
      clearTimeout(timer);
      let result;
      try {
        result = JSON.parse(stdout);
      } catch {}
      resolve({ code: status, signal, stdout, stderr, result });
    });
  });
}

function ok(r) {
  assert.equal(r.code, 0, `exit ${r.code} ${r.signal || ''}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`);
  return r.result;
}

describe('what the per-realm install assumes of the environment', function () {
  this.timeout(20000);

  it('a DOMException look-alike that throws for AbortError: a steal rejects the holder with Node\'s, and the process goes on', async function () {
    const r = await inProcess(`
      class LookAlike extends Error {
        constructor(message, name) {
          if (name !== 'NotSupportedError') throw new Error('look-alike: ' + name);
          super(message);
          this.name = name;
        }
      }
      globalThis.DOMException = LookAlike;
      require(POLYFILL);
      const reserved = await navigator.locks.request('-x', () => {}).catch((e) => e);
      const held = navigator.locks.request('s', () => new Promise(() => {})).catch((e) => e);
      await navigator.locks.request('s', { steal: true }, () => {});
      const stolen = await held;
      const { openLockManager } = require(PKG);
      const fs = require('fs');
      const dir = fs.mkdtempSync(require('path').join(require('os').tmpdir(), 'web-locks-env-'));
      const scope = await openLockManager('env', { dir });
      const waiting = scope.request('c', () => new Promise(() => {})).catch((e) => e);
      await scope.close();
      const closed = await waiting;
      fs.rmSync(dir, { recursive: true, force: true });
      return [reserved, stolen, closed].map((e) => ({ name: e.name, lookAlike: e instanceof LookAlike, node: e instanceof nodeDOMException() }));
    `);
    assert.deepEqual(ok(r), [
      { name: 'NotSupportedError', lookAlike: true, node: false },
      { name: 'AbortError', lookAlike: false, node: true },
      { name: 'AbortError', lookAlike: false, node: true },
    ]);
  });

  // A signal of an environment's AbortSignal (not Node's: the polyfill
  // reads its state through its prototype's getters) whose getters throw
  // once `broken` is set.
  const ENV_SIGNAL = `
    let broken = false;
    class EnvSignal extends EventTarget {
      get aborted() { if (broken) throw new Error('aborted getter'); return this._aborted === true; }
      get reason() { if (broken) throw new Error('reason getter'); return this._reason; }
    }
    globalThis.AbortSignal = EnvSignal;
    require(POLYFILL);
  `;

  it('an environment\'s signal whose reason getter throws when it aborts: the request rejects with that error', async function () {
    const r = await inProcess(`${ENV_SIGNAL}
      const { held, release } = await hold('a');
      const signal = new EnvSignal();
      const waiting = navigator.locks.request('a', { signal }, () => 'granted').catch((e) => e);
      broken = true;
      signal.dispatchEvent(new Event('abort'));
      const error = await waiting;
      release();
      await held;
      return { message: error.message, free: (await navigator.locks.query()).held.length === 0 };
    `);
    assert.deepEqual(ok(r), { message: 'reason getter', free: true });
  });

  it('an environment\'s signal whose aborted getter throws when the grant arrives: the request rejects with that error, the lock is released', async function () {
    const r = await inProcess(`${ENV_SIGNAL}
      const { held, release } = await hold('b');
      const signal = new EnvSignal();
      let ran = false;
      const waiting = navigator.locks.request('b', { signal }, () => { ran = true; }).catch((e) => e);
      broken = true;
      release();
      await held;
      const error = await waiting;
      return { message: error.message, ran, free: (await navigator.locks.query()).held.length === 0 };
    `);
    assert.deepEqual(ok(r), { message: 'aborted getter', ran: false, free: true });
  });

  it('an environment\'s signal whose removeEventListener throws: the request is granted, the process goes on', async function () {
    const r = await inProcess(`${ENV_SIGNAL}
      EnvSignal.prototype.removeEventListener = () => { throw new Error('removeEventListener'); };
      const { held, release } = await hold('c');
      const waiting = navigator.locks.request('c', { signal: new EnvSignal() }, () => 'granted');
      release();
      await held;
      return await waiting;
    `);
    assert.equal(ok(r), 'granted');
  });

  // After an 'abort' event dispatched on a signal that is not aborted, the
  // listener is added again in a microtask, through the signal's own
  // addEventListener and `aborted`: what they throw there is the request's
  // rejection, not an uncaught exception.
  it('a signal whose addEventListener throws once an abort event was dispatched on it: the request rejects with that error, the process goes on', async function () {
    const r = await inProcess(`
      require(POLYFILL);
      const { held, release } = await hold('d');
      const controller = new AbortController();
      const waiting = navigator.locks.request('d', { signal: controller.signal }, () => 'granted').catch((e) => e);
      controller.signal.addEventListener = () => { throw new Error('addEventListener'); };
      controller.signal.dispatchEvent(new Event('abort'));
      const error = await waiting;
      release();
      await held;
      return { message: error.message, free: (await navigator.locks.query()).held.length === 0 };
    `);
    assert.deepEqual(ok(r), { message: 'addEventListener', free: true });
  });

  it('an environment\'s signal whose aborted getter throws once an abort event was dispatched on it: the request rejects with that error', async function () {
    const r = await inProcess(`${ENV_SIGNAL}
      const { held, release } = await hold('e');
      const signal = new EnvSignal();
      const waiting = navigator.locks.request('e', { signal }, () => 'granted').catch((e) => e);
      signal.dispatchEvent(new Event('abort'));
      broken = true;
      const error = await waiting;
      release();
      await held;
      return error.message;
    `);
    assert.equal(ok(r), 'aborted getter');
  });

  it('a test\'s fake queueMicrotask installed before the package loads (jest\'s fake timers): after a dispatched abort event, a real abort still aborts the request', async function () {
    const r = await inProcess(`
      globalThis.queueMicrotask = () => {}; // holds every microtask until the test ticks
      require(POLYFILL);
      const { held, release } = await hold('g');
      const controller = new AbortController();
      const waiting = navigator.locks.request('g', { signal: controller.signal }, () => 'granted').catch((e) => e);
      controller.signal.dispatchEvent(new Event('abort'));
      await new Promise((resolve) => setTimeout(resolve, 10));
      controller.abort('real');
      const outcome = await Promise.race([waiting, new Promise((resolve) => setTimeout(() => resolve('still waiting'), 2000))]);
      release();
      await held;
      return outcome;
    `);
    assert.equal(ok(r), 'real');
  });

  it('a signal whose own aborted property says true while it is not aborted: the request rejects, and the thread is not held in endless microtasks', async function () {
    const r = await inProcess(`
      require(POLYFILL);
      const { held, release } = await hold('f');
      const controller = new AbortController();
      Object.defineProperty(controller.signal, 'aborted', { value: true });
      const waiting = navigator.locks.request('f', { signal: controller.signal }, () => 'granted').then(() => 'granted', (e) => 'rejected with ' + String(e));
      const timer = await new Promise((resolve) => setTimeout(() => resolve('ran'), 10));
      const outcome = await waiting;
      release();
      await held;
      return { timer, outcome };
    `);
    assert.deepEqual(ok(r), { timer: 'ran', outcome: 'rejected with undefined' });
  });

  it('DOMException and navigator getters that throw at load: the polyfill loads, Node\'s DOMException, navigator left alone', async function () {
    const r = await inProcess(`
      Object.defineProperty(globalThis, 'DOMException', { get() { throw new Error('DOMException getter'); }, configurable: true });
      Object.defineProperty(globalThis, 'navigator', { get() { throw new Error('navigator getter'); }, configurable: true });
      const { installed } = require(POLYFILL);
      const { locks } = require(PKG);
      const error = await locks.request('-x', () => {}).catch((e) => e);
      return { installed, name: error.name, node: error instanceof nodeDOMException() };
    `);
    assert.deepEqual(ok(r), { installed: false, name: 'NotSupportedError', node: true });
  });

  it('the package loaded again and again in the thread (a fresh module registry each time) listens for the process\'s exit once', async function () {
    if (process.platform !== 'linux') this.skip();
    const r = await inProcess(`
      const fs = require('fs');
      const path = require('path');
      const dir = fs.mkdtempSync(path.join(require('os').tmpdir(), 'web-locks-env-'));
      const warnings = [];
      process.on('warning', (w) => warnings.push(w.name));
      const before = process.listenerCount('exit');
      for (let i = 0; i < 12; i++) {
        for (const file of Object.keys(require.cache)) if (file.startsWith(path.join(PKG, 'lib'))) delete require.cache[file];
        await require(PKG).openLockManager('env', { dir });
      }
      const listeners = process.listenerCount('exit') - before;
      await new Promise((resolve) => setImmediate(resolve));
      fs.rmSync(dir, { recursive: true, force: true });
      return { listeners, warnings };
    `);
    assert.deepEqual(ok(r), { listeners: 1, warnings: [] });
  });

  it('a scope opened first through the package loaded in another realm (jest: an earlier test file): query() gives this realm\'s arrays and objects', async function () {
    if (process.platform !== 'linux') this.skip();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-env-'));
    const earlier = newRealm().load(path.join(PKG, 'lib', 'index.js'));
    const later = newRealm();
    const { openLockManager } = later.load(path.join(PKG, 'lib', 'index.js'));
    const first = await earlier.openLockManager('realms', { dir });
    try {
      const locks = await openLockManager('realms', { dir });
      const snapshot = await locks.request('r', () => locks.query());
      const [Array, Object] = [later.run('Array'), later.run('Object')];
      assert.ok(snapshot.held instanceof Array && snapshot.pending instanceof Array);
      assert.equal(Reflect.getPrototypeOf(snapshot.held[0]), Object.prototype);
      assert.equal(snapshot.held[0].name, 'r');
    } finally {
      await first.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a scope opened first through the package loaded in another realm: its errors are this realm\'s (QuotaExceededError, NotSupportedError), and closing through either realm drops both realms\' requests', async function () {
    if (process.platform !== 'linux') this.skip();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-env-'));
    // Each realm with a DOMException of its own, as jsdom's in each test
    // file, which its polyfill adopts.
    const realm = () => {
      const r = newRealm();
      r.run('globalThis.DOMException = class DOMException extends Error { constructor (message, name) { super(message); this.name = name } }');
      r.load(path.join(PKG, 'lib', 'install.js'))(false);
      return r;
    };
    const earlier = realm();
    const later = realm();
    const first = await earlier.load(path.join(PKG, 'lib', 'index.js')).openLockManager('full', { dir, size: 8192 });
    try {
      const locks = await later.load(path.join(PKG, 'lib', 'index.js')).openLockManager('full', { dir, size: 8192 });
      const LaterDOMException = later.run('DOMException');
      const early = first.request('held-early', () => new Promise(() => {})).catch((e) => e);
      let quota;
      const waiting = [];
      for (let i = 0; quota === undefined && i < 10000; i++) {
        waiting.push(locks.request(`n${i}`, () => new Promise(() => {})).catch((e) => { quota = quota || e; return e; }));
        await new Promise((resolve) => setImmediate(resolve));
      }
      assert.ok(quota instanceof LaterDOMException, 'a full scope rejects with this realm\'s DOMException');
      assert.equal(quota.name, 'QuotaExceededError');
      const reserved = await locks.request('-x', () => {}).catch((e) => e);
      assert.ok(reserved instanceof LaterDOMException);
      await first.close();
      const dropped = await Promise.all([early, ...waiting.slice(0, 3)]);
      assert.ok(dropped[0] instanceof earlier.run('DOMException') && dropped[0].name === 'AbortError');
      for (const e of dropped.slice(1)) assert.ok(e instanceof LaterDOMException && e.name === 'AbortError');
      const closed = await locks.request('after', () => {}).catch((e) => e);
      assert.ok(closed instanceof LaterDOMException && closed.name === 'InvalidStateError');
    } finally {
      await first.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a scope opened through the package loaded in many realms (jest: one per test file) keeps none of the realms that are gone alive', async function () {
    // Bun has no V8 flags to expose gc with.
    if (process.platform !== 'linux' || process.versions.bun) this.skip();
    const r = await inProcess(`
      require('v8').setFlagsFromString('--expose-gc');
      const gc = require('vm').runInNewContext('gc');
      const { newRealm } = require(${JSON.stringify(path.join(__dirname, 'fixtures', 'realm.js'))});
      const index = require('path').join(PKG, 'lib', 'index.js');
      const dir = require('fs').mkdtempSync(require('path').join(require('os').tmpdir(), 'web-locks-env-'));
      const kept = await newRealm().load(index).openLockManager('realms', { dir });
      const gone = [];
      for (let i = 0; i < 10; i++) {
        const realm = newRealm();
        const locks = await realm.load(index).openLockManager('realms', { dir });
        await locks.request('x', () => {});
        gone.push(new WeakRef(realm.context));
      }
      for (let i = 0; i < 5; i++) {
        await new Promise((resolve) => setImmediate(resolve));
        gc();
      }
      // All but the newest, which the thread's last work may still reach: what
      // stays does not grow with the realms (before, every one stayed).
      const alive = gone.slice(0, -1).filter((ref) => ref.deref() !== undefined).length;
      await kept.close();
      require('fs').rmSync(dir, { recursive: true, force: true });
      return { alive };
    `);
    assert.deepEqual(ok(r), { alive: 0 });
  });

  describe('another installed copy of the package', function () {
    let copy;

    before(function () {
      // What npm installs (package.json "files") and the addon that loads
      // here, in a directory of its own: another addon, another manager.
      copy = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-copy-'));
      const manifest = JSON.parse(fs.readFileSync(path.join(PKG, 'package.json'), 'utf8'));
      for (const entry of ['package.json', ...manifest.files]) {
        if (fs.existsSync(path.join(PKG, entry))) fs.cpSync(path.join(PKG, entry), path.join(copy, entry), { recursive: true });
      }
      const addon = require('node-gyp-build').resolve(PKG);
      fs.mkdirSync(path.dirname(path.join(copy, path.relative(PKG, addon))), { recursive: true });
      fs.cpSync(addon, path.join(copy, path.relative(PKG, addon)));
      // Its dependency (node-gyp-build) where this test finds it.
      fs.symlinkSync(path.dirname(path.dirname(require.resolve('node-gyp-build/package.json'))), path.join(copy, 'node_modules'));
    });

    after(function () {
      if (copy) fs.rmSync(copy, { recursive: true, force: true });
    });

    it('keeps the navigator.locks the other copy installed, as a platform\'s; its forced entry replaces it', async function () {
      const r = await inProcess(`
        delete globalThis.navigator;
        const first = require(POLYFILL);
        const a = require(PKG);
        const second = require(require('path').join(process.env.COPY, 'polyfill.js'));
        const b = require(process.env.COPY);
        const kept = navigator.locks === a.locks && globalThis.LockManager === a.LockManager;
        // Two managers: a lock of one does not exclude the other's.
        let inner;
        await a.locks.request('x', () => b.locks.request('x', { ifAvailable: true }, (lock) => { inner = lock !== null; }));
        const forced = require(require('path').join(process.env.COPY, 'polyfill', 'force.js'));
        return { first: first.installed, second: second.installed, kept, separate: inner,
          forced: forced.installed && navigator.locks === b.locks && globalThis.LockManager === b.LockManager };
      `, { COPY: copy });
      assert.deepEqual(ok(r), { first: true, second: false, kept: true, separate: true, forced: true });
    });
  });
});
