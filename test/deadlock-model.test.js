'use strict';
// lib/deadlock.js against a model: random snapshots, and for each agent the
// pending requests that lie on a cycle of the wait-for graph, found by
// brute force (every path, no hubs, no components). The finder must name a
// cycle through each of them and through no other, and every cycle it names
// must be made of real edges.
const assert = require('node:assert/strict');
const path = require('node:path');
const { PKG } = require('./fixtures/util');

const { findDeadlocks } = require(path.join(PKG, 'lib', 'deadlock.js'));

// A small deterministic generator (mulberry32), so that a failure names its seed.
function random (seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function snapshot (rand, { names, clients, held, pending }) {
  const pick = (n) => Math.floor(rand() * n);
  const entry = () => ({ name: `n${pick(names)}`, mode: rand() < 0.5 ? 'shared' : 'exclusive', clientId: `c${pick(clients)}` });
  return {
    held: Array.from({ length: pick(held + 1) }, entry),
    pending: Array.from({ length: pick(pending + 1) }, entry),
  };
}

// The model's edges between pending entries and held entries (no hubs).
function edges ({ held, pending }) {
  const out = pending.map(() => []);
  const heldOut = held.map(() => []);
  pending.forEach((p, i) => {
    held.forEach((h, j) => {
      if (h.name === p.name && (p.mode === 'exclusive' || h.mode === 'exclusive')) out[i].push(['h', j]);
    });
    for (let k = i - 1; k >= 0; k--) {
      if (pending[k].name === p.name) {
        out[i].push(['p', k]);
        break;
      }
    }
  });
  held.forEach((h, j) => pending.forEach((p, i) => { if (p.clientId === h.clientId) heldOut[j].push(['p', i]); }));
  return { out, heldOut };
}

// Whether pending entry i can reach itself: a depth-first search over
// every node, by brute force.
function onCycle (s, i) {
  const { out, heldOut } = edges(s);
  const seen = new Set();
  const stack = [...out[i]];
  while (stack.length > 0) {
    const [kind, n] = stack.pop();
    if (kind === 'p' && n === i) return true;
    const id = `${kind}${n}`;
    if (seen.has(id)) continue;
    seen.add(id);
    stack.push(...(kind === 'p' ? out[n] : heldOut[n]));
  }
  return false;
}

// The pending entry of `clientId` that is its index-th on name.
function nodeOf ({ pending }, clientId, name, index) {
  let k = 0;
  for (let i = 0; i < pending.length; i++) {
    if (pending[i].clientId === clientId && pending[i].name === name && k++ === index) return i;
  }
  return -1;
}

// Each step of a named cycle is an edge of the model, through a held lock
// of the agent waited for, or to the request just ahead.
function checkCycle (s, cycle, seed) {
  const { held, pending } = s;
  // Find the pending entries the cycle names: by name, mode, clientId and
  // order; the model only needs one assignment that makes every step real.
  const candidates = cycle.map((c) => pending.map((p, i) => i).filter((i) => pending[i].name === c.name && pending[i].mode === c.mode && pending[i].clientId === c.clientId));
  const step = (i, c, j) => {
    const p = pending[i];
    const q = pending[j];
    if (q.clientId !== c.waitsFor) {
      // Through a held lock: the next request is of the agent waited for.
      return false;
    }
    let ahead = -1;
    for (let k = i - 1; k >= 0; k--) if (pending[k].name === p.name) { ahead = k; break; }
    if (ahead === j) return true;
    return held.some((h) => h.clientId === c.waitsFor && h.name === p.name && (p.mode === 'exclusive' || h.mode === 'exclusive'));
  };
  const assign = (k, chosen) => {
    if (k === cycle.length) return step(chosen[k - 1], cycle[k - 1], chosen[0]);
    for (const i of candidates[k]) {
      if (chosen.includes(i)) continue;
      if (k > 0 && !step(chosen[k - 1], cycle[k - 1], i)) continue;
      if (assign(k + 1, [...chosen, i])) return true;
    }
    return false;
  };
  assert.ok(assign(0, []), `seed ${seed}: the cycle ${JSON.stringify(cycle)} is not made of edges of ${JSON.stringify(s)}`);
}

describe('deadlock finder (lib/deadlock.js) against a brute-force model', function () {
  this.timeout(60000);

  it('names a cycle through every pending request on one, and none through any other, over 20,000 random snapshots', function () {
    const base = Number(process.env.WEB_LOCKS_TEST_SEED) || Date.now() % 1000000;
    let cycles = 0;
    for (let run = 0; run < 20000; run++) {
      const seed = base + run;
      const rand = random(seed);
      const s = snapshot(rand, { names: 1 + Math.floor(rand() * 4), clients: 1 + Math.floor(rand() * 4), held: 5, pending: 7 });
      for (const clientId of new Set(s.pending.map((p) => p.clientId))) {
        const found = findDeadlocks(s, clientId);
        const covered = new Set();
        for (const { cycle, mine, key } of found) {
          assert.ok(cycle.length > 0 && typeof key === 'string', `seed ${seed}`);
          checkCycle(s, cycle, seed);
          for (const { name, index } of mine) covered.add(nodeOf(s, clientId, name, index));
          cycles++;
        }
        s.pending.forEach((p, i) => {
          if (p.clientId !== clientId) return;
          assert.equal(covered.has(i), onCycle(s, i), `seed ${seed}: pending ${i} ${JSON.stringify(p)} of ${JSON.stringify(s)}`);
        });
        assert.equal(new Set(found.map((f) => f.key)).size, found.length, `seed ${seed}: a cycle named twice`);
      }
    }
    assert.ok(cycles > 1000, `only ${cycles} cycles met: the generator makes too few`);
  });

  it('names the classic cycle of two agents, and an agent waiting on its own lock, the same way whoever looks', function () {
    const two = {
      held: [{ name: 'a', mode: 'exclusive', clientId: 'A' }, { name: 'b', mode: 'exclusive', clientId: 'B' }],
      pending: [{ name: 'b', mode: 'exclusive', clientId: 'A' }, { name: 'a', mode: 'shared', clientId: 'B' }],
    };
    const [a] = findDeadlocks(two, 'A');
    const [b] = findDeadlocks(two, 'B');
    assert.equal(a.key, b.key);
    assert.deepEqual(a.cycle, b.cycle);
    assert.deepEqual(new Set(a.cycle.map((c) => JSON.stringify(c))), new Set([
      JSON.stringify({ name: 'b', mode: 'exclusive', clientId: 'A', waitsFor: 'B' }),
      JSON.stringify({ name: 'a', mode: 'shared', clientId: 'B', waitsFor: 'A' }),
    ]));
    assert.deepEqual(a.mine, [{ name: 'b', index: 0, of: 1 }]);

    const self = { held: [{ name: 'x', mode: 'shared', clientId: 'A' }], pending: [{ name: 'x', mode: 'exclusive', clientId: 'A' }] };
    assert.deepEqual(findDeadlocks(self, 'A').map((f) => f.cycle), [[{ name: 'x', mode: 'exclusive', clientId: 'A', waitsFor: 'A' }]]);
    // Shared behind shared is no wait: nothing.
    const shared = { held: [{ name: 'x', mode: 'shared', clientId: 'A' }], pending: [] };
    assert.deepEqual(findDeadlocks(shared, 'A'), []);
    // Behind its own request, which waits on another agent that waits on nothing: no cycle.
    const queue = {
      held: [{ name: 'x', mode: 'exclusive', clientId: 'B' }],
      pending: [{ name: 'x', mode: 'exclusive', clientId: 'A' }, { name: 'x', mode: 'exclusive', clientId: 'A' }],
    };
    assert.deepEqual(findDeadlocks(queue, 'A'), []);
  });
});
