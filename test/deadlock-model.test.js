'use strict';
// lib/deadlock.js's finder against a brute-force model, on random
// snapshots (as details() gives them: each entry with its agent, serial and
// parent): the pending requests on a cycle of the wait-for graph, found by
// searching every path (no hubs, no components). For each agent, the finder
// must name a cycle through each of its requests made inside a held lock
// that is on one, and through no other; every cycle it names must be made of the graph's
// edges, with whom each step waits for; and every agent of a cycle that
// one agent names must name it too, alike.
const assert = require('node:assert/strict');
const path = require('node:path');
const { PKG, random } = require('./fixtures/util');

const { findDeadlocks } = require(path.join(PKG, 'lib', 'deadlock.js'));

// Held entries first (a parent is an earlier held entry of its agent, or
// none), then pending ones (a parent is any held entry of its agent).
function snapshot(rand, { names, clients, held, pending }) {
  const pick = (n) => Math.floor(rand() * n);
  const serials = new Map();
  const entry = (parents) => {
    const clientId = `c${pick(clients)}`;
    const serial = (serials.get(clientId) || 0) + 1;
    serials.set(clientId, serial);
    const mine = parents.filter((p) => p.clientId === clientId);
    const parent = mine.length > 0 && rand() < 0.7 ? mine[pick(mine.length)].serial : 0;
    return { name: `n${pick(names)}`, mode: rand() < 0.4 ? 'shared' : 'exclusive', clientId, serial, parent };
  };
  const h = [];
  for (let n = pick(held + 1); n > 0; n--) h.push(entry(h));
  const p = [];
  for (let n = pick(pending + 1); n > 0; n--) p.push(entry(h));
  return { held: h, pending: p };
}

// The model's edges, node ids 'p<i>' and 'h<j>'.
function edges({ held, pending }) {
  const out = new Map();
  pending.forEach((p, i) => {
    const next = [];
    held.forEach((h, j) => {
      if (h.name === p.name && (p.mode === 'exclusive' || h.mode === 'exclusive')) next.push(`h${j}`);
    });
    for (let k = i - 1; k >= 0; k--) {
      if (pending[k].name === p.name) {
        next.push(`p${k}`);
        break;
      }
    }
    out.set(`p${i}`, next);
  });
  held.forEach((h, j) => {
    const next = [];
    pending.forEach((p, i) => { if (p.clientId === h.clientId && p.parent === h.serial) next.push(`p${i}`); });
    held.forEach((c, k) => { if (c.clientId === h.clientId && c.parent === h.serial) next.push(`h${k}`); });
    out.set(`h${j}`, next);
  });
  return out;
}

function reaches(out, from, to, through = () => true) {
  const seen = new Set();
  const stack = [...out.get(from)];
  while (stack.length > 0) {
    const v = stack.pop();
    if (v === to) return true;
    if (seen.has(v) || !through(v)) continue;
    seen.add(v);
    stack.push(...out.get(v));
  }
  return false;
}

const owner = (s, v) => (v[0] === 'p' ? s.pending : s.held)[Number(v.slice(1))].clientId;

// Each step of a named cycle is a path of the model's edges from one
// pending request to the next through held locks only, its first node the
// agent's it names as waited for.
function checkCycle(s, out, found, where) {
  assert.equal(found.requests.length, found.cycle.length, where);
  const nodes = found.cycle.map((c, k) => {
    const { clientId, serial } = found.requests[k];
    const i = s.pending.findIndex((p) => p.clientId === clientId && p.serial === serial);
    assert.ok(i >= 0 && c.clientId === clientId && s.pending[i].name === c.name && s.pending[i].mode === c.mode,
      `${where}: ${JSON.stringify(c)} is no pending request`);
    return `p${i}`;
  });
  nodes.forEach((v, k) => {
    const to = nodes[(k + 1) % nodes.length];
    const first = out.get(v).filter((w) => w === to || (w[0] === 'h' && reaches(out, w, to, (x) => x[0] === 'h')));
    assert.ok(first.length > 0, `${where}: no edge from ${v} to ${to} in ${JSON.stringify(found.cycle)}`);
    assert.ok(first.some((w) => owner(s, w) === found.cycle[k].waitsFor), `${where}: ${v} waits for none of ${found.cycle[k].waitsFor}'s`);
  });
}

describe('deadlock finder (lib/deadlock.js) against a brute-force model', function () {
  this.timeout(120000);

  it('names a cycle through every request made inside a lock on one and through no other, alike for every agent of it, over 20,000 random snapshots', function () {
    const base = Number(process.env.WEB_LOCKS_TEST_SEED) || Date.now() % 1000000;
    let cycles = 0;
    let falseBait = 0;
    for (let run = 0; run < 20000; run++) {
      const seed = base + run;
      const rand = random(seed);
      const s = snapshot(rand, { names: 1 + Math.floor(rand() * 4), clients: 1 + Math.floor(rand() * 4), held: 6, pending: 7 });
      const where = `seed ${seed} (WEB_LOCKS_TEST_SEED=${seed}), ${JSON.stringify(s)}`;
      const out = edges(s);
      const byAgent = new Map();
      for (const clientId of new Set(s.pending.map((p) => p.clientId))) {
        const found = findDeadlocks(s, clientId);
        byAgent.set(clientId, found);
        assert.equal(new Set(found.map((f) => f.key)).size, found.length, `${where}: a cycle named twice`);
        const covered = new Set();
        for (const f of found) {
          checkCycle(s, out, f, where);
          assert.ok(f.cycle.some((c) => c.clientId === clientId), `${where}: a cycle without ${clientId}'s requests`);
          for (const serial of f.mine) covered.add(serial);
          cycles++;
        }
        // Named by the requests made inside a held lock: a request only
        // queued behind a cycle is on it, but rejecting it would end no wait.
        const made = (p) => p.parent !== 0 && s.held.some((h) => h.clientId === p.clientId && h.serial === p.parent);
        s.pending.forEach((p, i) => {
          if (p.clientId !== clientId) return;
          const on = made(p) && reaches(out, `p${i}`, `p${i}`);
          // A request waiting behind its agent's held lock that is on no
          // cycle: what a graph of agents would call a deadlock.
          if (!on && s.held.some((h) => h.clientId === clientId && h.name === p.name)) falseBait++;
          assert.equal(covered.has(p.serial), on, `${where}: pending ${i} ${JSON.stringify(p)}`);
        });
      }
      for (const [clientId, found] of byAgent) {
        for (const f of found) {
          for (const c of f.cycle) {
            if (c.clientId === clientId) continue;
            const theirs = byAgent.get(c.clientId).find((g) => g.key === f.key);
            assert.ok(theirs !== undefined, `${where}: ${c.clientId} does not name ${clientId}'s cycle ${f.key}`);
            assert.deepEqual(theirs.cycle, f.cycle, `${where}: named unlike`);
          }
        }
      }
    }
    assert.ok(cycles > 1000 && falseBait > 1000, `only ${cycles} cycles and ${falseBait} false baits met: the generator makes too few`);
  });

  it('names the classic cycle of two agents, and a task waiting on its own lock, the same way whoever looks; two independent tasks are none', function () {
    const two = {
      held: [{ name: 'a', mode: 'exclusive', clientId: 'A', serial: 1, parent: 0 }, { name: 'b', mode: 'exclusive', clientId: 'B', serial: 1, parent: 0 }],
      pending: [{ name: 'b', mode: 'exclusive', clientId: 'A', serial: 2, parent: 1 }, { name: 'a', mode: 'shared', clientId: 'B', serial: 2, parent: 1 }],
    };
    const [a] = findDeadlocks(two, 'A');
    const [b] = findDeadlocks(two, 'B');
    assert.equal(a.key, b.key);
    assert.deepEqual(a.cycle, b.cycle);
    assert.deepEqual(new Set(a.cycle.map((c) => JSON.stringify(c))), new Set([
      JSON.stringify({ name: 'b', mode: 'exclusive', clientId: 'A', waitsFor: 'B' }),
      JSON.stringify({ name: 'a', mode: 'shared', clientId: 'B', waitsFor: 'A' }),
    ]));
    assert.deepEqual(a.mine, [2]);
    // The same locks and requests, the requests made outside the callbacks:
    // each agent's held lock will be released; nothing.
    const loose = { held: two.held, pending: two.pending.map((p) => ({ ...p, parent: 0 })) };
    assert.deepEqual(findDeadlocks(loose, 'A'), []);
    const self = { held: [{ name: 'x', mode: 'shared', clientId: 'A', serial: 1, parent: 0 }], pending: [{ name: 'x', mode: 'exclusive', clientId: 'A', serial: 2, parent: 1 }] };
    assert.deepEqual(findDeadlocks(self, 'A').map((f) => f.cycle), [[{ name: 'x', mode: 'exclusive', clientId: 'A', waitsFor: 'A' }]]);
    // Through a nested lock: A holds x, inside it y, inside that waits for z,
    // which B holds while it waits for x.
    const nested = {
      held: [
        { name: 'x', mode: 'exclusive', clientId: 'A', serial: 1, parent: 0 },
        { name: 'y', mode: 'exclusive', clientId: 'A', serial: 2, parent: 1 },
        { name: 'z', mode: 'exclusive', clientId: 'B', serial: 1, parent: 0 },
      ],
      pending: [{ name: 'z', mode: 'exclusive', clientId: 'A', serial: 3, parent: 2 }, { name: 'x', mode: 'exclusive', clientId: 'B', serial: 2, parent: 1 }],
    };
    assert.equal(findDeadlocks(nested, 'B').length, 1);
  });
});

describe('deadlock finder: one deadlock with requests queued behind it', function () {
  this.timeout(120000);

  // A holds x and, inside x's callback, waits for y; C holds y and, inside
  // y's callback, waits for x. Before C's request for x, n bystanders (B0..)
  // asked for x outside any lock: they are queued ahead of C's, and each
  // waits for the one ahead (deadlock.js graph()). The bystanders hold
  // nothing and made nothing; ending any of them ends no wait.
  function snapshot(n, bystander = (k) => `B${k}`) {
    const held = [
      { name: 'x', mode: 'exclusive', clientId: 'A', serial: 1, parent: 0 },
      { name: 'y', mode: 'exclusive', clientId: 'C', serial: 2, parent: 0 },
    ];
    const pending = [{ name: 'y', mode: 'exclusive', clientId: 'A', serial: 3, parent: 1 }];
    for (let k = 0; k < n; k++) pending.push({ name: 'x', mode: 'exclusive', clientId: bystander(k), serial: 10 + k, parent: 0 });
    pending.push({ name: 'x', mode: 'exclusive', clientId: 'C', serial: 4, parent: 2 });
    return { held, pending };
  }

  // README: published "once while it lasts": the cycle is named by the
  // requests made inside a lock, not once more per request queued in it.
  it('behind 10 bystanders, it is one deadlock to A (one cycle named, one publication)', function () {
    assert.equal(findDeadlocks(snapshot(0), 'A').length, 1);
    const cycles = findDeadlocks(snapshot(10), 'A');
    assert.equal(cycles.length, 1, `${cycles.length} cycles named for one deadlock`);
  });

  // One search per request made inside a lock, not one per pending request
  // of the component, each naming a cycle (O(n^2): 0.9 s for 2000 before,
  // on the event loop of every watching thread every 250 ms).
  it('behind 2000 bystanders, still one cycle named', function () {
    const cycles = findDeadlocks(snapshot(2000), 'A');
    assert.equal(cycles.length, 1);
    assert.equal(cycles[0].mine.length, 1);
  });

  // rejectDeadlocks: the thread of a cycle's lead rejects that request, "and
  // the other requests of the cycle then go on": a request only queued in it,
  // whose key sorts first, must not be the lead (rejected for nothing).
  it('the lead of every named cycle is a request whose withdrawal ends the deadlock', function () {
    const s = snapshot(1, () => '0'); // the bystander's clientId sorts first
    for (const { requests, cycle } of findDeadlocks(s)) {
      const lead = requests[0];
      const after = { held: s.held, pending: s.pending.filter((p) => p.clientId !== lead.clientId || p.serial !== lead.serial) };
      const left = findDeadlocks(after, 'A');
      assert.equal(left.length, 0, `withdrawing ${lead.clientId}'s request (the lead of ${JSON.stringify(cycle)}) left ${JSON.stringify(left.map((f) => f.cycle))}`);
    }
  });
});
