'use strict';
// The addon built without the machine-wide manager, as it is on every
// platform but Linux (test/tools/no-machine.sh installs it so on Linux, with
// WEB_LOCKS_NO_MACHINE, and runs this file, and the process-wide suites,
// against it): openLockManager()
// rejects with a NotSupportedError, and the process-wide manager works.
const assert = require('node:assert/strict');
const { api } = require('../fixtures/util');

describe('a build without the machine-wide manager', function () {
  it('rejects openLockManager() with a NotSupportedError, and never throws', async function () {
    const { openLockManager } = api();
    let p;
    assert.doesNotThrow(() => { p = openLockManager('scope'); });
    // On Linux, macOS and Windows, only WEB_LOCKS_NO_MACHINE makes such a build: the error says so.
    const why = ['linux', 'darwin', 'win32'].includes(process.platform) ? /built with WEB_LOCKS_NO_MACHINE set/ : /it needs Linux, macOS or Windows/;
    await assert.rejects(p, (err) => err instanceof DOMException && err.name === 'NotSupportedError' && why.test(err.message));
  });

  it('still has the process-wide manager', async function () {
    const { locks } = api();
    assert.equal(await locks.request('no-machine', (lock) => lock.mode), 'exclusive');
  });
});
