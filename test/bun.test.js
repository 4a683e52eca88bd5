'use strict';
// What differs under Bun (scripts/test-runtimes.js runs the suites that apply
// under it, this file among them; under Node it is pending).
const assert = require('node:assert/strict');
const { api, isDOMException } = require('./fixtures/util');

describe('under Bun', function () {
  before(function () {
    if (process.versions.bun === undefined) this.skip();
  });

  it('openLockManager(scope) rejects with a NotSupportedError (Bun aborts the process on uv_poll_init), and the process goes on', async function () {
    const error = await api().openLockManager('bun-scope').then(() => null, (e) => e);
    assert.ok(isDOMException('NotSupportedError')(error), String(error));
    assert.match(error.message, /Bun/);
    assert.equal(await api().locks.request('bun-after', (lock) => lock.name), 'bun-after');
  });
});
