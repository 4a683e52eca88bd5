'use strict';
// The ES module entry points (the "import" conditions of the exports map) are
// thin wrappers over the CommonJS modules: the same objects, one lock manager
// state per thread, whichever way the package is loaded.
const assert = require('node:assert/strict');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const { Worker } = require('node:worker_threads');
const { PKG, api, uniq } = require('./fixtures/util');

const pkgJson = require(path.join(PKG, 'package.json'));

// The file an exports-map entry gives for `condition` ('import' or 'require').
function entry(subpath, condition) {
  const target = pkgJson.exports[subpath][condition];
  return path.join(PKG, typeof target === 'string' ? target : target.default);
}

describe('ES modules', function () {
  it('the exports map has import and require entries, with types, for ".", "./polyfill" and "./polyfill/force"', function () {
    for (const subpath of ['.', './polyfill', './polyfill/force']) {
      for (const condition of ['import', 'require']) {
        const target = pkgJson.exports[subpath][condition];
        assert.equal(typeof target, 'object', `${subpath} ${condition}`);
        assert.match(target.types, condition === 'import' ? /\.d\.mts$/ : /\.d\.ts$/);
        assert.equal(Object.keys(target)[0], 'types', 'types comes first');
      }
      assert.match(entry(subpath, 'import'), /\.mjs$/);
      assert.match(entry(subpath, 'require'), /\.js$/);
    }
  });

  it('import gives the very objects require() gives: every named export, and module.exports as default', async function () {
    const cjs = require(entry('.', 'require'));
    assert.equal(cjs, api());
    const esm = await import(pathToFileURL(entry('.', 'import')).href);
    const named = Object.keys(esm).filter((k) => k !== 'default').sort();
    assert.deepEqual(named, Object.keys(cjs).sort(), 'lib/index.mjs re-exports every export of lib/index.js');
    for (const key of named) assert.equal(esm[key], cjs[key], key);
    assert.equal(esm.default, cjs);
  });

  it('a lock taken through import is held for require() users too (one manager state)', async function () {
    const esm = await import(pathToFileURL(entry('.', 'import')).href);
    const name = uniq('esm');
    const seen = await esm.locks.request(name, (lock) => {
      assert.ok(lock instanceof api().Lock);
      return api().locks.request(name, { ifAvailable: true }, (other) => other);
    });
    assert.equal(seen, null);
  });

  // Imports entry subpath (and the package) in a fresh worker, and requires
  // it there too.
  async function polyfillInWorker(subpath, name) {
    const worker = new Worker(`
      const { parentPort, workerData } = require('node:worker_threads');
      (async () => {
        const esm = await import(workerData.polyfillImport);
        const cjs = require(workerData.polyfillRequire);
        const { locks } = await import(workerData.indexImport);
        return {
          named: Object.keys(esm).filter((k) => k !== 'default').sort(),
          sameDefault: esm.default === cjs,
          sameInstalled: esm.installed === cjs.installed,
          installed: esm.installed,
          ours: navigator.locks === locks,
          works: await navigator.locks.request(workerData.name, (l) => l.name),
        };
      })().then((r) => parentPort.postMessage(r), (e) => parentPort.postMessage({ error: String(e && e.stack || e) }));
    `, {
      eval: true,
      workerData: {
        name,
        polyfillImport: pathToFileURL(entry(subpath, 'import')).href,
        polyfillRequire: entry(subpath, 'require'),
        indexImport: pathToFileURL(entry('.', 'import')).href,
      },
    });
    try {
      return await new Promise((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      });
    } finally {
      await worker.terminate();
    }
  }

  it('import of the polyfill gives the same module as require(), with { installed } and a default (fresh worker)', async function () {
    const { installed, ours, ...r } = await polyfillInWorker('./polyfill', 'esm-polyfill');
    assert.deepEqual({ ...r, navigatorLocks: ours || !installed },
      { named: ['installed'], sameDefault: true, sameInstalled: true, navigatorLocks: true, works: 'esm-polyfill' });
  });

  it('import of the forcing polyfill gives the same module as require(), with { installed } and a default (fresh worker)', async function () {
    const { installed, ours, ...r } = await polyfillInWorker('./polyfill/force', 'esm-force');
    assert.deepEqual({ ...r, navigatorLocks: ours && installed },
      { named: ['installed'], sameDefault: true, sameInstalled: true, navigatorLocks: true, works: 'esm-force' });
  });
});
