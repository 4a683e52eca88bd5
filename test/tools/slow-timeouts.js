'use strict';
// For runs under valgrind (or another slow tool): every mocha timeout,
// including the ones tests set with this.timeout(), becomes
// WEB_LOCKS_SLOW_TIMEOUT ms (default 20 minutes). (Mocha passes timeouts
// from suites to tests, so a factor would compound; a fixed value does not.)
//   mocha --require test/tools/slow-timeouts.js ...
const { Runnable, Suite } = require('mocha');

const slow = Number(process.env.WEB_LOCKS_SLOW_TIMEOUT || 20 * 60 * 1000);
for (const Class of [Runnable, Suite]) {
  const timeout = Class.prototype.timeout;
  Class.prototype.timeout = function slowTimeout(ms) {
    if (arguments.length === 0) return timeout.call(this);
    return timeout.call(this, typeof ms === 'number' && ms > 0 ? slow : ms);
  };
}
