'use strict';
// The options of openLockManager (this package's own, not one of the spec's
// dictionaries, whose unknown members WebIDL ignores): a key that is no
// option of the manager asked for rejects with a TypeError naming it,
// before anything is opened or connected.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { api, scopeName } = require('./fixtures/util');

// A server that is never reached: an option check that passed would
// reject with a connection error instead.
const NOWHERE = 'postgres://nobody@127.0.0.1:1/nothing';

describe('openLockManager\'s options', function () {
  let dir;

  before(function () {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-options-'));
  });

  after(function () {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  function rejectsNaming(promise, key) {
    return assert.rejects(promise, (error) => {
      assert.ok(error instanceof TypeError, `${error}`);
      assert.match(error.message, new RegExp(`'${key}' is not an option of`));
      return true;
    });
  }

  it('options given as a function are read as an object\'s: its postgres option asks for a PostgreSQL manager', async function () {
    const { openLockManager } = api();
    const options = Object.assign(() => {}, { postgres: NOWHERE, keepalive: 1000 });
    await assert.rejects(openLockManager(scopeName('options'), options), (error) => !(error instanceof TypeError) && /ECONNREFUSED|connect/.test(`${error.code} ${error.message}`));
  });

  it('a misspelt option of the machine-wide manager (dri for dir) rejects with a TypeError naming it, and opens nothing', async function () {
    const { openLockManager } = api();
    const scope = scopeName('options');
    await rejectsNaming(openLockManager(scope, { dri: dir }), 'dri');
    await rejectsNaming(openLockManager(scope, { dir, size: 8192, mod: 0o600 }), 'mod');
    assert.equal(fs.existsSync(path.join('/dev/shm', `web-locks.${scope}`)), false);
    assert.deepEqual(fs.readdirSync(dir), []);
  });

  it('PostgreSQL\'s options without postgres, and the machine-wide ones with it, are unknown', async function () {
    const { openLockManager } = api();
    await rejectsNaming(openLockManager('s', { schema: 'web_locks' }), 'schema');
    await rejectsNaming(openLockManager('s', { dir, keepalive: 5000 }), 'keepalive');
    await rejectsNaming(openLockManager('s', { postgres: NOWHERE, dir }), 'dir');
    await rejectsNaming(openLockManager('s', { postgres: NOWHERE, schem: 'x' }), 'schem');
    await rejectsNaming(openLockManager('s', { postgres: NOWHERE, keepAlive: 5000 }), 'keepAlive');
  });

  it('what is no unknown key passes: undefined members, inherited ones, symbols', async function () {
    const { openLockManager } = api();
    const inherited = Object.create({ dri: '/nowhere' });
    inherited.dir = dir;
    const options = { dir, postgres: undefined, other: undefined, [Symbol('s')]: 1 };
    for (const value of [options, inherited]) {
      const scope = scopeName('known');
      const manager = await openLockManager(scope, value);
      await manager.close();
      fs.rmSync(path.join(dir, `web-locks.${scope}`), { force: true });
    }
  });
});
