'use strict';
// The randomized multi-thread stress test: the main thread and several
// worker_threads run random operations on a few names (see participant.js),
// while the main thread also spawns new workers and ends existing ones in
// every way a thread can end (terminate(), process.exit(), an uncaught
// exception, process.exit() inside a lock callback, terminate() while a
// callback spins). Every manager call is recorded in the order the manager
// saw it (instrument.js); at quiescent points the records are replayed
// through the reference model (check.js), and the threads' own views and the
// public query() are compared with it.
//
//   const { runStress } = require('./driver');
//   const result = await runStress({ seed: 1, seconds: 5, threads: 4 });
//
// Must run on a thread that has not loaded the package yet (it loads it
// through the instrumentation): run.js, or a child process of a test.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const L = require('./layout');
const { instrument } = require('./instrument');
const { Participant, rng32, mix } = require('./participant');
const { Checker, CheckError } = require('./check');

const DEFAULT_PKG = path.resolve(__dirname, '..', '..');

// A few names, among them ones that are hard on the native side: a NUL, a
// lone surrogate, and one too long for the binding's stack buffer.
const NAMES = ['stress:a', 'stress:b\u0000nul', 'stress:c\uD800', `stress:d${'x'.repeat(300)}`];

const END_KINDS = ['terminate', 'exit', 'exitInCallback', 'throw', 'spinInCallback', 'terminate'];

class StressFailure extends Error {}

function describeRecord(rec, names) {
  const { k, t, tid } = rec;
  const parts = [`#${t}`, `t${tid}`, k];
  if (rec.r !== undefined) parts.push(`r${rec.r}`);
  if (rec.n !== undefined) parts.push(`name${rec.n}`);
  if (rec.mode) parts.push(rec.mode);
  if (rec.flags) parts.push(rec.flags & 2 ? 'steal' : 'ifAvailable');
  if (rec.robbed && rec.robbed.length) parts.push(`robbed=[${rec.robbed}]`);
  if (rec.of !== undefined) parts.push(`of=#${rec.of}`);
  if ('result' in rec) parts.push(`-> ${rec.result}`);
  if (rec.ev !== undefined) parts.push(['', 'GRANTED', 'UNAVAILABLE', '', 'STOLEN', 'GRANTED|STOLEN'][rec.ev] || `ev=${rec.ev}`);
  if (rec.lock !== undefined) parts.push(rec.lock ? 'with lock' : 'with null');
  if (rec.message) parts.push(rec.message);
  if (rec.kind) parts.push(rec.kind);
  if (rec.snap) {
    const fmt = (l) => l.map(([n, m, t2]) => `${n}${m ? 's' : 'x'}@t${t2}`).join(' ');
    parts.push(`| held ${fmt(rec.snap.held)} | pending ${fmt(rec.snap.pending)}`);
  }
  return parts.join(' ');
}

async function runStress(options = {}) {
  const seed = options.seed === undefined ? (Math.random() * 2 ** 31) >>> 0 : options.seed >>> 0;
  const seconds = options.seconds === undefined ? 5 : options.seconds;
  const threads = options.threads === undefined ? 4 : options.threads;
  const pkg = options.pkg || process.env.WEB_LOCKS_PKG || DEFAULT_PKG;
  const epochMs = options.epochMs || 250;
  const log = options.log || (() => {});
  const names = NAMES;

  const sab = new SharedArrayBuffer(L.SIZE * 4);
  const S = new Int32Array(sab);
  let records = [];
  const checker = new Checker();
  const random = rng32(mix(seed, 0x7fffffff));
  let failure = null;

  const inst = instrument({
    pkg, sab, tid: 0, slot: 0, names,
    sink: (rec) => records.push(rec),
    onFatal: (message) => { failure = failure || message; },
  });
  const { locks } = require(pkg);

  // The main thread's life lock, released at the very end.
  let releaseMainLife;
  await new Promise((resolve) => {
    locks.request(L.lifeName(0), () => {
      resolve();
      return new Promise((r) => { releaseMainLife = r; });
    });
  });
  inst.register((await locks.query()).held.find((e) => e.name === L.lifeName(0)).clientId);
  const me = new Participant({ tid: 0, inst, locks, names, seed });

  const stats = { seed, threadsSpawned: 0, ended: {}, epochs: 0, recordsChecked: 0, requests: 0, releases: 0, aborts: 0, granted: 0, unavailable: 0, stolen: 0, queries: 0 };
  const workers = new Map(); // tid -> worker state
  let nextTid = 1;

  function trace(err, recs) {
    const sorted = [...recs].sort((a, b) => a.t - b.t);
    const at = err.rec ? sorted.indexOf(err.rec) : sorted.length;
    const from = Math.max(0, (at < 0 ? sorted.length : at) - 60);
    const lines = sorted.slice(from, (at < 0 ? sorted.length : at) + 10).map((r) => `${r === err.rec ? '>>' : '  '} ${describeRecord(r, names)}`);
    const file = path.join(os.tmpdir(), `web-locks-stress-${seed}-${process.pid}.log`);
    try {
      fs.writeFileSync(file, sorted.map((r) => describeRecord(r, names)).join('\n') + '\n');
    } catch {
      // best effort
    }
    return `${lines.join('\n')}\n(all ${sorted.length} records of the epoch: ${file})`;
  }

  function failWith(message) {
    throw new StressFailure(`stress test failed (seed ${seed}; rerun: node test/stress/run.js --seed ${seed} --threads ${threads} --seconds ${seconds})\n${message}`);
  }

  function freeSlot() {
    const used = new Set([0, ...[...workers.values()].map((w) => w.slot)]);
    for (let s = 1; s < L.MAX_SLOTS; s++) if (!used.has(s)) return s;
    throw new Error('no free slot');
  }

  function clearSlot(slot) {
    for (let i = 0; i < 6; i++) S[L.TABLE + slot * 6 + i] = 0;
    for (let n = 0; n < L.NAMES_MAX; n++) S[L.CUR + slot * L.NAMES_MAX + n] = 0;
    Atomics.store(S, L.DYING + slot, 0);
    Atomics.store(S, L.POSTED + slot, 0);
  }

  function waitCtl(w, type, ms) {
    const j = w.inbox.findIndex((m) => m.ctl === type);
    if (j >= 0) return Promise.resolve(w.inbox.splice(j, 1)[0]);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`thread ${w.tid}: no '${type}' within ${ms} ms (spinlock owner: ${Atomics.load(S, L.LOCK) - 1}, waiters ${Atomics.load(S, L.WAITERS)}, ending ${w.ending})`)), ms);
      w.ctl.push({ type, resolve: (m) => { clearTimeout(timer); resolve(m); } });
      w.exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`thread ${w.tid} exited (code ${code}) while the main thread waited for '${type}': ${w.errors.map((e) => e && e.stack).join('\n')}`));
      });
    }).catch((err) => failWith(err.message));
  }

  async function spawn() {
    const tid = nextTid++;
    const slot = freeSlot();
    clearSlot(slot);
    const w = { tid, slot, received: 0, alive: true, ending: null, ctl: [], inbox: [], errors: [], exitCode: undefined };
    w.worker = new Worker(path.join(__dirname, 'worker.js'), { workerData: { tid, slot, sab, pkg, names, seed } });
    workers.set(tid, w);
    stats.threadsSpawned++;
    w.exited = new Promise((resolve) => {
      w.worker.on('exit', (code) => {
        w.alive = false;
        w.exitCode = code;
        // Died holding the spinlock: nobody else can release it.
        if (Atomics.compareExchange(S, L.LOCK, tid + 1, 0) === tid + 1) Atomics.notify(S, L.LOCK);
        if (!w.ending) failure = failure || `thread ${tid} exited (code ${code}) without being asked to: ${w.errors.map((e) => e && e.stack).join('\n')}`;
        resolve(code);
      });
    });
    w.worker.on('error', (err) => w.errors.push(err));
    w.worker.on('message', (m) => {
      if (m.k) {
        records.push(m);
        w.received++;
        if (m.k === 'fail') failure = failure || `thread ${m.tid}: ${m.message}`;
        return;
      }
      const i = w.ctl.findIndex((c) => c.type === m.ctl);
      if (i >= 0) w.ctl.splice(i, 1)[0].resolve(m);
      else w.inbox.push(m);
    });
    // The new thread joins when it is ready; meanwhile the run goes on.
    w.ready = waitCtl(w, 'ready', 60000).then(() => { w.isReady = true; });
    return w;
  }

  function live() {
    return [...workers.values()].filter((x) => x.alive);
  }

  // Ends a thread; returns once it has exited and its end is recorded.
  async function end(w, kind) {
    inst.lock();
    try {
      Atomics.add(S, L.ENDING, 1);
      inst.beginEnd(w.slot);
      w.ending = kind;
      inst.emit({ k: 'end0', t: inst.ticket(), tid: w.tid, kind });
    } finally {
      inst.unlock();
    }
    stats.ended[kind] = (stats.ended[kind] || 0) + 1;
    let fallback = null;
    switch (kind) {
      case 'terminate':
        w.worker.terminate();
        break;
      case 'exitInCallback':
      case 'spinInCallback':
        w.worker.postMessage({ cmd: kind });
        // If no callback of the thread runs soon, end it anyway.
        fallback = setTimeout(() => w.worker.terminate(), 20 + Math.floor(random() * 30));
        break;
      case 'graceful':
        break;
      default:
        w.worker.postMessage({ cmd: kind });
    }
    const timer = setTimeout(() => { failure = failure || `thread ${w.tid} did not end (${kind}) within 20 s`; w.worker.terminate(); }, 20000);
    const code = await w.exited;
    clearTimeout(timer);
    if (fallback) clearTimeout(fallback);
    const expected = { terminate: [1], exit: [7], throw: [1], exitInCallback: [7, 1], spinInCallback: [1], graceful: [0] }[kind];
    if (!expected.includes(code)) failure = failure || `thread ${w.tid} ended by ${kind} exited with code ${code}`;
    inst.lock();
    try {
      Atomics.sub(S, L.ENDING, 1);
      inst.emit({ k: 'end1', t: inst.ticket(), tid: w.tid, snap: inst.encode(inst.nativeQuery()) });
      clearSlot(w.slot);
    } finally {
      inst.unlock();
    }
    workers.delete(w.tid);
  }

  async function allReceived(ms = 20000) {
    const until = Date.now() + ms;
    for (;;) {
      if (live().every((w) => w.received >= Atomics.load(S, L.POSTED + w.slot))) return;
      if (Date.now() > until) failWith('records from the workers stopped arriving');
      await new Promise((r) => setImmediate(r));
    }
  }

  function check() {
    if (options.model === false) {
      // Only the threads' own checks (the exclusion counters, how each
      // promise settled) and the final emptiness.
      const fail = records.find((r) => r.k === 'fail');
      if (fail) failWith(`thread ${fail.tid}: ${fail.message}`);
      return { state: checker.state, undelivered: [], count: records.length, skipped: true };
    }
    try {
      return checker.replay(records);
    } catch (err) {
      if (err instanceof CheckError) failWith(`${err.message}\n--- trace (ticket, thread, record) ---\n${trace(err, records)}`);
      throw err;
    }
  }

  // Waits until every event the model made has been delivered, then checks
  // the threads' own views and query() against the model, and commits.
  // Paused threads still end the callbacks that return at once, and those
  // releases grant and end others: the reports count only if nothing but
  // queries happened while they were taken.
  async function quiesce(final = false) {
    const until = Date.now() + 20000;
    const changes = () => records.reduce((sum, rec) => sum + (rec.k === 'qry' ? 0 : 1), 0);
    let result;
    let snap;
    let reports;
    for (;;) {
      await allReceived();
      if (failure) {
        check(); // a failing check inside a thread shows up in the records
        failWith(failure);
      }
      result = check();
      if (result.undelivered.length === 0) {
        // The public query() (recorded, so the replay compares it) and
        // every thread's own account of its requests.
        const before = changes();
        snap = await locks.query();
        reports = [me.report()];
        const ws = live();
        for (const w of ws) w.worker.postMessage({ cmd: 'report' });
        for (const w of ws) reports.push((await waitCtl(w, 'report', 20000)).report);
        await allReceived();
        result = check();
        if (result.undelivered.length === 0 && changes() === before) break;
      }
      if (Date.now() > until) {
        if (result.undelivered.length === 0) failWith('the paused threads never went quiet for the length of their reports');
        failWith(`events the model made were never delivered: ${result.undelivered.map((u) => `request ${u.r} of thread ${u.tid}: '${u.kind}' (made at ticket ${u.gen})`).join('; ')}\n--- trace ---\n${trace({}, records)}`);
      }
      await new Promise((r) => setImmediate(r));
    }
    for (const rep of options.model === false ? [] : reports) {
      const active = checker.activeOf(result.state, rep.tid);
      const model = new Set([...active.held, ...active.pending]);
      const lib = new Set(rep.lib);
      for (const r of model) if (!lib.has(r)) failWith(`thread ${rep.tid}: request ${r} is ${active.held.includes(r) ? 'held' : 'queued'} in the model but unknown to lib/`);
      for (const r of lib) if (!model.has(r) && !rep.liveAfterSettling.includes(r)) failWith(`thread ${rep.tid}: lib/ still tracks request ${r}, which the model has no more and which is neither stolen nor aborted after its grant`);
    }
    if (final) {
      const stress = (e) => names.includes(e.name);
      if (snap.held.some(stress) || snap.pending.some(stress)) failWith(`left in the manager after every thread ended: ${JSON.stringify(snap)}`);
      const m = result.state.model.snapshot();
      if (options.model !== false && (m.held.length || m.pending.length)) failWith(`left in the model after every thread ended: ${JSON.stringify(m)}`);
    }
    checker.commit(result);
    count(records);
    stats.recordsChecked += result.count;
    records = [];
    return reports;
  }

  // What the records say happened (dead threads' work included).
  function count(recs) {
    for (const rec of recs) {
      if (rec.k === 'req') stats.requests++;
      else if (rec.k === 'rel') stats.releases++;
      else if (rec.k === 'abt') stats.aborts++;
      else if (rec.k === 'qry') stats.queries++;
      else if (rec.k === 'dlv') {
        if (rec.ev & 1) stats.granted++;
        if (rec.ev & 2) stats.unavailable++;
        if (rec.ev & 4) stats.stolen++;
      } else if (rec.k === 'req' && rec.flags & 2) stats.steals++;
    }
  }

  // Every other action ends a thread, the kinds of end in turn (so that even
  // a short run sees each), and the others bring the number back up.
  let actions = 0;
  let endsDone = 0;
  async function chaos() {
    const a = random();
    const ws = live().filter((w) => !w.ending && w.isReady);
    const all = live().filter((w) => !w.ending);
    const turn = actions++ % 2;
    const t0 = Date.now();
    let what = 'nothing';
    if (turn === 0 && ws.length > 1) {
      const w = ws[Math.floor(a * ws.length)];
      what = `end thread ${w.tid} (${END_KINDS[endsDone % END_KINDS.length]})`;
      await end(w, END_KINDS[endsDone++ % END_KINDS.length]);
    } else if (all.length < threads) {
      what = 'spawn';
      await spawn();
    }
    if (options.verbose) log(`  ${what}: ${Date.now() - t0} ms`);
  }

  const started = Date.now();
  try {
    for (let i = 0; i < threads; i++) await (await spawn()).ready;
    me.run();
    const deadline = started + seconds * 1000;
    while (Date.now() < deadline && !failure) {
      stats.epochs++;
      const epochEnd = Math.min(deadline, Date.now() + epochMs);
      while (Date.now() < epochEnd && !failure) {
        await new Promise((r) => setTimeout(r, 5 + Math.floor(random() * 40)));
        await chaos();
      }
      await Promise.all(live().map((w) => w.ready));
      me.pause();
      const ws = live();
      for (const w of ws) w.worker.postMessage({ cmd: 'pause' });
      for (const w of ws) await waitCtl(w, 'paused', 20000);
      await quiesce();
      log(`epoch ${stats.epochs}: ${stats.recordsChecked} records checked, ${live().length} workers`);
      me.resume();
      for (const w of live()) w.worker.postMessage({ cmd: 'resume' });
    }
    // Everyone lets go and waits for all its requests; then the workers
    // must exit by themselves.
    const ws = live();
    for (const w of ws) {
      w.ending = 'graceful';
      w.worker.postMessage({ cmd: 'finish' });
    }
    const ending = [me.finish()];
    for (const w of ws) {
      ending.push(waitCtl(w, 'finished', 30000).then((m) => {
        if (m.report.unsettled !== 0 || m.report.libSize !== 1) failWith(`thread ${w.tid} finished with ${m.report.unsettled} unsettled requests and ${m.report.libSize} in lib/ (only its life lock should be left)`);
      }));
    }
    await Promise.all(ending);
    for (const w of ws) await end(w, 'graceful');
    await quiesce(true);
    releaseMainLife();
    await new Promise((r) => setImmediate(r));
    const left = await locks.query();
    if (left.held.length || left.pending.length) failWith(`left in the manager at the end: ${JSON.stringify(left)}`);
    stats.seconds = (Date.now() - started) / 1000;
    return stats;
  } finally {
    await Promise.all(live().map((w) => w.worker.terminate()));
  }
}

module.exports = { runStress, StressFailure, NAMES };
