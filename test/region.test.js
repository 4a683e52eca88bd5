'use strict';
// The process-wide manager's region as it grows and shrinks: tens of
// megabytes of records, then blocks of megabytes given back and used again.
// Where the system has no overcommit (Windows: npm run test:windows) the
// region is committed a megabyte at a time as it grows, and given-back pages
// may keep their old bytes; everywhere, every lock is granted and reads back
// as it was made.
const assert = require('node:assert/strict');
const { api, uniq, hold } = require('./fixtures/util');

describe('the process-wide region', function () {
  this.timeout(60000);

  it('grows through tens of megabytes of held locks, and every one reads back whole', async function () {
    const { locks } = api();
    const prefix = uniq('region') + '#' + 'r'.repeat(1000);
    const names = Array.from({ length: 20000 }, (_, i) => `${prefix}#${i}`);
    const hs = names.map((n) => hold(n));
    await Promise.all(hs.map((h) => h.granted));
    const mine = (await locks.query()).held.filter((e) => e.name.startsWith(prefix)).map((e) => e.name);
    assert.deepEqual(mine.sort(), [...names].sort());
    hs.forEach((h) => h.release());
    await Promise.all(hs.map((h) => h.done));
    assert.equal((await locks.query()).held.filter((e) => e.name.startsWith(prefix)).length, 0);
  });

  it('gives back the pages of a freed name of megabytes, and a name of the same size that reuses them reads back whole', async function () {
    const { locks } = api();
    for (const fill of ['a', 'b', 'c']) {
      const name = uniq('big') + fill.repeat(3 << 20);
      const h = hold(name);
      assert.equal((await h.granted).name, name);
      const entry = (await locks.query()).held.find((e) => e.name.length === name.length && e.name.endsWith(fill.repeat(64)));
      assert.ok(entry && entry.name === name, 'the held name reads back as made, none of the freed one\'s bytes');
      h.release();
      await h.done;
    }
  });
});
