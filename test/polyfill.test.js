'use strict';
// 'web-locks/polyfill' installs navigator.locks (creating globalThis.navigator
// when there is none) and globalThis.LockManager / globalThis.Lock where they
// are missing, never replacing an existing navigator.locks (Node >= 24 has a
// built-in one); it exports { installed }.
const assert = require('node:assert/strict');
const path = require('node:path');
const { PKG, api, uniq, stateOf } = require('./fixtures/util');
const { Agent, terminateAll } = require('./fixtures/agent');

// The file behind the package's "./polyfill" export.
const pkgJson = require(path.join(PKG, 'package.json'));
function target(entry) {
  if (typeof entry === 'string') return entry;
  for (const condition of ['node', 'require', 'default']) {
    if (entry[condition] !== undefined) {
      const found = target(entry[condition]);
      if (found) return found;
    }
  }
  return undefined;
}
const POLYFILL = path.join(PKG, target(pkgJson.exports['./polyfill']));
const FORCE = path.join(PKG, target(pkgJson.exports['./polyfill/force']));

// A worker with fresh globals: `setup` runs first, then the polyfill is
// required; the worker posts back what `report` returns.
function inFreshWorker(setup, report, data = {}) {
  const code = `
    'use strict';
    const { parentPort, workerData } = require('node:worker_threads');
    (async () => {
      ${setup}
      const polyfill = require(workerData.force ? workerData.forced : workerData.polyfill);
      const pkg = require(workerData.pkg);
      parentPort.postMessage(await (async () => { ${report} })());
    })().catch((e) => parentPort.postMessage({ error: String(e && e.stack || e) }));
  `;
  const agent = new Agent(code, Object.assign({ polyfill: POLYFILL, forced: FORCE }, data));
  return agent.message(() => true, 'report').then((m) => {
    if (m && m.error) throw new Error(`in worker: ${m.error}`);
    return m;
  });
}

describe('polyfill', function () {
  afterEach(terminateAll);

  it('the "./polyfill" export and the self-reference web-locks/polyfill resolve to the same file', function () {
    if (PKG !== path.resolve(__dirname, '..')) this.skip();
    assert.equal(require.resolve('web-locks/polyfill'), POLYFILL);
  });

  describe('in this thread', function () {
    let prior;
    let polyfill;
    before(function () {
      prior = {
        navigator: globalThis.navigator,
        locks: globalThis.navigator && globalThis.navigator.locks,
        LockManager: globalThis.LockManager,
        Lock: globalThis.Lock,
      };
      polyfill = require(POLYFILL);
    });

    it('exports { installed } as a boolean, and navigator.locks exists afterwards', function () {
      assert.equal(typeof polyfill.installed, 'boolean');
      assert.equal(typeof globalThis.navigator, 'object');
      assert.ok(globalThis.navigator.locks);
      assert.equal(typeof globalThis.navigator.locks.request, 'function');
      assert.equal(typeof globalThis.navigator.locks.query, 'function');
    });

    it('installs this package\'s locks when there was no navigator.locks, and keeps a built-in one otherwise', function () {
      if (prior.locks) {
        assert.equal(polyfill.installed, false);
        assert.equal(globalThis.navigator.locks, prior.locks);
      } else {
        assert.equal(polyfill.installed, true);
        assert.equal(globalThis.navigator.locks, api().locks);
        if (prior.navigator) assert.equal(globalThis.navigator, prior.navigator);
      }
    });

    it('defines globalThis.LockManager and globalThis.Lock where they were missing, and keeps existing ones', function () {
      const { LockManager, Lock } = api();
      if (prior.locks) {
        // The platform's navigator.locks stays, so its globals are left alone.
        assert.equal(globalThis.LockManager, prior.LockManager);
        assert.equal(globalThis.Lock, prior.Lock);
      } else {
        assert.equal(globalThis.LockManager, prior.LockManager || LockManager);
        assert.equal(globalThis.Lock, prior.Lock || Lock);
      }
    });

    it('navigator.locks is an instance of globalThis.LockManager when that global exists', function () {
      if (typeof globalThis.LockManager !== 'function') this.skip();
      assert.ok(globalThis.navigator.locks instanceof globalThis.LockManager);
    });

    it('navigator.locks works', async function () {
      const name = uniq('polyfill');
      assert.equal(await globalThis.navigator.locks.request(name, (l) => l.name), name);
    });

    it('on Node < 24 (no built-in Web Locks) it installs', function () {
      const major = Number(process.versions.node.split('.')[0]);
      if (major >= 24 || prior.locks) this.skip();
      assert.equal(polyfill.installed, true);
    });
  });

  describe('in a fresh worker', function () {
    it('creates navigator when there is none, with locks === require(pkg).locks, and defines LockManager and Lock', async function () {
      const r = await inFreshWorker(`
        delete globalThis.navigator;
        delete globalThis.LockManager;
        delete globalThis.Lock;
        const hadNavigator = typeof globalThis.navigator !== 'undefined';
      `, `
        return {
          hadNavigator,
          installed: polyfill.installed,
          navigatorType: typeof navigator,
          same: navigator.locks === pkg.locks,
          lockManager: globalThis.LockManager === pkg.LockManager,
          lock: globalThis.Lock === pkg.Lock,
          isManager: navigator.locks instanceof pkg.LockManager,
        };
      `);
      if (r.hadNavigator) this.skip(); // navigator could not be removed on this Node
      assert.deepEqual(r, {
        hadNavigator: false, installed: true, navigatorType: 'object', same: true, lockManager: true, lock: true, isManager: true,
      });
    });

    it('adds locks to an existing navigator object without replacing the object or its other properties', async function () {
      const r = await inFreshWorker(`
        const nav = { userAgent: 'test-agent' };
        Object.defineProperty(globalThis, 'navigator', { value: nav, configurable: true, writable: true, enumerable: true });
      `, `
        return {
          installed: polyfill.installed,
          sameObject: navigator === nav,
          userAgent: navigator.userAgent,
          same: navigator.locks === pkg.locks,
        };
      `);
      assert.deepEqual(r, { installed: true, sameObject: true, userAgent: 'test-agent', same: true });
    });

    it('installs where navigator.locks is null, as a DOM environment\'s getter may say (happy-dom)', async function () {
      const r = await inFreshWorker(`
        class Navigator { get locks() { return null; } }
        Object.defineProperty(globalThis, 'navigator', { value: new Navigator(), configurable: true, writable: true });
      `, `
        return {
          installed: polyfill.installed,
          same: navigator.locks === pkg.locks,
          granted: await navigator.locks.request('happy', (lock) => lock.name),
        };
      `);
      assert.deepEqual(r, { installed: true, same: true, granted: 'happy' });
    });

    it('never replaces an existing navigator.locks', async function () {
      const r = await inFreshWorker(`
        const existing = { request() { return 'existing'; } };
        Object.defineProperty(globalThis, 'navigator', { value: { locks: existing }, configurable: true, writable: true });
      `, `
        return { installed: polyfill.installed, kept: navigator.locks === existing, calls: navigator.locks.request() };
      `);
      assert.deepEqual(r, { installed: false, kept: true, calls: 'existing' });
    });

    it('keeps existing globalThis.LockManager and globalThis.Lock', async function () {
      const r = await inFreshWorker(`
        delete globalThis.navigator;
        globalThis.LockManager = 'mine';
        globalThis.Lock = 'mine too';
      `, `
        return { LockManager: globalThis.LockManager, Lock: globalThis.Lock, same: navigator.locks === pkg.locks };
      `);
      assert.deepEqual(r, { LockManager: 'mine', Lock: 'mine too', same: true });
    });

    it('replaces what another copy of the package installed (a per-file module registry), with its globals', async function () {
      const r = await inFreshWorker(`
        delete globalThis.navigator;
      `, `
        const first = { locks: navigator.locks, Lock: globalThis.Lock };
        for (const file of Object.keys(require.cache)) {
          if (file.startsWith(workerData.lib) || file === workerData.polyfill) delete require.cache[file];
        }
        const again = require(workerData.polyfill);
        const copy = require(workerData.pkg);
        let instance;
        await navigator.locks.request('copy', (lock) => { instance = lock instanceof globalThis.Lock; });
        return {
          installed: again.installed,
          fresh: copy.locks !== first.locks && navigator.locks === copy.locks,
          globals: globalThis.LockManager === copy.LockManager && globalThis.Lock === copy.Lock && first.Lock !== copy.Lock,
          instance,
        };
      `, { lib: path.join(PKG, 'lib') + path.sep });
      assert.deepEqual(r, { installed: true, fresh: true, globals: true, instance: true });
    });

    it('makes its errors with the DOMException global found when it loads, even once that global is replaced', async function () {
      const r = await inFreshWorker(`
        delete globalThis.navigator;
        class RealmDOMException extends Error {
          constructor(message, name) { super(message); this.name = name; }
        }
        globalThis.DOMException = RealmDOMException;
      `, `
        const Realm = globalThis.DOMException;
        globalThis.DOMException = function Replaced() { throw new Error('not this one'); };
        const reserved = await navigator.locks.request('-x', () => {}).catch((e) => e);
        const stolen = navigator.locks.request('s', () => new Promise(() => {})).catch((e) => e);
        await navigator.locks.request('s', { steal: true }, () => {});
        const abort = await stolen;
        return [reserved, abort].map((e) => ({ realm: e instanceof Realm, name: e.name }));
      `);
      assert.deepEqual(r, [{ realm: true, name: 'NotSupportedError' }, { realm: true, name: 'AbortError' }]);
    });

    it('web-locks/polyfill/force replaces a platform\'s navigator.locks, and LockManager and Lock with it', async function () {
      const r = await inFreshWorker(`
        class PlatformLockManager { request() { return 'platform'; } }
        class Navigator { get locks() { return platformLocks; } }
        const platformLocks = new PlatformLockManager();
        globalThis.LockManager = PlatformLockManager;
        Object.defineProperty(globalThis, 'navigator', { value: new Navigator(), configurable: true, writable: true });
      `, `
        let instance;
        await navigator.locks.request('forced', (lock) => { instance = lock instanceof Lock; });
        return {
          installed: polyfill.installed,
          ours: navigator.locks === pkg.locks && navigator.locks instanceof LockManager,
          globals: LockManager === pkg.LockManager && Lock === pkg.Lock,
          instance,
        };
      `, { force: true });
      assert.deepEqual(r, { installed: true, ours: true, globals: true, instance: true });
    });

    it('the worker\'s navigator.locks shares the process\'s lock manager with the main thread', async function () {
      const name = uniq('polyfill-worker');
      const { locks } = api();
      let release;
      const gate = new Promise((r) => { release = r; });
      const held = locks.request(name, () => gate);
      const r = await inFreshWorker(`
        delete globalThis.navigator;
      `, `
        const got = await navigator.locks.request(workerData.name, { ifAvailable: true }, (l) => l);
        const snap = await navigator.locks.query();
        return { got, held: snap.held.filter((i) => i.name === workerData.name).length };
      `, { name });
      assert.deepEqual(r, { got: null, held: 1 });
      release();
      await held;
      assert.deepEqual(await stateOf(name), { held: [], pending: [] });
    });
  });
});
