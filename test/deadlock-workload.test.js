'use strict';
// The deadlock watch (lib/deadlock.js) against a model, on random
// workloads run by real agents (worker threads, each its own agent).
//
// A workload: 2 or 3 agents, each with 1 or 2 independent tasks; a task is
// a chain of 1 to 3 requests (a random name of three, a random mode), each
// made inside the callback of the one before once that one is granted. The
// test makes the requests round by round in a fixed order, so that the
// manager's state is the model's (checked with query()). Then:
// - the model says which requests are deadlocked, by simulation: every
//   task is told to finish (a callback returns once the request made inside
//   it is done), locks are released and granted as the spec's queues say,
//   and what is never granted is stuck;
// - the model's wait-for graph, by brute force, says which requests lie on
//   a cycle;
// - the watch, within its time, must report every request on a cycle to its
//   own agent, each cycle to every agent in it once, and nothing else: no
//   cycle with a request that is not stuck. Independent tasks of one agent
//   contending (a false cycle for a watch that took an agent as one task)
//   are common in these workloads.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { PKG, random, uniq, scopeName } = require('./fixtures/util');

const WORKER = path.join(__dirname, 'fixtures', 'deadlock-worker.js');
const machine = ['linux', 'darwin', 'win32'].includes(process.platform);
const WORKLOADS = Number(process.env.WEB_LOCKS_DEADLOCK_WORKLOADS) || 24;
// How long the watch has to report (it publishes after two looks, about
// 270 ms after a request starts to wait), and how long nothing may be
// reported where there is no deadlock.
const REPORT_MS = 3000;
const QUIET_MS = 800;

function workload(rand, prefix) {
  const pick = (n) => Math.floor(rand() * n);
  const agents = 2 + pick(2);
  const tasks = [];
  for (let agent = 0; agent < agents; agent++) {
    for (let t = 1 + pick(2); t > 0; t--) {
      const steps = Array.from({ length: 1 + pick(3) }, () => ({ name: `${prefix}-${'abc'[pick(3)]}`, mode: rand() < 0.3 ? 'shared' : 'exclusive' }));
      tasks.push({ agent, steps });
    }
  }
  return { agents, tasks };
}

// The spec's lock manager, for one workload: requests are
// { id, agent, task, level, name, mode }.
class Model {
  constructor() {
    this.held = new Map(); // name -> [requests]
    this.queues = new Map(); // name -> [requests]
  }

  grantable(r) {
    const held = this.held.get(r.name) || [];
    const queue = this.queues.get(r.name) || [];
    if (queue[0] !== r) return false;
    return r.mode === 'exclusive' ? held.length === 0 : held.every((h) => h.mode === 'shared');
  }

  process(name, granted) {
    const queue = this.queues.get(name) || [];
    while (queue.length > 0 && this.grantable(queue[0])) {
      const r = queue.shift();
      if (!this.held.has(name)) this.held.set(name, []);
      this.held.get(name).push(r);
      granted(r);
    }
  }

  request(r, granted) {
    if (!this.queues.has(r.name)) this.queues.set(r.name, []);
    this.queues.get(r.name).push(r);
    this.process(r.name, granted);
  }

  release(r, granted) {
    const held = this.held.get(r.name);
    held.splice(held.indexOf(r), 1);
    this.process(r.name, granted);
  }

  copy() {
    const m = new Model();
    for (const [k, v] of this.held) m.held.set(k, [...v]);
    for (const [k, v] of this.queues) m.queues.set(k, [...v]);
    return m;
  }
}

// Which requests are never granted if every task is told to finish: a
// held lock is released once the request made inside it (its child) is
// done, or at once if it has none.
function stuck(model, requests) {
  const m = model.copy();
  const child = new Map(); // request -> the request made inside it
  for (const r of requests) if (r.parent !== undefined) child.set(r.parent, r);
  const done = new Set();
  const held = new Set();
  for (const list of m.held.values()) for (const r of list) held.add(r);
  const ready = [];
  const consider = (r) => {
    const c = child.get(r);
    if (c === undefined || done.has(c)) ready.push(r);
  };
  for (const r of held) consider(r);
  while (ready.length > 0) {
    const r = ready.pop();
    if (done.has(r)) continue;
    done.add(r);
    m.release(r, (g) => { held.add(g); consider(g); });
    if (r.parent !== undefined && held.has(r.parent)) consider(r.parent);
  }
  return new Set(requests.filter((r) => !done.has(r)));
}

// The model's wait-for graph (lib/deadlock.js's header), by brute force:
// the pending requests that can reach themselves.
function onCycles(model, requests) {
  const heldNow = new Set();
  for (const list of model.held.values()) for (const r of list) heldNow.add(r);
  const out = (r) => {
    const next = [];
    if (!heldNow.has(r)) {
      const queue = model.queues.get(r.name);
      const i = queue.indexOf(r);
      if (i > 0) next.push(queue[i - 1]);
      for (const h of model.held.get(r.name) || []) if (r.mode === 'exclusive' || h.mode === 'exclusive') next.push(h);
    } else {
      for (const c of requests) if (c.parent === r) next.push(c);
    }
    return next;
  };
  const result = new Set();
  for (const r of requests) {
    if (heldNow.has(r)) continue;
    const seen = new Set();
    const stack = out(r);
    while (stack.length > 0) {
      const v = stack.pop();
      if (v === r) {
        result.add(r);
        break;
      }
      if (seen.has(v)) continue;
      seen.add(v);
      stack.push(...out(v));
    }
  }
  return result;
}

function spawnAgent(data) {
  const worker = new Worker(WORKER, { workerData: data, stdout: false, stderr: false });
  const agent = { worker, heard: [], waiters: [], messages: [] };
  worker.on('message', (m) => {
    if (m.error) agent.error = m.error;
    if (m.deadlock) agent.heard.push(m.deadlock);
    agent.messages.push(m);
    for (const w of [...agent.waiters]) {
      if (w.pred(m)) {
        agent.waiters.splice(agent.waiters.indexOf(w), 1);
        w.resolve(m);
      }
    }
  });
  agent.next = (pred, what, ms = 10000) => new Promise((resolve, reject) => {
    const found = agent.messages.find(pred);
    if (found !== undefined) {
      agent.messages.splice(agent.messages.indexOf(found), 1);
      resolve(found);
      return;
    }
    const timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms${agent.error ? `: ${agent.error}` : ''}`)), ms);
    agent.waiters.push({ pred, resolve: (m) => { clearTimeout(timer); agent.messages.splice(agent.messages.indexOf(m), 1); resolve(m); } });
  });
  return agent;
}

const within = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
// Resolves once pred() holds, looked at after each message of any agent,
// or after ms with whether it holds then.
function until(agents, pred, ms) {
  return new Promise((resolve) => {
    const check = () => {
      if (!pred()) return;
      done();
      resolve(true);
    };
    const timer = setTimeout(() => {
      done();
      resolve(pred());
    }, ms);
    const done = () => {
      clearTimeout(timer);
      for (const a of agents) a.worker.off('message', check);
    };
    for (const a of agents) a.worker.on('message', check);
    check();
  });
}
const cycleKey = (cycle) => JSON.stringify([...cycle].map((c) => JSON.stringify(c)).sort());

const SETUPS = [
  { title: 'the process-wide manager', data: () => ({}) },
  {
    title: 'a scope',
    skip: !machine && 'no machine-wide manager on this platform',
    data: (dir) => ({ scope: scopeName('workload'), options: { dir } }),
  },
  {
    title: 'PostgreSQL',
    data: async () => {
      const { postgres } = require('./fixtures/postgres');
      return { scope: scopeName('workload'), options: { postgres: (await postgres()).url } };
    },
  },
];

for (const setup of SETUPS) {
  describe(`the deadlock watch on random workloads against a model: ${setup.title}`, function () {
    this.timeout(WORKLOADS * (REPORT_MS + 2000) + 30000);
    let dir;
    let agents = [];

    before(async function () {
      if (setup.skip) this.skip();
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-workload-'));
      const data = { pkg: PKG, prefix: uniq('w'), ...(await setup.data(dir)) };
      agents = [0, 1, 2].map(() => spawnAgent(data));
      for (const a of agents) a.clientId = (await a.next((m) => m.ready, 'an agent ready')).ready;
    });
    after(async () => {
      for (const a of agents) {
        a.worker.postMessage({ op: 'close' });
        await a.worker.terminate();
      }
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
    });

    it(`reports every cycle to each of its agents once, and no false one, in ${WORKLOADS} workloads`, async function () {
      // Fixed by default: how many workloads deadlock is then known.
      const base = Number(process.env.WEB_LOCKS_TEST_SEED) || 1;
      let deadlocked = 0;
      let clean = 0;
      for (let run = 0; run < WORKLOADS; run++) {
        const seed = base + run;
        const rand = random(seed);
        const prefix = uniq(`s${seed}`);
        const { agents: n, tasks } = workload(rand, prefix);
        const where = `seed ${seed} (WEB_LOCKS_TEST_SEED=${seed}): ${JSON.stringify(tasks)}`;
        const model = new Model();
        const requests = [];
        const innermost = new Map(); // task -> its innermost granted request
        const grants = new Set();
        for (const a of agents) a.heard.length = 0;
        let id = 0;
        for (let level = 0; level < 3; level++) {
          for (let t = 0; t < tasks.length; t++) {
            const { agent, steps } = tasks[t];
            if (level >= steps.length) continue;
            const parent = innermost.get(t);
            if (level > 0 && (parent === undefined || parent.level !== level - 1)) continue;
            const r = { id: id++, agent, task: t, level, parent, ...steps[level] };
            requests.push(r);
            const granted = [];
            model.request(r, (g) => granted.push(g));
            agents[agent].worker.postMessage({ op: 'request', id: r.id, task: t, name: r.name, mode: r.mode });
            await agents[agent].next((m) => m.made === r.id, `request ${r.id} made`);
            for (const g of granted) {
              await agents[g.agent].next((m) => m.granted === g.id, `request ${g.id} granted, ${where}`);
              grants.add(g);
              innermost.set(g.task, g);
            }
          }
        }
        // The manager's state is the model's (one query() made by an agent
        // of this workload's manager).
        agents[0].worker.postMessage({ op: 'query' });
        const { state } = await agents[0].next((m) => m.state !== undefined, 'the state');
        const describe = (r) => `${r.name} ${r.mode} ${agents[r.agent].clientId}`;
        const mine = (e) => e.name.startsWith(`${prefix}-`);
        const real = {
          held: state.held.filter(mine).map((e) => `${e.name} ${e.mode} ${e.clientId}`).sort(),
          pending: state.pending.filter(mine).map((e) => `${e.name} ${e.mode} ${e.clientId}`),
        };
        const modelled = { held: [], pending: [] };
        for (const list of model.held.values()) for (const r of list) modelled.held.push(describe(r));
        modelled.held.sort();
        for (const name of [...model.queues.keys()]) for (const r of model.queues.get(name)) modelled.pending.push(describe(r));
        const byName = (list) => [...list].sort((x, y) => (x.split(' ')[0] < y.split(' ')[0] ? -1 : x.split(' ')[0] > y.split(' ')[0] ? 1 : 0));
        assert.deepEqual({ held: real.held, pending: byName(real.pending) }, { held: modelled.held, pending: byName(modelled.pending) }, `${where}: the manager's state is not the model's`);
        const stuckSet = stuck(model, requests);
        const cycles = onCycles(model, requests);
        for (const r of cycles) assert.ok(stuckSet.has(r), `${where}: request ${r.id} is on a cycle but not stuck`);
        if (stuckSet.size > 0) assert.ok(cycles.size > 0, `${where}: stuck requests but no cycle`);
        const clientOf = (r) => agents[r.agent].clientId;
        // Each request on a cycle is reported to its agent.
        const expectedFor = new Map(); // agent index -> set of `${name}|${mode}` of its requests on cycles
        for (const r of cycles) {
          // Named by the requests made inside a lock (lib/deadlock.js).
          if (r.parent === undefined) continue;
          if (!expectedFor.has(r.agent)) expectedFor.set(r.agent, []);
          expectedFor.get(r.agent).push(r);
        }
        if (expectedFor.size > 0) {
          deadlocked++;
          const covered = (a) => expectedFor.get(a).every((r) => agents[a].heard.some((cycle) =>
            cycle.some((c) => c.name === r.name && c.mode === r.mode && c.clientId === clientOf(r))));
          await until(agents, () => [...expectedFor.keys()].every(covered), REPORT_MS);
          for (const a of expectedFor.keys()) assert.ok(covered(a), `${where}: agent ${a} heard ${JSON.stringify(agents[a].heard)}, not every request of its on a cycle`);
        } else {
          clean++;
          await within(QUIET_MS);
        }
        // Nothing false: every reported request is stuck (by agent, name and
        // mode), each cycle heard by each of its agents, and once.
        for (let a = 0; a < n; a++) {
          const keys = agents[a].heard.map(cycleKey);
          assert.equal(new Set(keys).size, keys.length, `${where}: agent ${a} heard a cycle twice`);
          for (const cycle of agents[a].heard) {
            for (const c of cycle) {
              const match = [...stuckSet].some((r) => r.name === c.name && r.mode === c.mode && clientOf(r) === c.clientId && !grants.has(r));
              assert.ok(match, `${where}: agent ${a} heard ${JSON.stringify(cycle)}, whose ${JSON.stringify(c)} is no stuck request`);
              const member = agents.findIndex((x) => x.clientId === c.clientId);
              const k = cycleKey(cycle);
              await until(agents, () => agents[member].heard.some((h) => cycleKey(h) === k), REPORT_MS);
              assert.ok(agents[member].heard.some((h) => cycleKey(h) === k), `${where}: agent ${member} of ${JSON.stringify(cycle)} did not hear it`);
            }
          }
        }
        // No grant that the model did not make.
        for (let a = 0; a < n; a++) {
          const extra = agents[a].messages.filter((m) => m.granted !== undefined);
          assert.deepEqual(extra, [], `${where}: agent ${a} was granted what the model holds pending`);
        }
        // One agent's reset grants what another's requests waited for:
        // those grants are of this workload, whose messages go with it.
        for (let a = 0; a < n; a++) {
          agents[a].worker.postMessage({ op: 'reset' });
          await agents[a].next((m) => m.clean, 'an agent reset');
        }
        for (const a of agents) a.messages.length = 0;
      }
      const least = Math.max(1, Math.floor(WORKLOADS / 8));
      assert.ok(deadlocked >= least && clean >= least, `the workloads had ${deadlocked} deadlocks and ${clean} without: too few of one`);
    });
  });
}
