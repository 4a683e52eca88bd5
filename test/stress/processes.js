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
//   - the scope's query(), from a process of its own, equals the model's
//     state: per name, the held locks in grant order and the queue in order.
// At the end every survivor's requests complete and the scope is empty.
//
//   const { runProcessStress } = require('./processes');
//   await runProcessStress({ seed: 1, seconds: 5, processes: 4 });
const childProcess = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { LockModel } = require('./model');
const { rng32 } = require('./participant');

const DEFAULT_PKG = path.resolve(__dirname, '..', '..');
const PARTICIPANT = path.join(__dirname, 'process-participant.js');
const NAMES = ['stress:a', 'stress:b\u0000nul', 'stress:c\uD800'];
const EVENT_BOUND_MS = 10000;

class StressFailure extends Error {}

class Participant {
  constructor(driver, idx) {
    this.idx = idx;
    this.inbox = [];
    this.waiters = [];
    this.exited = null;
    const env = Object.assign({}, process.env, {
      WEB_LOCKS_STRESS: JSON.stringify({ pkg: driver.pkg, scope: driver.scope, dir: driver.dir, idx }),
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

  // The first message matching pred (taken from the inbox), within the bound.
  take(pred, what) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        check = () => true;
        reject(new StressFailure(`p${this.idx}: no ${what} within ${EVENT_BOUND_MS} ms`));
      }, EVENT_BOUND_MS);
      let check = () => {
        const i = this.inbox.findIndex(pred);
        if (i >= 0) {
          clearTimeout(timer);
          resolve(this.inbox.splice(i, 1)[0]);
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

async function runProcessStress(opts = {}) {
  const seed = opts.seed === undefined ? 1 : opts.seed;
  const seconds = opts.seconds === undefined ? 5 : opts.seconds;
  const count = opts.processes || 4;
  const log = opts.log || (() => {});
  const pkg = opts.pkg || DEFAULT_PKG;
  const { openLockManager } = require(pkg);
  const random = rng32(seed);
  const pick = (n) => Math.floor(random() * n);
  const dir = fs.mkdtempSync(path.join(fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir(), 'web-locks-stress-'));
  for (let n = 0; n < NAMES.length; n++) fs.mkdirSync(path.join(dir, 'inside', String(n)), { recursive: true });
  const driver = { pkg, scope: 'stress', dir };
  const model = new LockModel();
  const live = new Map(); // idx -> Participant
  const clientIds = new Map(); // idx -> clientId
  const requests = new Map(); // id -> { idx, nameIndex, mode, abortable, settled }
  const stats = { steps: 0, requests: 0, granted: 0, unavailable: 0, stolen: 0, aborted: 0, released: 0, spawned: 0, killed: 0, exited: 0, crashed: 0 };
  let observer = await openLockManager(driver.scope, { dir });
  let nextIdx = 0;
  let nextId = 1;
  const deadline = Date.now() + seconds * 1000;

  async function spawn() {
    const p = new Participant(driver, nextIdx++);
    const ready = await p.take((m) => m.type === 'ready', 'ready');
    live.set(p.idx, p);
    clientIds.set(p.idx, ready.clientId);
    stats.spawned++;
  }

  // Waits for every event the model made, at the process it is for.
  async function deliver() {
    for (const event of model.takeEvents()) {
      const p = live.get(event.agent);
      if (p === undefined) continue;
      const r = requests.get(event.id);
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
        if (m.ok || m.name !== 'AbortError') throw new StressFailure(`#${event.id} was stolen but settled ${JSON.stringify(m)}`);
        r.settled = true;
        stats.stolen++;
      }
    }
    for (const p of live.values()) {
      const stray = p.inbox.find((m) => m.type === 'granted' || m.type === 'unavailable');
      if (stray !== undefined) throw new StressFailure(`p${p.idx}: an event the model did not make: ${JSON.stringify(stray)}`);
    }
  }

  // A holder saw these markers on entry: each must be of a request that is
  // not held any more (robbed by a steal, or released meanwhile) or of a
  // process that has died, or compatible with its own mode.
  function judgeExclusion(id, seen) {
    const mine = requests.get(id);
    for (const marker of seen) {
      const [mode, idx, other] = marker.split('-');
      const conflict = mine.mode === 'exclusive' || mode === 'exclusive';
      if (conflict && live.has(Number(idx)) && model.stateOf(Number(other)) === 'held') {
        throw new StressFailure(`mutual exclusion: #${id} (${mine.mode}) entered while #${other} (${mode}, p${idx}) is inside`);
      }
    }
  }

  async function compareQuery() {
    const snap = await observer.query();
    const want = model.snapshot();
    for (const name of NAMES) {
      const show = (list, byModel) => list.filter((e) => e.name === name)
        .map((e) => `${e.mode}:${byModel ? clientIds.get(e.agent) : e.clientId}`).join(',');
      for (const key of ['held', 'pending']) {
        const got = show(snap[key], false);
        const expected = show(want[key], true);
        if (got !== expected) throw new StressFailure(`query() ${key} of ${JSON.stringify(name)}: ${got} but the model says ${expected}`);
      }
    }
  }

  // The participant's process ended: the model ends its agent (spec 2.6).
  async function ended(p, how) {
    await p.exit;
    live.delete(p.idx);
    stats[how]++;
    for (const marker of [0, 1, 2].flatMap((n) => fs.readdirSync(path.join(dir, 'inside', String(n))).map((f) => [n, f]))) {
      if (marker[1].split('-')[1] === String(p.idx)) fs.rmSync(path.join(dir, 'inside', String(marker[0]), marker[1]), { force: true });
    }
    model.terminate(p.idx);
    // Opening the scope sweeps dead processes: the model's order holds
    // whether a watcher already did.
    await observer.close();
    observer = await openLockManager(driver.scope, { dir });
  }

  function requestOf(idx, states) {
    const ids = [...requests.entries()].filter(([id, r]) => r.idx === idx && !r.done && states(id, r)).map(([id]) => id);
    return ids.length === 0 ? undefined : ids[pick(ids.length)];
  }

  async function step() {
    const kind = random();
    const p = [...live.values()][pick(live.size)];
    if (kind < 0.03) {
      p.child.kill('SIGKILL');
      await ended(p, 'killed');
    } else if (kind < 0.04) {
      p.send({ cmd: 'exit' });
      await ended(p, 'exited');
    } else if (kind < 0.05) {
      p.send({ cmd: 'crash' });
      await ended(p, 'crashed');
    } else if (kind < 0.6) {
      const id = nextId++;
      const nameIndex = pick(NAMES.length);
      const mode = random() < 0.5 ? 'shared' : 'exclusive';
      const ifAvailable = random() < 0.15;
      const steal = !ifAvailable && mode === 'exclusive' && random() < 0.08;
      const abortable = !ifAvailable && !steal && random() < 0.3;
      requests.set(id, { idx: p.idx, nameIndex, mode, abortable, settled: false, done: false });
      p.send({ cmd: 'request', id, name: NAMES[nameIndex], nameIndex, mode, ifAvailable, steal, abortable });
      await p.take((m) => m.type === 'requested' && m.id === id, `request #${id}`);
      model.request({ id, agent: p.idx, name: NAMES[nameIndex], mode, ifAvailable, steal });
      stats.requests++;
    } else if (kind < 0.9) {
      // Release a callback that runs: a held lock, or one robbed by a steal.
      const id = requestOf(p.idx, (rid, r) => model.stateOf(rid) === 'held' || (r.settled && r.granted));
      if (id === undefined) return;
      const held = model.stateOf(id) === 'held';
      p.send({ cmd: 'release', id });
      await p.take((m) => m.type === 'released' && m.id === id, `release of #${id}`);
      if (held) {
        await p.take((m) => m.type === 'settled' && m.id === id, `settlement of #${id}`);
        model.release(id);
      }
      requests.get(id).done = true;
      stats.released++;
    } else {
      const id = requestOf(p.idx, (rid, r) => r.abortable && model.stateOf(rid) === 'queued');
      if (id === undefined) return;
      p.send({ cmd: 'abort', id });
      await p.take((m) => m.type === 'aborted' && m.id === id, `abort of #${id}`);
      const m = await p.take((x) => x.type === 'settled' && x.id === id, `rejection of #${id}`);
      if (m.ok || m.message !== 'stress abort') throw new StressFailure(`#${id} aborted but settled ${JSON.stringify(m)}`);
      model.abort(id);
      requests.get(id).done = true;
      stats.aborted++;
    }
  }

  try {
    while (Date.now() < deadline) {
      while (live.size < count) await spawn();
      await step();
      await deliver();
      await compareQuery();
      stats.steps++;
      if (stats.steps % 100 === 0) log(`${stats.steps} steps: ${JSON.stringify(stats)}`);
    }
    // Every survivor's requests complete: releasing every held lock, one
    // at a time, grants every queued request in turn.
    let id;
    while ((id = [...requests.keys()].find((rid) => model.stateOf(rid) === 'held')) !== undefined) {
      const p = live.get(requests.get(id).idx);
      p.send({ cmd: 'release', id });
      await p.take((m) => m.type === 'released' && m.id === id, `release of #${id}`);
      model.release(id);
      requests.get(id).done = true;
      await deliver();
    }
    const left = model.snapshot();
    if (left.pending.length !== 0) throw new StressFailure(`requests never granted: ${JSON.stringify(left.pending)}`);
    await compareQuery();
    for (const p of [...live.values()]) {
      p.send({ cmd: 'exit' });
      await ended(p, 'exited');
    }
    const rest = await observer.query();
    if (rest.held.length !== 0 || rest.pending.length !== 0) throw new StressFailure(`left in the scope: ${JSON.stringify(rest)}`);
    return stats;
  } finally {
    for (const p of live.values()) p.child.kill('SIGKILL');
    await observer.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

module.exports = { runProcessStress, StressFailure };
