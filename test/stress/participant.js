'use strict';
// One thread's share of the stress test: random operations on a few names,
// drawn from a seeded generator, and the checks that only the thread itself
// can make (which callback ran, what each request() promise settled with).
//
// Every step draws the same number of random values whatever it does, so a
// thread's sequence of intended operations depends only on the seed and its
// thread id; what the other threads do meanwhile decides which of them apply
// (a thread has at most one request per name at a time, so a request on a
// name it is still using is skipped).
const { EV_STOLEN } = require('./instrument');
const L = require('./layout');

function rng32(seed) {
  let a = seed >>> 0;
  return function next() {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function mix(seed, tid) {
  let h = (seed ^ Math.imul(tid + 1, 0x9E3779B1)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85EBCA6B) >>> 0;
  return (h ^ (h >>> 13)) >>> 0;
}

// Values a callback may throw or reject with: non-Errors included.
const THROWN = [
  () => new Error('boom'),
  () => 42,
  () => 'a string',
  () => undefined,
  () => null,
  () => ({ plain: 'object' }),
  () => Symbol('thrown'),
];

const BEHAVIOURS = ['hold', 'hold', 'hold', 'hold', 'hold', 'sync', 'throw', 'async-throw', 'reject', 'abort-self', 'query', 'nested'];

class Participant {
  constructor({ tid, inst, locks, names, seed }) {
    this.tid = tid;
    this.inst = inst;
    this.locks = locks;
    this.names = names;
    this.random = rng32(mix(seed, tid));
    this.nestedRandom = rng32(mix(seed ^ 0x5bd1e995, tid));
    this.reqs = new Map(); // r -> request record, until settled
    this.seq = 0; // local order of facts
    this.paused = false;
    this.stopped = false;
    this.deferred = [];
    this.resumeWaiters = [];
    this.settleWaiters = [];
    this.onCallback = null; // set by an 'end in a callback' command
    this.stats = { steps: 0, requests: 0, granted: 0, unavailable: 0, aborted: 0, stolen: 0, queries: 0, thrown: 0 };
    // Stolen requests stay in lib/ until their callback ends, even when
    // their promise has already been rejected; so do requests aborted after
    // their grant was made but before it was delivered, until the delivery
    // releases the lock (spec §4.4 step 14.1).
    this.liveAfterSettling = new Set();
    this.holding = new Set(); // callbacks holding their lock (stolen ones too)
    inst.listeners.delivered = (r, ev) => {
      if (ev & EV_STOLEN) this.liveAfterSettling.add(r);
      const req = this.reqs.get(r);
      if (req && (ev & EV_STOLEN) && req.stolenAt === undefined) req.stolenAt = ++this.seq;
    };
    inst.listeners.aborted = (r, removed) => {
      if (!removed) this.liveAfterSettling.add(r);
    };
    inst.listeners.released = (r, held) => {
      this.liveAfterSettling.delete(r);
      for (const w of this.settleWaiters.splice(0)) w();
      const req = this.reqs.get(r);
      if (req) req.released = { at: ++this.seq, held };
    };
  }

  fatal(message) {
    this.inst.fatal(message);
  }

  // Draws made inside callbacks come from their own generator, so that the
  // main sequence does not depend on when callbacks run.
  drawNested(n) {
    const out = [];
    for (let i = 0; i < n; i++) out.push(this.nestedRandom());
    return out;
  }

  draw(n) {
    const out = [];
    for (let i = 0; i < n; i++) out.push(this.random());
    return out;
  }

  // ---- the operations ----

  request(n, d, nested = false) {
    const [dMode, dKind, dSignal, dBehaviour, dDelay, dValue, dPre] = d;
    const steal = dKind < 0.06;
    const ifAvailable = !steal && dKind < 0.18;
    const mode = steal || dMode < 0.55 ? 'exclusive' : 'shared';
    const withSignal = !steal && !ifAvailable && dSignal < 0.3;
    const preAborted = withSignal && dPre < 0.03;
    const behaviour = BEHAVIOURS[Math.floor(dBehaviour * BEHAVIOURS.length)];
    if (this.inst.curOf(n) !== 0) return;
    const r = Atomics.add(this.inst.S, L.NEXT_R, 1) + 1;
    const req = {
      r, n, mode, ifAvailable, steal, behaviour, nested,
      delay: dDelay < 0.3 ? -1 : Math.floor(dDelay * 4), // -1: setImmediate
      valueIndex: Math.floor(dValue * THROWN.length),
      controller: withSignal ? new AbortController() : null,
      preAborted,
      entered: false,
      settled: false,
    };
    req.reason = { abortReason: r };
    if (preAborted) {
      req.controller.abort(req.reason);
      req.abortAt = ++this.seq;
    }
    this.reqs.set(r, req);
    this.stats.requests++;
    const options = { mode, ifAvailable, steal };
    if (withSignal) options.signal = req.controller.signal;
    const callback = (lock) => this.callback(req, lock);
    let p;
    this.inst.lock(); // no steal while a thread is being ended
    try {
      if (steal && !this.inst.stealsAllowed()) options.steal = false;
      req.steal = options.steal;
      this.inst.nextRequest(r);
      p = this.locks.request(this.names[n], options, callback);
      this.inst.nextRequest(0);
    } finally {
      this.inst.unlock();
    }
    p.then((v) => this.settle(req, true, v), (e) => this.settle(req, false, e));
  }

  abort(d) {
    const candidates = [...this.reqs.values()].filter((q) => q.controller && !q.controller.signal.aborted && !q.settled);
    if (candidates.length === 0) return;
    const req = candidates[Math.floor(d * candidates.length)];
    if (!req.entered) req.abortAt = ++this.seq;
    this.stats.aborted++;
    req.controller.abort(req.reason);
  }

  query() {
    this.stats.queries++;
    // What the snapshot holds is checked against the model (it is recorded
    // by the instrumented binding); here, the shape lib/ gives it.
    this.locks.query().then((snap) => {
      if (!Array.isArray(snap.held) || !Array.isArray(snap.pending)) this.fatal('query() returned a malformed snapshot');
      for (const e of [...snap.held, ...snap.pending]) {
        if (typeof e.name !== 'string' || (e.mode !== 'exclusive' && e.mode !== 'shared') || typeof e.clientId !== 'string') {
          this.fatal(`query() returned a malformed entry ${JSON.stringify(e)}`);
        }
      }
    }, (err) => this.fatal(`query() rejected: ${err && err.stack}`));
  }

  callback(req, lock) {
    if (req.entered) this.fatal(`callback of request ${req.r} called twice`);
    req.entered = true;
    req.enteredAt = ++this.seq;
    req.lockSeen = lock !== null;
    this.inst.enter(req.r, req.n, req.mode, lock !== null);
    if (lock === null) {
      this.stats.unavailable++;
      if (!req.ifAvailable) this.fatal(`request ${req.r} without ifAvailable got a null lock`);
    } else {
      this.stats.granted++;
      if (lock.name !== this.names[req.n] || lock.mode !== req.mode) {
        this.fatal(`request ${req.r} got a Lock for ${JSON.stringify(lock.name)}/${lock.mode}`);
      }
    }
    if (this.onCallback && lock !== null) this.onCallback();
    const value = `value of ${req.r}`;
    const thrown = () => THROWN[req.valueIndex]();
    switch (req.behaviour) {
      case 'sync':
        req.outcome = { ok: true, value };
        return value;
      case 'throw': {
        const v = thrown();
        req.outcome = { ok: false, value: v };
        this.stats.thrown++;
        throw v;
      }
      case 'async-throw': {
        const v = thrown();
        req.outcome = { ok: false, value: v };
        return (async () => {
          await null;
          throw v;
        })();
      }
      case 'abort-self':
        // From inside the callback: no effect on the request any more.
        if (req.controller) req.controller.abort(req.reason);
        return this.hold(req, value);
      case 'query':
        this.query();
        return this.hold(req, value);
      case 'nested':
        if (!req.nested) this.request((req.n + 1) % this.names.length, this.drawNested(7), true);
        return this.hold(req, value);
      case 'reject':
        return this.hold(req, value, thrown());
      default:
        return this.hold(req, value);
    }
  }

  // Holds the lock until a timer fires (deferred while paused).
  hold(req, value, rejectWith) {
    const failing = arguments.length > 2;
    req.outcome = failing ? { ok: false, value: rejectWith } : { ok: true, value };
    this.holding.add(req);
    return new Promise((resolve, reject) => {
      req.finish = () => {
        req.finish = null;
        this.holding.delete(req);
        req.releasing = true;
        if (failing) reject(rejectWith);
        else resolve(value);
      };
      const fire = () => {
        if (!req.finish) return;
        if (this.paused) this.deferred.push(req);
        else req.finish();
      };
      if (req.delay < 0) setImmediate(fire);
      else setTimeout(fire, req.delay);
    });
  }

  // The request() promise settled: check it settled the way it had to.
  settle(req, ok, value) {
    if (req.settled) this.fatal(`request ${req.r} settled twice`);
    req.settled = true;
    this.reqs.delete(req.r);
    // The first of these decides: an abort before the callback started, a
    // steal notice, the release (returning false for a stolen lock), the
    // callback's outcome.
    const causes = [];
    if (req.abortAt !== undefined && (req.enteredAt === undefined || req.abortAt < req.enteredAt)) causes.push({ at: req.abortAt, why: 'abort' });
    if (req.stolenAt !== undefined) causes.push({ at: req.stolenAt, why: 'steal' });
    if (req.released) causes.push({ at: req.released.at, why: req.released.held ? 'callback' : 'steal' });
    if (req.entered && !req.lockSeen) causes.push({ at: Infinity, why: 'callback' });
    causes.sort((a, b) => a.at - b.at);
    const why = causes.length ? causes[0].why : 'nothing';
    const describe = (v) => (typeof v === 'symbol' ? v.toString() : v instanceof Error ? `${v.name}: ${v.message}` : JSON.stringify(v));
    let good;
    if (why === 'abort') good = !ok && value === req.reason;
    else if (why === 'steal') good = !ok && value instanceof DOMException && value.name === 'AbortError';
    else if (why === 'callback') good = req.outcome !== undefined && ok === req.outcome.ok && Object.is(value, req.outcome.value);
    else good = false;
    if (why === 'steal') this.stats.stolen++;
    if (!good) {
      this.fatal(`request ${req.r} (${req.mode}${req.ifAvailable ? ', ifAvailable' : ''}${req.steal ? ', steal' : ''}${req.controller ? ', signal' : ''}, ${req.behaviour}) settled ${ok ? 'resolved' : 'rejected'} with ${describe(value)}; expected the outcome of: ${why}`);
    }
    for (const w of this.settleWaiters.splice(0)) w();
  }

  // ---- the loop ----

  async run() {
    while (!this.stopped) {
      const [dWait, dOp, dName, ...d] = this.draw(10);
      if (dWait < 0.5) await new Promise((r) => setImmediate(r));
      else await new Promise((r) => setTimeout(r, dWait < 0.9 ? 0 : 1));
      if (this.paused) await new Promise((r) => this.resumeWaiters.push(r));
      if (this.stopped) break;
      this.stats.steps++;
      const n = Math.floor(dName * this.names.length);
      if (dOp < 0.55) this.request(n, d);
      else if (dOp < 0.68) this.abort(d[0]);
      else if (dOp < 0.72) this.query();
    }
  }

  pause() {
    this.paused = true;
  }

  resume() {
    this.paused = false;
    for (const req of this.deferred.splice(0)) if (req.finish) req.finish();
    for (const w of this.resumeWaiters.splice(0)) w();
  }

  // Stops, lets go of everything and waits until every request has settled
  // (requests still waiting are granted as others let go, and let go in turn).
  async finish() {
    this.stopped = true;
    this.resume();
    // Stolen requests have settled already, but their callbacks still hold
    // (the spec's behaviour) until they let go.
    for (const req of [...this.holding]) if (req.finish) req.finish();
    while (this.reqs.size > 0 || this.holding.size > 0 || this.liveAfterSettling.size > 0) {
      await new Promise((r) => this.settleWaiters.push(r));
    }
  }

  // What this thread has in lib/ and what it thinks it has.
  report() {
    // lib/'s table of this thread's requests by native id (an array with
    // holes and no prototype, or a Map).
    const lib = this.inst.libRequests();
    const ids = [];
    if (lib instanceof Map) ids.push(...lib.keys());
    else if (lib) Array.prototype.forEach.call(lib, (v, id) => { if (v !== undefined) ids.push(id); });
    const logical = [];
    for (const id of ids) {
      const r = this.inst.logicalOf.get(id);
      if (r !== undefined) logical.push(r);
    }
    const liveAfterSettling = [...this.liveAfterSettling];
    return { tid: this.tid, lib: logical, libSize: ids.length, unsettled: this.reqs.size, liveAfterSettling, stats: this.stats };
  }
}

module.exports = { Participant, rng32, mix };
