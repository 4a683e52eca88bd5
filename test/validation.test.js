'use strict';
// Spec §3.2 (IDL: request(DOMString name, LockGrantedCallback callback) and
// request(DOMString name, LockOptions options, LockGrantedCallback callback)),
// §3.2.1 steps 5-9, and Web IDL: argument conversion errors of a
// promise-returning operation become a rejected promise, never a throw.
const assert = require('node:assert/strict');
const { api, uniq, hold, stateOf, rejects, isDOMException } = require('./fixtures/util');

describe('request(): argument validation', function () {
  let locks;
  before(function () {
    ({ locks } = api());
  });

  const never = () => {
    throw new Error('callback must not be called');
  };

  function checkNothingLeft(name) {
    return stateOf(name).then((s) => assert.deepEqual(s, { held: [], pending: [] }));
  }

  describe('Web IDL conversions (TypeError, as a rejected promise)', function () {
    it('rejects with TypeError when called with no arguments', async function () {
      await rejects(() => locks.request(), TypeError);
    });

    it('rejects with TypeError when called with only a name, without converting the name', async function () {
      let converted = false;
      await rejects(() => locks.request('x'), TypeError);
      await rejects(() => locks.request({ toString() { converted = true; return 'x'; } }), TypeError);
      assert.equal(converted, false);
    });

    it('rejects with TypeError for a Symbol name', async function () {
      let called = false;
      await rejects(() => locks.request(Symbol('s'), () => { called = true; }), TypeError);
      await rejects(() => locks.request(Symbol('s'), {}, () => { called = true; }), TypeError);
      assert.equal(called, false);
    });

    it('rejects with the very error a throwing name conversion throws', async function () {
      const boom = new Error('toString');
      const err = await rejects(() => locks.request({ toString() { throw boom; } }, never), (e) => e === boom);
      assert.equal(err, boom);
    });

    it('with two arguments the second is the callback: a non-callable second argument rejects with TypeError', async function () {
      const name = uniq('two-args');
      await rejects(() => locks.request(name, { mode: 'shared' }), TypeError);
      await rejects(() => locks.request(name, 5), TypeError);
      await rejects(() => locks.request(name, undefined), TypeError);
      await rejects(() => locks.request(name, null), TypeError);
      await rejects(() => locks.request(name, 'function'), TypeError);
      await checkNothingLeft(name);
    });

    it('rejects with TypeError when the callback (3rd argument) is not callable', async function () {
      const name = uniq('cb');
      await rejects(() => locks.request(name, {}, 5), TypeError);
      await rejects(() => locks.request(name, {}, {}), TypeError);
      await rejects(() => locks.request(name, {}, null), TypeError);
      await rejects(() => locks.request(name, {}, undefined), TypeError);
      // Three arguments: the function in the middle is the options, the
      // callback is the (missing) third one.
      await rejects(() => locks.request(name, () => {}, undefined), TypeError);
      await checkNothingLeft(name);
    });

    it('rejects with TypeError when options is not an object (with three arguments)', async function () {
      const name = uniq('opts');
      let called = false;
      const cb = () => { called = true; };
      await rejects(() => locks.request(name, 5, cb), TypeError);
      await rejects(() => locks.request(name, 'shared', cb), TypeError);
      await rejects(() => locks.request(name, true, cb), TypeError);
      await rejects(() => locks.request(name, Symbol('o'), cb), TypeError);
      await rejects(() => locks.request(name, 10n, cb), TypeError);
      assert.equal(called, false);
      await checkNothingLeft(name);
    });

    it('rejects with TypeError for an unknown mode', async function () {
      const name = uniq('mode');
      await rejects(() => locks.request(name, { mode: 'bogus' }, never), TypeError);
      await rejects(() => locks.request(name, { mode: 'Shared' }, never), TypeError);
      await rejects(() => locks.request(name, { mode: 'EXCLUSIVE' }, never), TypeError);
      await rejects(() => locks.request(name, { mode: '' }, never), TypeError);
      await rejects(() => locks.request(name, { mode: null }, never), TypeError);
      await rejects(() => locks.request(name, { mode: Symbol('shared') }, never), TypeError);
      await checkNothingLeft(name);
    });

    it('converts mode with ToString (an object whose toString returns "shared" is a valid mode)', async function () {
      const name = uniq('mode-obj');
      const mode = await locks.request(name, { mode: { toString: () => 'shared' } }, (lock) => lock.mode);
      assert.equal(mode, 'shared');
    });

    it('rejects with TypeError when signal is not an AbortSignal', async function () {
      const name = uniq('signal');
      const fake = { aborted: false, reason: undefined, addEventListener() {}, removeEventListener() {} };
      await rejects(() => locks.request(name, { signal: fake }, never), TypeError);
      await rejects(() => locks.request(name, { signal: {} }, never), TypeError);
      await rejects(() => locks.request(name, { signal: null }, never), TypeError);
      await rejects(() => locks.request(name, { signal: 'signal' }, never), TypeError);
      await rejects(() => locks.request(name, { signal: new AbortController() }, never), TypeError);
      await checkNothingLeft(name);
    });

    it('converts ifAvailable and steal with ToBoolean', async function () {
      const name = uniq('bool');
      const h = hold(name);
      await h.granted;
      // A truthy non-boolean ifAvailable: not available, callback gets null.
      assert.equal(await locks.request(name, { ifAvailable: 'yes' }, (lock) => lock), null);
      assert.equal(await locks.request(name, { ifAvailable: 1 }, (lock) => lock), null);
      // A falsy steal is no steal: ifAvailable + steal: 0 is allowed.
      assert.equal(await locks.request(name, { ifAvailable: true, steal: 0 }, (lock) => lock), null);
      // A truthy steal with ifAvailable is the NotSupportedError combination.
      await rejects(() => locks.request(name, { ifAvailable: true, steal: 'yes' }, never), isDOMException('NotSupportedError'));
      h.release();
      await h.done;
    });

    it('reads the options members once each, in the order ifAvailable, mode, signal, steal, after converting the name and before checking the callback', async function () {
      const log = [];
      const name = { toString() { log.push('name'); return uniq('order'); } };
      const options = {
        get steal() { log.push('steal'); return false; },
        get signal() { log.push('signal'); return undefined; },
        get mode() { log.push('mode'); return 'shared'; },
        get ifAvailable() { log.push('ifAvailable'); return false; },
      };
      await rejects(() => locks.request(name, options, 'not callable'), TypeError);
      assert.deepEqual(log, ['name', 'ifAvailable', 'mode', 'signal', 'steal']);
    });

    it('rejects with the error a throwing options getter throws, and reads no later member', async function () {
      const name = uniq('getter');
      for (const member of ['ifAvailable', 'mode', 'signal', 'steal']) {
        const boom = new Error(`getter ${member}`);
        const log = [];
        const options = {};
        for (const m of ['ifAvailable', 'mode', 'signal', 'steal']) {
          Object.defineProperty(options, m, {
            get() {
              log.push(m);
              if (m === member) throw boom;
              return undefined;
            },
          });
        }
        await rejects(() => locks.request(name, options, never), (e) => e === boom);
        assert.equal(log[log.length - 1], member);
      }
      await checkNothingLeft(name);
    });

    it('stops at an invalid mode: signal and steal are not read', async function () {
      const log = [];
      await rejects(() => locks.request(uniq('bad-mode'), {
        get ifAvailable() { log.push('ifAvailable'); return false; },
        get mode() { log.push('mode'); return 'neither'; },
        get signal() { log.push('signal'); return undefined; },
        get steal() { log.push('steal'); return false; },
      }, never), TypeError);
      assert.deepEqual(log, ['ifAvailable', 'mode']);
    });

    it('stops at an invalid signal: steal is not read', async function () {
      const log = [];
      await rejects(() => locks.request(uniq('bad-signal'), {
        get signal() { log.push('signal'); return {}; },
        get steal() { log.push('steal'); return false; },
      }, never), TypeError);
      assert.deepEqual(log, ['signal']);
    });

    it('with two arguments, properties of the callback function are not read as options', async function () {
      const cb = (lock) => lock.mode;
      let read = false;
      Object.defineProperty(cb, 'mode', { get() { read = true; return 'shared'; } });
      assert.equal(await locks.request(uniq('fn-props'), cb), 'exclusive');
      assert.equal(read, false);
    });

    it('converts the name before the options: a throwing name wins over a throwing getter', async function () {
      const first = new Error('name');
      let getterCalled = false;
      await rejects(() => locks.request(
        { toString() { throw first; } },
        { get mode() { getterCalled = true; throw new Error('mode'); } },
        never,
      ), (e) => e === first);
      assert.equal(getterCalled, false);
    });

    it('converts the options before checking the callback: a throwing getter wins over a bad callback', async function () {
      const boom = new Error('ifAvailable');
      await rejects(() => locks.request(uniq('x'), { get ifAvailable() { throw boom; } }, 42), (e) => e === boom);
    });

    it('reports conversion errors (TypeError) before NotSupportedError', async function () {
      await rejects(() => locks.request('-reserved', { mode: 'bogus' }, never), TypeError);
      await rejects(() => locks.request('-reserved', {}, 'not callable'), TypeError);
      await rejects(() => locks.request('-reserved', { steal: true, ifAvailable: true }, null), TypeError);
      const boom = new Error('steal getter');
      await rejects(() => locks.request('-reserved', { get steal() { throw boom; } }, never), (e) => e === boom);
    });
  });

  describe('name conversion', function () {
    it('converts a number name to a string', async function () {
      assert.equal(await locks.request(123, (lock) => lock.name), '123');
      assert.equal(await locks.request(1.5, {}, (lock) => lock.name), '1.5');
    });

    it('converts objects with their toString, and null/undefined/booleans to their string forms', async function () {
      const n = uniq('obj');
      assert.equal(await locks.request({ toString: () => n }, (lock) => lock.name), n);
      assert.equal(await locks.request(null, (lock) => lock.name), 'null');
      assert.equal(await locks.request(undefined, (lock) => lock.name), 'undefined');
      assert.equal(await locks.request(false, (lock) => lock.name), 'false');
    });

    it('a number name and its string form are the same resource', async function () {
      const h = hold('4242');
      await h.granted;
      assert.equal(await locks.request(4242, { ifAvailable: true }, (lock) => lock), null);
      h.release();
      await h.done;
    });
  });

  describe('options defaults', function () {
    it('null and undefined options mean the defaults (exclusive, waits)', async function () {
      const name = uniq('null-opts');
      assert.equal(await locks.request(name, null, (lock) => lock.mode), 'exclusive');
      assert.equal(await locks.request(name, undefined, (lock) => lock.mode), 'exclusive');
      const h = hold(name);
      await h.granted;
      let granted = false;
      const p = locks.request(name, null, () => { granted = true; });
      assert.deepEqual((await stateOf(name)).pending.map((i) => i.mode), ['exclusive']);
      assert.equal(granted, false);
      h.release();
      await p;
      assert.equal(granted, true);
    });

    it('accepts an empty options object, an options object with undefined members, and a function as options', async function () {
      const name = uniq('empty-opts');
      assert.equal(await locks.request(name, {}, (lock) => lock.mode), 'exclusive');
      assert.equal(await locks.request(name, { mode: undefined, ifAvailable: undefined, steal: undefined, signal: undefined }, (lock) => lock.mode), 'exclusive');
      const fnOptions = function () {};
      fnOptions.mode = 'shared';
      assert.equal(await locks.request(name, fnOptions, (lock) => lock.mode), 'shared');
    });

    it('reads inherited option members', async function () {
      const name = uniq('proto-opts');
      const options = Object.create({ mode: 'shared' });
      assert.equal(await locks.request(name, options, (lock) => lock.mode), 'shared');
    });

    it('ignores extra arguments after the callback', async function () {
      const name = uniq('extra');
      assert.equal(await locks.request(name, {}, (lock) => lock.name, 'extra', 1), name);
      assert.equal(await locks.request(name, { mode: 'shared' }, (lock) => lock.mode, () => 'not me'), 'shared');
    });
  });

  describe('NotSupportedError (§3.2.1 steps 5-8)', function () {
    function notSupported(err) {
      return err instanceof DOMException && err.name === 'NotSupportedError' && err.code === 9;
    }

    it('rejects a name that starts with "-" (also after conversion), but not one with "-" elsewhere', async function () {
      let called = false;
      const cb = () => { called = true; };
      await rejects(() => locks.request('-', cb), notSupported);
      await rejects(() => locks.request('-x', cb), notSupported);
      await rejects(() => locks.request('-x', { mode: 'shared' }, cb), notSupported);
      await rejects(() => locks.request(-1, cb), notSupported);
      await rejects(() => locks.request({ toString: () => '--' }, cb), notSupported);
      assert.equal(called, false);
      const ok = uniq('a-b');
      assert.equal(await locks.request(`${ok}-`, (lock) => lock.name), `${ok}-`);
      assert.equal(await locks.request(` -${ok}`, (lock) => lock.name), ` -${ok}`);
      assert.equal(await locks.request(`\u2010${ok}`, (lock) => lock.name), `\u2010${ok}`);
    });

    it('rejects steal together with ifAvailable', async function () {
      await rejects(() => locks.request(uniq('s'), { steal: true, ifAvailable: true }, never), notSupported);
    });

    it('rejects steal with mode "shared"', async function () {
      await rejects(() => locks.request(uniq('s'), { steal: true, mode: 'shared' }, never), notSupported);
    });

    it('rejects a signal together with steal or ifAvailable', async function () {
      const { signal } = new AbortController();
      await rejects(() => locks.request(uniq('s'), { signal, steal: true }, never), notSupported);
      await rejects(() => locks.request(uniq('s'), { signal, ifAvailable: true }, never), notSupported);
    });

    it('allows a signal with steal: false and ifAvailable: false', async function () {
      const { signal } = new AbortController();
      const name = uniq('s');
      assert.equal(await locks.request(name, { signal, steal: false, ifAvailable: false }, (lock) => lock.name), name);
    });

    it('leaves nothing queued and changes no held lock when it rejects', async function () {
      const name = uniq('nothing');
      const h = hold(name);
      await h.granted;
      await rejects(() => locks.request(name, { steal: true, mode: 'shared' }, never), notSupported);
      await rejects(() => locks.request(name, { steal: true, ifAvailable: true }, never), notSupported);
      const state = await stateOf(name);
      assert.equal(state.held.length, 1);
      assert.deepEqual(state.pending, []);
      h.release();
      // The holder was not stolen from: it resolves normally.
      await h.done;
    });

    it('NotSupportedError comes before an already aborted signal', async function () {
      const signal = AbortSignal.abort('reason');
      await rejects(() => locks.request('-x', { signal }, never), notSupported);
      await rejects(() => locks.request(uniq('s'), { signal, steal: true }, never), notSupported);
      await rejects(() => locks.request(uniq('s'), { signal, ifAvailable: true }, never), notSupported);
    });
  });

  describe('already aborted signal (§3.2.1 step 9)', function () {
    it('rejects with the signal\'s reason, never calls the callback and queues nothing', async function () {
      const name = uniq('aborted');
      const reason = new Error('my reason');
      let called = false;
      await rejects(() => locks.request(name, { signal: AbortSignal.abort(reason) }, () => { called = true; }), (e) => e === reason);
      const signal = AbortSignal.abort();
      await rejects(() => locks.request(name, { signal }, () => { called = true; }), (e) => e === signal.reason && isDOMException('AbortError')(e));
      await rejects(() => locks.request(name, { signal: AbortSignal.abort('text') }, () => { called = true; }), (e) => e === 'text');
      // Even when the name is free.
      assert.equal(called, false);
      await checkNothingLeft(name);
      assert.equal(await locks.request(name, { ifAvailable: true }, (lock) => lock !== null), true);
    });
  });
});
