'use strict';
// Spec §2.1: a resource name is a JavaScript string; names are compared as
// sequences of UTF-16 code units (no normalisation, no replacement of lone
// surrogates, no truncation at NUL).
const assert = require('node:assert/strict');
const { api, uniq, hold, stateOf } = require('./fixtures/util');
const { spawnAgent, terminateAll } = require('./fixtures/agent');

describe('resource names', function () {
  let locks;
  before(function () {
    ({ locks } = api());
  });
  afterEach(terminateAll);

  // Holds every name exclusively at once; each must be granted (so they are
  // all different names), and query() must give each back exactly.
  async function holdAllExclusively(names) {
    const hs = names.map((n) => hold(n));
    const granted = await Promise.all(hs.map((h) => h.granted));
    granted.forEach((lock, i) => assert.equal(lock.name, names[i], `Lock.name of #${i}`));
    const { held, pending } = await locks.query();
    for (const n of names) {
      const mine = held.filter((i) => i.name === n);
      assert.equal(mine.length, 1, `held entry for name #${names.indexOf(n)}`);
      assert.equal(mine[0].mode, 'exclusive');
    }
    assert.equal(pending.filter((i) => names.includes(i.name)).length, 0);
    hs.forEach((h) => h.release());
    await Promise.all(hs.map((h) => h.done));
    assert.deepEqual(await stateOf(names), { held: [], pending: [] });
  }

  it('accepts the empty string as a name', async function () {
    const h = hold('');
    const lock = await h.granted;
    assert.equal(lock.name, '');
    const { held } = await stateOf('');
    assert.equal(held.length, 1);
    assert.equal(held[0].name, '');
    assert.equal(await locks.request('', { ifAvailable: true }, (l) => l), null);
    h.release();
    await h.done;
  });

  it('does not truncate at an embedded NUL: "a\\0b", "a\\0c", "a" and "a\\0" are four names', async function () {
    const base = uniq('nul');
    await holdAllExclusively([`${base}a\0b`, `${base}a\0c`, `${base}a`, `${base}a\0`, `\0${base}`]);
  });

  it('keeps lone surrogates: "\\uD800" and "\\uFFFD" (and "\\uDC00", "\\uD800\\uDC00") are different names', async function () {
    const base = uniq('sur');
    await holdAllExclusively([`${base}\uD800`, `${base}\uFFFD`, `${base}\uDC00`, `${base}\uD800\uDC00`, `${base}\uDC00\uD800`, `${base}?`]);
  });

  it('holds a bare lone surrogate and U+FFFD exclusively at the same time', async function () {
    await holdAllExclusively(['\uD800', '\uFFFD']);
  });

  it('does not normalise: precomposed and decomposed forms are different names', async function () {
    const base = uniq('nfc');
    await holdAllExclusively([`${base}\u00e9`, `${base}e\u0301`, `${base}\u212B`, `${base}\u00C5`]);
  });

  it('is case-sensitive and compares every code unit, including non-BMP characters', async function () {
    const base = uniq('case');
    await holdAllExclusively([`${base}A`, `${base}a`, `${base}\u{1F600}`, `${base}\u{1F601}`, `${base}\u0100`, `${base}\u0000\u0100`]);
  });

  it('treats names as equal exactly when their code units are equal', async function () {
    const base = uniq('eq');
    const name = `${base}\uD800x\0y\u00e9`;
    const h = hold(name);
    await h.granted;
    // Built differently, same code units.
    const same = [base, String.fromCharCode(0xd800), 'x', '\u0000', 'y', '\u00e9'].join('');
    assert.equal(await locks.request(same, { ifAvailable: true }, (l) => l), null);
    h.release();
    await h.done;
  });

  it('handles names of 1e6 code units: they work, compare in full and come back exactly from query()', async function () {
    this.timeout(20000);
    const long = 'x'.repeat(1e6);
    const longY = `${'x'.repeat(1e6 - 1)}y`;
    const longShorter = 'x'.repeat(1e6 - 1);
    const longWide = `\u0100${'\u5b57'.repeat(1e6 - 1)}`;
    await holdAllExclusively([long, longY, longShorter, longWide]);
    // The same long name queues behind itself.
    const h = hold(long);
    await h.granted;
    assert.equal(await locks.request('x'.repeat(1e6), { ifAvailable: true }, (l) => l), null);
    h.release();
    await h.done;
  });

  it('names with surrogates and NULs are the same resource on every thread, and come back exactly from a worker\'s query()', async function () {
    const base = uniq('xthread');
    const names = [`${base}\uD800`, `${base}a\0b`, `${base}\uDFFF\uD800`];
    const agent = await spawnAgent();
    const ids = [];
    for (const n of names) {
      const id = await agent.request(n);
      await agent.granted(id);
      ids.push(id);
    }
    for (const n of names) {
      assert.equal(await locks.request(n, { ifAvailable: true }, (l) => l), null, 'held by the worker');
    }
    // Names that differ only where lossy conversion would merge them are free.
    for (const n of [`${base}\uFFFD`, `${base}a`, `${base}\uFFFD\uFFFD`, `${base}??`]) {
      assert.equal(await locks.request(n, { ifAvailable: true }, (l) => l && l.name), n);
    }
    const mine = await stateOf(names);
    assert.deepEqual(mine.held.map((i) => i.name).sort(), [...names].sort());
    const theirs = await agent.query();
    assert.deepEqual(theirs.held.filter((i) => names.includes(i.name)).map((i) => i.name).sort(), [...names].sort());
    const granted = agent.messages.filter((m) => m.type === 'granted' && ids.includes(m.id)).map((m) => m.lock.name);
    assert.deepEqual(granted, names);
    ids.forEach((id) => agent.release(id));
    await Promise.all(ids.map((id) => agent.settled(id)));
  });
});
