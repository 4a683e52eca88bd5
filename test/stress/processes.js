'use strict';
// The cross-process stress test: child processes (process-participant.js),
// each an agent of one openLockManager() scope, make random requests
// (shared, exclusive, ifAvailable, steal, with a signal), releases and
// aborts; processes join all the time and end in every way a process ends
// (SIGKILL while holding and waiting, process.exit(), an uncaught
// exception). The driver issues one operation at a time and waits for it to
// be made, so the order of operations is known and the reference model
// (model.js) replays it. After every step it checks:
//   - every event the model makes (grant, ifAvailable miss, steal) reaches
//     its process within a bound (no lost wake-up), and no other event does;
//   - mutual exclusion, from what each holder saw in the file system when it
//     entered (process-participant.js);
//   - the scope's query(), from an agent of the driver's own, equals the
//     model's state: per name, the held locks in grant order and the queue
//     in order.
// At the end every survivor's requests complete and the scope is empty.
//
// The scope is machine-wide (shared memory), or with `postgres`, in a
// PostgreSQL database (scopes.js), where the agents' sessions fail too:
//   - a session ended by the server (pg_terminate_backend, from the driver's
//     admin connection): the process's held locks and pending requests
//     reject with an AbortError, the model terminates its agent (spec 2.6),
//     and its next request joins as a new agent, with a new clientId;
//   - the server restarted (`restarts` times, evenly in the run; a server
//     that test/fixtures/postgres.js started): every agent is terminated,
//     one after another as the server ends the sessions (a grant the
//     processes saw between two ends must fit some order of the ends), a
//     request made while the server is down rejects, and every process
//     goes on as a new agent;
//   - with `cut`, a process cut off the server by a TCP proxy that stops
//     forwarding without closing anything: the process must learn that its
//     session is lost, and the server must end it, within CUT_BOUND_MS
//     (the processes use a keepalive of KEEPALIVE_MS). Off by default: each
//     cut costs about two keepalives of the run's time.
// A model agent is a process's agent: `${idx}.${generation}`. Every fault
// of the mix comes at least once: one that chance did not bring comes at the
// end of the run's time. The operations follow from the seed; the restarts
// come at times, and a failure's rerun command names the steps they came at
// (--restart-at).
//
//   const { runProcessStress } = require('./processes');
//   await runProcessStress({ seed: 1, seconds: 5, processes: 4 });
//   await runProcessStress({ seed: 1, seconds: 5, processes: 4, postgres: true });
const childProcess = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { LockModel } = require('./model');
const { rng32 } = require('./participant');
const scopes = require('./scopes');

const DEFAULT_PKG = path.resolve(__dirname, '..', '..');
const PARTICIPANT = path.join(__dirname, 'process-participant.js');
const NAMES = ['stress:a', 'stress:b\u0000nul', 'stress:c\uD800'];
// An event (a grant, a miss, a steal's rejection, an acknowledgement, a
// process's start) reaches the driver within this. In shared memory it
// takes microseconds, in PostgreSQL a statement, a NOTIFY and an IPC
// message: milliseconds. A lost wake-up never comes, so the bound only has
// to hold on a loaded machine (GC, scheduling, the server's own work).
const EVENT_BOUND_MS = 10000;
// The network cut: the keepalive the processes ask for, and the bound for
// the cut-off process to learn it and for the server to end its session.
const KEEPALIVE_MS = 1000;
const CUT_BOUND_MS = 20000;
const TRACE_LINES = 40;

class StressFailure extends Error {}

function* permutations(list) {
  if (list.length <= 1) {
    yield list;
    return;
  }
  for (let i = 0; i < list.length; i++) {
    for (const rest of permutations([...list.slice(0, i), ...list.slice(i + 1)])) yield [list[i], ...rest];
  }
}

// The cumulative odds of each step. In shared memory: kill, exit, crash,
// request, release, abort. PostgreSQL adds pg_terminate_backend and the cut.
const SHARED_STEPS = [[0.03, 'kill'], [0.04, 'exit'], [0.05, 'crash'], [0.6, 'request'], [0.9, 'release'], [1, 'abort']];
function postgresSteps(cut) {
  const c = cut ? 0.01 : 0;
  return [[0.025, 'kill'], [0.035, 'exit'], [0.04, 'crash'], [0.06, 'terminate'], [0.06 + c, 'cut'],
    [0.6, 'request'], [0.9, 'release'], [1, 'abort']];
}

// The faults, and the stats that count them.
const FAULTS = [['kill', 'killed'], ['exit', 'exited'], ['crash', 'crashed'], ['terminate', 'terminated'], ['cut', 'cut']];

class Participant {
  constructor(driver, idx, options) {
    this.idx = idx;
    this.generation = 0;
    this.agent = `${idx}.0`;
    this.clientId = null;
    this.inbox = [];
    this.waiters = [];
    this.exited = null;
    // Whether the loss of its agent ('lost') is expected now.
    this.expectLoss = false;
    const env = Object.assign({}, process.env, {
      WEB_LOCKS_STRESS: JSON.stringify({ pkg: driver.pkg, scope: driver.scope, options, dir: driver.dir, idx }),
    });
    this.child = childProcess.fork(PARTICIPANT, [], { env, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
    this.stderr = '';
    this.child.stderr.setEncoding('utf8');
    this.child.stderr.on('data', (text) => { this.stderr += text; });
    this.child.on('message', (m) => {
      this.inbox.push(m);
      this.wake();
    });
    this.exit = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.exited = signal || code;
        resolve(this.exited);
        this.wake();
      });
    });
  }

  wake() {
    this.waiters = this.waiters.filter((w) => !w());
  }

  // The first message matching pred (taken from the inbox), within the
  // bound. A failed join, or a loss that the driver did not cause, fails.
  take(pred, what, bound = EVENT_BOUND_MS) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        check = () => true;
        reject(new StressFailure(`p${this.idx}: no ${what} within ${bound} ms`));
      }, bound);
      let check = () => {
        const i = this.inbox.findIndex(pred);
        if (i >= 0) {
          clearTimeout(timer);
          resolve(this.inbox.splice(i, 1)[0]);
          return true;
        }
        const bad = this.inbox.find((m) => m.type === 'joinFailed' || (m.type === 'lost' && !this.expectLoss));
        if (bad !== undefined) {
          clearTimeout(timer);
          reject(new StressFailure(`p${this.idx} (agent ${this.agent}): ${bad.type} ${JSON.stringify(bad)} while waiting for ${what}\n${this.stderr}`));
          return true;
        }
        if (this.exited !== null) {
          clearTimeout(timer);
          reject(new StressFailure(`p${this.idx} exited (${this.exited}) while waiting for ${what}\n${this.stderr}`));
          return true;
        }
        return false;
      };
      if (!check()) this.waiters.push(() => check());
    });
  }

  send(message) {
    this.child.send(message);
  }
}

// The scope the run is on: { scope, stop } (stop ends what was started for
// it).
async function openScope(opts, openLockManager, dir) {
  if (!opts.postgres) return { scope: await scopes.machineWide({ openLockManager, scope: 'stress', dir }), stop: async () => {} };
  let server = opts.postgres;
  let own = null;
  if (typeof server === 'string') server = { url: server };
  else if (server === true && process.env.WEB_LOCKS_TEST_POSTGRES) server = { url: process.env.WEB_LOCKS_TEST_POSTGRES };
  else if (server === true) own = server = await require('../fixtures/postgres').startServer({ restartable: true });
  // A schema of the run's own, so that a server of someone else's is left
  // as it was.
  const schema = `web_locks_stress_${process.pid}`;
  const cut = !!opts.cut;
  const scope = await scopes.postgres({ openLockManager, scope: 'stress', server, schema, cut, keepalive: cut ? KEEPALIVE_MS : undefined });
  return {
    scope,
    async stop() {
      if (own !== null) await own.stop();
      else await scope.drop();
    },
  };
}

async function runProcessStress(opts = {}) {
  const seed = opts.seed === undefined ? 1 : opts.seed;
  const seconds = opts.seconds === undefined ? 5 : opts.seconds;
  const count = opts.processes || 4;
  const log = opts.log || (() => {});
  const pkg = opts.pkg || process.env.WEB_LOCKS_PKG || DEFAULT_PKG;
  const { openLockManager } = require(pkg);
  const random = rng32(seed);
  const pick = (n) => Math.floor(random() * n);
  const dir = fs.mkdtempSync(path.join(fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir(), 'web-locks-stress-'));
  for (let n = 0; n < NAMES.length; n++) fs.mkdirSync(path.join(dir, 'inside', String(n)), { recursive: true });
  const model = new LockModel();
  const live = new Map(); // idx -> Participant
  const clientIds = new Map(); // model agent -> clientId
  const requests = new Map(); // id -> { idx, agent, nameIndex, mode, abortable, settled, granted, done }
  const stats = { steps: 0, requests: 0, granted: 0, unavailable: 0, stolen: 0, aborted: 0, released: 0, spawned: 0, killed: 0, exited: 0, crashed: 0 };
  const trace = [];
  let scope = null;
  let stopScope = async () => {};
  let closed = false;
  let nextIdx = 0;
  let nextId = 1;
  // The steps at which the server was restarted, for a rerun.
  const restartSteps = [];
  let restarts = 0;
  let deadline = 0;

  function note(text) {
    if (opts.verbose) log(`${stats.steps}: ${text}`);
    trace.push(`${stats.steps}: ${text}`);
    if (trace.length > TRACE_LINES) trace.shift();
  }

  function fail(message) {
    throw new StressFailure(message);
  }

  function newClientId(clientId) {
    if ([...clientIds.values()].includes(clientId)) fail(`clientId ${clientId} of a new agent was another agent's`);
    return clientId;
  }

  async function spawn() {
    const idx = nextIdx++;
    const p = new Participant({ pkg, scope: 'stress', dir }, idx, await scope.options(idx));
    const ready = await p.take((m) => m.type === 'ready', 'ready');
    live.set(p.idx, p);
    p.clientId = newClientId(ready.clientId);
    clientIds.set(p.agent, p.clientId);
    stats.spawned++;
    note(`p${idx} started, agent ${p.agent}`);
  }

  function participantOf(agent) {
    for (const p of live.values()) if (p.agent === agent) return p;
    return undefined;
  }

  // Waits for every event the model made, at the process it is for.
  async function deliver() {
    for (const event of model.takeEvents()) {
      const p = participantOf(event.agent);
      if (p === undefined) continue;
      const r = requests.get(event.id);
      note(`  ${event.kind} #${event.id} (${event.agent})`);
      if (event.kind === 'granted') {
        r.granted = true; // so that it can be released once robbed
        const m = await p.take((x) => x.type === 'granted' && x.id === event.id, `grant of #${event.id}`);
        judgeExclusion(event.id, m.seen);
        stats.granted++;
      } else if (event.kind === 'unavailable') {
        await p.take((x) => x.type === 'unavailable' && x.id === event.id, `miss of #${event.id}`);
        stats.unavailable++;
      } else {
        const m = await p.take((x) => x.type === 'settled' && x.id === event.id, `steal of #${event.id}`);
        if (m.ok || m.name !== 'AbortError') fail(`#${event.id} was stolen but settled ${JSON.stringify(m)}`);
        r.settled = true;
        stats.stolen++;
      }
    }
    for (const p of live.values()) {
      const stray = p.inbox.find((m) => m.type === 'granted' || m.type === 'unavailable');
      if (stray !== undefined) fail(`p${p.idx}: an event the model did not make: ${JSON.stringify(stray)}`);
    }
  }

  // A holder saw these markers on entry: each must be of a request that is
  // not held any more (robbed by a steal, released meanwhile, or its agent
  // ended) or of a process that has died, or compatible with its own mode.
  // The conflict found, in the state of `m`, or null.
  function conflictOf(id, seen, m) {
    const mine = requests.get(id);
    for (const marker of seen) {
      const [mode, idx, other] = marker.split('-');
      const conflict = mine.mode === 'exclusive' || mode === 'exclusive';
      if (conflict && live.has(Number(idx)) && m.stateOf(Number(other)) === 'held') {
        return `mutual exclusion: #${id} (${mine.mode}) entered while #${other} (${mode}, p${idx}) is inside`;
      }
    }
    return null;
  }

  function judgeExclusion(id, seen) {
    const conflict = conflictOf(id, seen, model);
    if (conflict !== null) fail(conflict);
  }

  async function compareQuery() {
    const snap = await scope.query();
    const want = model.snapshot();
    for (const name of NAMES) {
      const show = (list, byModel) => list.filter((e) => e.name === name)
        .map((e) => `${e.mode}:${byModel ? clientIds.get(e.agent) : e.clientId}`).join(',');
      for (const key of ['held', 'pending']) {
        const got = show(snap[key], false);
        const expected = show(want[key], true);
        if (got !== expected) fail(`query() ${key} of ${JSON.stringify(name)}: ${got} but the model says ${expected}`);
      }
    }
    if (scope.countsAgree !== undefined) await scope.countsAgree();
  }

  // The requests of a model agent that the manager holds for it.
  function inManager(agent) {
    return [...requests.entries()].filter(([id, r]) => r.agent === agent && model.stateOf(id) !== undefined).map(([id]) => id);
  }

  // The agent's end, for the stats: what it held or waited for.
  function countEnd(agent, how) {
    const ids = inManager(agent);
    if (ids.some((id) => model.stateOf(id) === 'held')) stats[`${how}Holding`] = (stats[`${how}Holding`] || 0) + 1;
    if (ids.some((id) => model.stateOf(id) === 'queued')) stats[`${how}Waiting`] = (stats[`${how}Waiting`] || 0) + 1;
  }

  // The manager has ended these agents; the longest it took, in the stats.
  async function managerEnded(clientIdsGone, since, bound) {
    await scope.ended(clientIdsGone, bound);
    stats.slowestEndMs = Math.max(stats.slowestEndMs || 0, Date.now() - since);
  }

  // The participant's process ended: the model ends its agent (spec 2.6).
  async function ended(p, how, since) {
    await scopes.within(p.exit, EVENT_BOUND_MS, `p${p.idx}'s exit`);
    live.delete(p.idx);
    stats[how]++;
    for (const marker of [0, 1, 2].flatMap((n) => fs.readdirSync(path.join(dir, 'inside', String(n))).map((f) => [n, f]))) {
      if (marker[1].split('-')[1] === String(p.idx)) fs.rmSync(path.join(dir, 'inside', String(marker[0]), marker[1]), { force: true });
    }
    await managerEnded([p.clientId], since);
    if (scope.forget) await scope.forget(p.idx);
    model.terminate(p.agent);
    note(`p${p.idx} ${how}, agent ${p.agent} ended`);
  }

  // The process's agent was ended under it: its own lock and the requests
  // the manager held for it reject with an AbortError.
  async function lost(p, ids, bound) {
    const m = await p.take((x) => x.type === 'lost', `loss of agent ${p.agent}`, bound);
    if (m.name !== 'AbortError') fail(`p${p.idx}: its own lock was lost with ${JSON.stringify(m)}`);
    for (const id of ids) {
      const s = await p.take((x) => x.type === 'settled' && x.id === id, `rejection of #${id} (agent ${p.agent} lost)`);
      if (s.ok || s.name !== 'AbortError') fail(`#${id} of lost agent ${p.agent} settled ${JSON.stringify(s)}`);
      requests.get(id).settled = true;
    }
  }

  // The process goes on as a new agent.
  async function rejoin(p) {
    p.send({ cmd: 'rejoin' });
    const ready = await p.take((m) => m.type === 'ready', `p${p.idx} joining again`);
    p.generation++;
    p.agent = `${p.idx}.${p.generation}`;
    p.clientId = newClientId(ready.clientId);
    clientIds.set(p.agent, p.clientId);
    note(`p${p.idx} joined again as agent ${p.agent}`);
  }

  // A session ended by the server, or a process cut off it.
  async function loseSession(p, how) {
    const ids = inManager(p.agent);
    countEnd(p.agent, how);
    p.expectLoss = true;
    const since = Date.now();
    let bound = EVENT_BOUND_MS;
    if (how === 'terminated') {
      const pid = await scope.terminate(p.clientId);
      note(`p${p.idx}: pg_terminate_backend(${pid}) of agent ${p.agent}, holding or waiting for ${ids.map((id) => `#${id}`).join(' ')}`);
    } else {
      bound = CUT_BOUND_MS;
      if (scope.cut(p.idx) === 0) fail(`p${p.idx}: no connection to cut`);
      note(`p${p.idx}: cut off the server, agent ${p.agent} holding or waiting for ${ids.map((id) => `#${id}`).join(' ')}`);
    }
    await lost(p, ids, bound);
    await managerEnded([p.clientId], since, bound);
    p.expectLoss = false;
    model.terminate(p.agent);
    stats[how] = (stats[how] || 0) + 1;
    await rejoin(p);
  }

  // The server stopped and started again: every agent is ended.
  async function restart() {
    restartSteps.push(stats.steps);
    const all = [...live.values()];
    const held = new Map(all.map((p) => [p, inManager(p.agent)]));
    const before = all.map((p) => p.clientId);
    for (const p of all) p.expectLoss = true;
    note('server restart: down');
    await scope.down();
    for (const p of all) await lost(p, held.get(p));
    // The server ends the sessions one after another, and the agents that
    // are still there sweep those that are not: a request may be granted
    // between two ends, and its callback run before its own agent's end.
    const granted = new Map(); // id -> what its holder saw
    for (const p of all) {
      for (const m of p.inbox.filter((x) => x.type === 'granted')) {
        granted.set(m.id, m.seen);
        requests.get(m.id).granted = true;
      }
      p.inbox = p.inbox.filter((x) => x.type !== 'granted');
    }
    const order = endingOrder(all.map((p) => p.agent), granted);
    if (order === null) fail(`no order of the agents' ends grants ${[...granted.keys()].map((id) => `#${id}`).join(' ')} (what their holders saw: ${JSON.stringify([...granted])})`);
    note(`server restart: the agents ended as ${order.join(' ')}${granted.size > 0 ? `, granting ${[...granted.keys()].map((id) => `#${id}`).join(' ')} meanwhile` : ''}`);
    for (const agent of order) model.terminate(agent);
    model.takeEvents();
    stats.grantedInRestart = (stats.grantedInRestart || 0) + granted.size;
    // A request while the server is down rejects: none waits for a server
    // that is gone.
    const p = all[pick(all.length)];
    const id = nextId++;
    requests.set(id, { idx: p.idx, agent: null, nameIndex: 0, mode: 'exclusive', abortable: false, settled: false, done: true });
    p.send({ cmd: 'request', id, name: NAMES[0], nameIndex: 0, mode: 'exclusive', ifAvailable: false, steal: false, abortable: false });
    const ack = await p.take((m) => m.type === 'requested' && m.id === id, `request #${id} while the server is down`);
    const settled = await p.take((m) => m.type === 'settled' && m.id === id, `rejection of #${id} while the server is down`);
    if (settled.ok || ack.queryFailed === undefined) fail(`#${id}, made while the server was down: ${JSON.stringify([ack, settled])}`);
    note('server restart: up');
    await scope.up();
    // Every process, and the observer, joins again at once, as after a
    // real restart: their joins sweep the agents of before the restart
    // together.
    for (const q of all) q.expectLoss = false;
    await Promise.all([scope.reopen(), ...all.map((q) => rejoin(q))]);
    // The new agents' joins swept the agents of before the restart.
    await scope.ended(before);
    stats.restarts = (stats.restarts || 0) + 1;
  }

  // An order of the agents' ends in which the model grants every request
  // in `granted` (its holder seeing no conflict), or null if none does. Not
  // every grant made between two ends is seen: its agent may end before the
  // notification arrives.
  function endingOrder(agents, granted) {
    for (const order of permutations(agents)) {
      const m = model.clone();
      const seen = new Set();
      let ok = true;
      for (const agent of order) {
        m.terminate(agent);
        for (const event of m.takeEvents()) {
          if (event.kind !== 'granted' || !granted.has(event.id)) continue;
          if (conflictOf(event.id, granted.get(event.id), m) !== null) ok = false;
          seen.add(event.id);
        }
      }
      if (ok && [...granted.keys()].every((id) => seen.has(id))) return order;
    }
    return null;
  }

  function requestOf(idx, states) {
    const ids = [...requests.entries()].filter(([id, r]) => r.idx === idx && !r.done && states(id, r)).map(([id]) => id);
    return ids.length === 0 ? undefined : ids[pick(ids.length)];
  }

  function acknowledged(p, m) {
    if (m.queryFailed !== undefined) fail(`p${p.idx}: query() after the operation failed: ${JSON.stringify(m)}`);
    return m;
  }

  async function step(steps) {
    const kind = random();
    const p = [...live.values()][pick(live.size)];
    await act(steps.find(([odds]) => kind < odds)[1], p);
  }

  async function act(action, p) {
    if (action === 'kill' || action === 'exit' || action === 'crash') note(`p${p.idx} (${p.agent}): ${action}`);
    if (action === 'kill') {
      countEnd(p.agent, 'killed');
      const since = Date.now();
      p.child.kill('SIGKILL');
      await ended(p, 'killed', since);
    } else if (action === 'exit') {
      p.send({ cmd: 'exit' });
      await ended(p, 'exited', Date.now());
    } else if (action === 'crash') {
      p.send({ cmd: 'crash' });
      await ended(p, 'crashed', Date.now());
    } else if (action === 'terminate') {
      await loseSession(p, 'terminated');
    } else if (action === 'cut') {
      await loseSession(p, 'cut');
    } else if (action === 'request') {
      const id = nextId++;
      const nameIndex = pick(NAMES.length);
      const mode = random() < 0.5 ? 'shared' : 'exclusive';
      const ifAvailable = random() < 0.15;
      const steal = !ifAvailable && mode === 'exclusive' && random() < 0.08;
      const abortable = !ifAvailable && !steal && random() < 0.3;
      requests.set(id, { idx: p.idx, agent: p.agent, nameIndex, mode, abortable, settled: false, done: false });
      note(`p${p.idx} (${p.agent}) requests #${id}: ${nameIndex} ${mode}${ifAvailable ? ' ifAvailable' : ''}${steal ? ' steal' : ''}${abortable ? ' abortable' : ''}`);
      p.send({ cmd: 'request', id, name: NAMES[nameIndex], nameIndex, mode, ifAvailable, steal, abortable });
      acknowledged(p, await p.take((m) => m.type === 'requested' && m.id === id, `request #${id}`));
      model.request({ id, agent: p.agent, name: NAMES[nameIndex], mode, ifAvailable, steal });
      stats.requests++;
    } else if (action === 'release') {
      // Release a callback that runs: a held lock, or one robbed by a steal
      // or lost with its agent.
      const id = requestOf(p.idx, (rid, r) => model.stateOf(rid) === 'held' || (r.settled && r.granted));
      if (id === undefined) return;
      const held = model.stateOf(id) === 'held';
      note(`p${p.idx} releases #${id}${held ? '' : ' (not held any more)'}`);
      p.send({ cmd: 'release', id });
      acknowledged(p, await p.take((m) => m.type === 'released' && m.id === id, `release of #${id}`));
      if (held) {
        await p.take((m) => m.type === 'settled' && m.id === id, `settlement of #${id}`);
        model.release(id);
      }
      requests.get(id).done = true;
      stats.released++;
    } else {
      const id = requestOf(p.idx, (rid, r) => r.abortable && model.stateOf(rid) === 'queued');
      if (id === undefined) return;
      note(`p${p.idx} aborts #${id}`);
      p.send({ cmd: 'abort', id });
      acknowledged(p, await p.take((m) => m.type === 'aborted' && m.id === id, `abort of #${id}`));
      const m = await p.take((x) => x.type === 'settled' && x.id === id, `rejection of #${id}`);
      if (m.ok || m.message !== 'stress abort') fail(`#${id} aborted but settled ${JSON.stringify(m)}`);
      model.abort(id);
      requests.get(id).done = true;
      stats.aborted++;
    }
  }

  let started = Date.now();
  try {
    ({ scope, stop: stopScope } = await openScope(opts, openLockManager, dir));
    stats.setupMs = Date.now() - started;
    // The run's time starts once its scope is there (a server takes seconds
    // to start).
    started = Date.now();
    deadline = started + seconds * 1000;
    const steps = scope.kind === 'postgres' ? postgresSteps(!!opts.cut) : SHARED_STEPS;
    restarts = opts.restarts === undefined ? (scope.restartable ? 1 : 0) : opts.restarts;
    if (restarts > 0 && !scope.restartable) fail('the server cannot be restarted (a server of its own is, with postgres: true)');
    // The restarts: at the given steps (a rerun), else evenly in time.
    const restartAt = opts.restartAt ? [...opts.restartAt] : null;
    const restartTimes = Array.from({ length: restarts }, (_, k) => started + ((k + 1) * seconds * 1000) / (restarts + 1));
    const restartDue = () => (restartAt ? restartAt.length > 0 && stats.steps >= restartAt[0] : restartTimes.length > 0 && Date.now() >= restartTimes[0]);

    // At least minSteps steps however long they take: a loaded machine (or
    // a slower Node) makes fewer in the time, and a short run must still
    // bring enough of each kind of step to mean something.
    const minSteps = opts.minSteps || 0;
    while (Date.now() < deadline || stats.steps < minSteps || (restartAt ? restartAt.length > 0 : restartTimes.length > 0)) {
      while (live.size < count) await spawn();
      if (restartDue()) {
        if (restartAt) restartAt.shift();
        else restartTimes.shift();
        await restart();
      } else {
        await step(steps);
      }
      await deliver();
      await compareQuery();
      stats.steps++;
      if (stats.steps % 100 === 0) log(`${stats.steps} steps: ${JSON.stringify(stats)}`);
    }
    // A short run has every fault of its mix at least once: one that chance
    // did not bring comes now, to a process that holds or waits if one does.
    for (const [action, counted] of FAULTS) {
      if (!steps.some(([odds, a], i) => a === action && odds > (i === 0 ? 0 : steps[i - 1][0])) || stats[counted]) continue;
      while (live.size < count) await spawn();
      const busy = [...live.values()].filter((p) => inManager(p.agent).length > 0);
      const among = busy.length > 0 ? busy : [...live.values()];
      note(`${action}, which had not come yet`);
      await act(action, among[pick(among.length)]);
      await deliver();
      await compareQuery();
      stats.steps++;
    }
    // Every survivor's requests complete: releasing every held lock, one
    // at a time, grants every queued request in turn.
    let id;
    while ((id = [...requests.keys()].find((rid) => model.stateOf(rid) === 'held')) !== undefined) {
      const p = live.get(requests.get(id).idx);
      note(`p${p.idx} releases #${id} (the end)`);
      p.send({ cmd: 'release', id });
      acknowledged(p, await p.take((m) => m.type === 'released' && m.id === id, `release of #${id}`));
      await p.take((m) => m.type === 'settled' && m.id === id, `settlement of #${id}`);
      model.release(id);
      requests.get(id).done = true;
      await deliver();
    }
    const left = model.snapshot();
    if (left.pending.length !== 0) fail(`requests never granted: ${JSON.stringify(left.pending)}`);
    await compareQuery();
    for (const p of [...live.values()]) {
      p.send({ cmd: 'exit' });
      await ended(p, 'exited', Date.now());
    }
    const rest = await scope.query();
    if (rest.held.length !== 0 || rest.pending.length !== 0) fail(`left in the scope: ${JSON.stringify(rest)}`);
    closed = true;
    const gone = await scope.close();
    if (gone.agents !== 0 || gone.requests !== 0) fail(`left in the database once every agent is gone: ${JSON.stringify(gone)}`);
    stats.seconds = Math.round((Date.now() - started) / 100) / 10;
    return stats;
  } catch (error) {
    if (error instanceof Error) {
      const rerun = ['node test/stress/run.js', opts.postgres ? '--postgres' : '', opts.cut ? '--cut' : '', `--processes ${count}`,
        `--seed ${seed}`, `--seconds ${seconds}`, opts.minSteps ? `--min-steps ${opts.minSteps}` : '',
        restarts > 0 || opts.restartAt ? `--restart-at ${restartSteps.join(',') || 'none'}` : '']
        .filter(Boolean).join(' ');
      error.message = `${error.message}\n(seed ${seed}, step ${stats.steps}; rerun: ${rerun})\n${JSON.stringify(stats)}\n--- last operations ---\n${trace.join('\n')}`;
    }
    throw error;
  } finally {
    for (const p of live.values()) p.child.kill('SIGKILL');
    if (scope !== null && !closed) await scope.close().catch(() => {});
    await stopScope().catch(() => {});
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

module.exports = { runProcessStress, StressFailure };
