'use strict';
// Reproduction (review of the per-realm install): a scope that one realm's
// copy of lib/ opened first (jest: an earlier test file that did not close
// it) is shared with every later copy on the thread, and its backend makes
// the errors: a later realm's request gets the first realm's
// QuotaExceededError (that realm's DOMException class, under jsdom) and,
// for a damaged scope, the first realm's Error. The README says a realm's
// errors are that realm's. Exits 1 while the defect is there.
//   node review/realm-errors.js
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { newRealm } = require('../test/fixtures/realm');

const PKG = path.join(__dirname, '..');

(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-review-'));
  // Each realm with a DOMException class of its own, as jsdom's per test file.
  const realm = () => {
    const r = newRealm();
    r.run("globalThis.DOMException = class DOMException extends Error { constructor (message, name) { super(message); this.name = name } }");
    r.load(path.join(PKG, 'lib', 'install.js'))(false);
    return r;
  };
  const earlier = realm();
  const later = realm();
  const first = await earlier.load(path.join(PKG, 'lib', 'index.js')).openLockManager('full', { dir, size: 8192 });
  const locks = await later.load(path.join(PKG, 'lib', 'index.js')).openLockManager('full', { dir, size: 8192 });
  let error;
  for (let i = 0; error === undefined; i++) {
    locks.request(`n${i}`, () => new Promise(() => {})).catch((e) => { error = e; });
    await new Promise((resolve) => setImmediate(resolve));
  }
  const reserved = await locks.request('-x', () => {}).catch((e) => e);
  const result = {
    reserved: reserved instanceof later.run('DOMException'),
    quota: error.name === 'QuotaExceededError' && error instanceof later.run('DOMException'),
  };
  await first.close();
  fs.rmSync(dir, { recursive: true, force: true });
  try {
    assert.deepEqual(result, { reserved: true, quota: true });
  } catch (e) {
    console.error(e.message);
    process.exit(1);
  }
  process.exit(0);
})();
