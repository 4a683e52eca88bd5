'use strict';
// Spec §3 and the IDL index, with Web IDL's rules for interfaces: LockManager
// and Lock have no constructor, attributes are accessors on the prototype
// that check their receiver, operations are on the prototype.
const assert = require('node:assert/strict');
const { api, uniq, rejects } = require('./fixtures/util');

describe('LockManager and Lock', function () {
  let locks;
  let LockManager;
  let Lock;
  before(function () {
    ({ locks, LockManager, Lock } = api());
  });

  it('the package exports locks, LockManager and Lock; locks is a LockManager', function () {
    assert.equal(typeof LockManager, 'function');
    assert.equal(typeof Lock, 'function');
    assert.ok(locks instanceof LockManager);
    assert.equal(Object.getPrototypeOf(locks), LockManager.prototype);
  });

  it('new LockManager() and new Lock() throw TypeError', function () {
    assert.throws(() => new LockManager(), TypeError);
    assert.throws(() => new Lock(), TypeError);
    assert.throws(() => new Lock('name', 'exclusive'), TypeError);
    assert.throws(() => LockManager(), TypeError);
    assert.throws(() => Lock(), TypeError);
  });

  it('a subclass cannot construct them either', function () {
    class MyLock extends Lock {}
    class MyManager extends LockManager {}
    assert.throws(() => new MyLock(), TypeError);
    assert.throws(() => new MyManager(), TypeError);
  });

  it('request has length 2 and query length 0; both are prototype methods, not own properties', function () {
    assert.equal(LockManager.prototype.request.length, 2);
    assert.equal(LockManager.prototype.query.length, 0);
    assert.equal(typeof LockManager.prototype.request, 'function');
    assert.equal(Object.prototype.hasOwnProperty.call(locks, 'request'), false);
    assert.equal(Object.prototype.hasOwnProperty.call(locks, 'query'), false);
    assert.equal(locks.request, LockManager.prototype.request);
    assert.equal(locks.query, LockManager.prototype.query);
  });

  it('the callback receives a Lock whose name, mode and token are getters on Lock.prototype, not own properties', async function () {
    const lock = await locks.request(uniq('cls'), { mode: 'shared' }, (l) => l);
    assert.ok(lock instanceof Lock);
    assert.equal(Object.getPrototypeOf(lock), Lock.prototype);
    for (const attr of ['name', 'mode', 'token']) {
      assert.equal(Object.prototype.hasOwnProperty.call(lock, attr), false, `${attr} is an own property`);
      const desc = Object.getOwnPropertyDescriptor(Lock.prototype, attr);
      assert.ok(desc, `Lock.prototype.${attr}`);
      assert.equal(typeof desc.get, 'function');
      assert.equal(desc.set, undefined, `${attr} is read-only`);
    }
  });

  it('name and mode are read-only: assigning does not change them (and throws in strict mode)', async function () {
    const name = uniq('cls-ro');
    const lock = await locks.request(name, (l) => l);
    assert.throws(() => { lock.name = 'other'; }, TypeError);
    assert.throws(() => { lock.mode = 'shared'; }, TypeError);
    assert.equal(lock.name, name);
    assert.equal(lock.mode, 'exclusive');
  });

  it('the name, mode and token getters throw TypeError on anything that is not a Lock', function () {
    const nameGet = Object.getOwnPropertyDescriptor(Lock.prototype, 'name').get;
    const modeGet = Object.getOwnPropertyDescriptor(Lock.prototype, 'mode').get;
    const tokenGet = Object.getOwnPropertyDescriptor(Lock.prototype, 'token').get;
    for (const bad of [{}, Lock.prototype, locks, null, undefined, 1, 'lock', Object.create(Lock.prototype)]) {
      assert.throws(() => nameGet.call(bad), TypeError);
      assert.throws(() => modeGet.call(bad), TypeError);
      assert.throws(() => tokenGet.call(bad), TypeError);
    }
    assert.throws(() => Lock.prototype.name, TypeError);
    assert.throws(() => Lock.prototype.mode, TypeError);
    assert.throws(() => Lock.prototype.token, TypeError);
  });

  it('request() and query() called on something that is not a LockManager reject with TypeError', async function () {
    const { request, query } = LockManager.prototype;
    let called = false;
    await rejects(() => request.call({}, uniq('x'), () => { called = true; }), TypeError);
    await rejects(() => request.call(undefined, uniq('x'), () => { called = true; }), TypeError);
    await rejects(() => request.call(Object.create(LockManager.prototype), uniq('x'), () => { called = true; }), TypeError);
    await rejects(() => query.call({}), TypeError);
    await rejects(() => query.call(null), TypeError);
    assert.equal(called, false);
  });

  it('has Web IDL class strings', async function () {
    const lock = await locks.request(uniq('tag'), (l) => l);
    assert.equal(Object.prototype.toString.call(locks), '[object LockManager]');
    assert.equal(Object.prototype.toString.call(lock), '[object Lock]');
  });

  it('the constructors are named LockManager and Lock', function () {
    assert.equal(LockManager.name, 'LockManager');
    assert.equal(Lock.name, 'Lock');
    assert.equal(LockManager.prototype.constructor, LockManager);
    assert.equal(Lock.prototype.constructor, Lock);
  });
});
