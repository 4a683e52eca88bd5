'use strict';
// Per-thread instrumentation for the stress test. Loaded before the package
// on every participating thread (the main thread and each worker), it puts a
// thin wrapper between lib/index.js (unmodified) and the native binding:
//
// - Every call that changes the lock manager (request, release, abort) and
//   every query() runs inside one process-wide spinlock over shared memory
//   and takes a ticket from a shared counter, so the tickets give the order
//   in which the native manager saw the calls: a linearization the reference
//   model can replay. Right after each change it also copies the manager's
//   state (a native query), which the model must match exactly.
// - Every delivery from the native side (grant, ifAvailable miss, steal) is
//   recorded with a ticket before lib/ sees it.
// - The mutual exclusion check: lock callbacks count themselves in shared
//   per-name counters on entry and are uncounted by the release call that
//   ends them; a new holder must be compatible with every counted one. A
//   steal uncounts the holders it robs (found from the native state inside
//   the same critical section), so a robbed callback that keeps running is
//   not mistaken for a second holder.
//
// Thread ends are the one manager change that cannot be wrapped: the native
// teardown runs after the thread's JavaScript is gone. The checker places
// each one by search (see check.js).
//
// Records go to `sink` (postMessage on workers, an array on the main thread).
const path = require('node:path');
const L = require('./layout');

const EV_GRANTED = 1;
const EV_UNAVAILABLE = 2;
const EV_STOLEN = 4;
// A native request's how: its mode (bit 0) and flags (the bits above).
const SHARED = 1;
const STEAL = 4;
// The binding's WLB_TRACKED (lib/events.js): not a flag of the request.
const TRACKED = 8;
const IO_RESULT = 0;
const IO_ID = 1;
const IO_EVENTS = 2;

function uuidWords(cid) {
  const hex = cid.replace(/-/g, '');
  const words = [];
  for (let i = 0; i < 4; i++) words.push(parseInt(hex.slice(i * 8, i * 8 + 8), 16) | 0);
  return words;
}

function instrument({ pkg, sab, tid, slot, names, sink, onFatal }) {
  const S = new Int32Array(sab);
  const nameIndex = new Map(names.map((n, i) => [n, i]));
  const ngbPath = require.resolve('node-gyp-build', { paths: [path.join(pkg, 'lib')] });
  const realLoad = require(ngbPath);
  let real = null;
  let io = null; // the binding's io array (see lib/index.js)
  let depth = 0; // spinlock re-entry by this thread
  let pendingLogical = 0; // the logical id of the locks.request() being made
  const logicalOf = new Map(); // native id -> logical id, for this thread
  const listeners = { delivered: null, released: null, aborted: null };
  const cidCache = new Map();

  const ticket = () => Atomics.add(S, L.TICKET, 1) + 1;
  const emit = (rec) => { sink(rec); };

  function fatal(message, extra) {
    emit(Object.assign({ k: 'fail', t: ticket(), tid, message }, extra));
    if (onFatal) onFatal(message);
  }

  // ---- the spinlock: 0 free, else owner tid + 1; re-entrant per thread ----
  function isAlive(ownerTid) {
    if (ownerTid === 0) return true; // the main thread outlives the run
    const snap = real.query();
    const life = L.lifeName(ownerTid);
    return snap.held.some((e) => e.name === life);
  }

  function lock() {
    if (depth > 0) {
      depth++;
      return;
    }
    const me = tid + 1;
    let waited = false;
    for (;;) {
      const cur = Atomics.compareExchange(S, L.LOCK, 0, me);
      if (cur === 0) break;
      if (!waited) {
        Atomics.add(S, L.WAITERS, 1);
        waited = true;
      }
      // A thread can be terminated while it holds the lock; its native
      // teardown releases its life lock, and nothing else can wake us then,
      // so look after a while.
      if (Atomics.wait(S, L.LOCK, cur, 50) === 'timed-out' && !isAlive(cur - 1)) {
        if (Atomics.compareExchange(S, L.LOCK, cur, me) === cur) {
          emit({ k: 'stolelock', t: ticket(), tid, from: cur - 1 });
          break;
        }
      }
    }
    if (waited) Atomics.sub(S, L.WAITERS, 1);
    depth = 1;
  }

  function unlock() {
    if (--depth > 0) return;
    Atomics.store(S, L.LOCK, 0);
    if (Atomics.load(S, L.WAITERS) > 0) Atomics.notify(S, L.LOCK, 1);
  }

  // ---- client ids -> thread ids, through the shared table ----
  function tidOf(cid) {
    let t = cidCache.get(cid);
    if (t !== undefined) return t;
    const w = uuidWords(cid);
    for (let s = 0; s < L.MAX_SLOTS; s++) {
      const base = L.TABLE + s * 6;
      if (S[base] !== 0 && S[base + 1] === w[0] && S[base + 2] === w[1] && S[base + 3] === w[2] && S[base + 4] === w[3]) {
        t = S[base] - 1;
        cidCache.set(cid, t);
        return t;
      }
    }
    return -1;
  }

  function register(cid) {
    const w = uuidWords(cid);
    const base = L.TABLE + slot * 6;
    for (let i = 0; i < 4; i++) S[base + 1 + i] = w[i];
    Atomics.store(S, base, tid + 1);
  }

  // The stress names' part of a native query: [name index, mode (0 exclusive,
  // 1 shared), tid] per entry; pending in queue order.
  function encode(snap) {
    const out = { held: [], pending: [] };
    for (const key of ['held', 'pending']) {
      for (const e of snap[key]) {
        const n = nameIndex.get(e.name);
        if (n === undefined) continue;
        out[key].push([n, e.mode === 'shared' ? 1 : 0, tidOf(e.clientId)]);
      }
    }
    return out;
  }

  // ---- exclusion counting, always under the spinlock ----
  const stateAt = (r) => L.STATE + (r & L.STATE_MASK);
  const nameOf = (r) => S[L.STATE_NAME + (r & L.STATE_MASK)] - 1;
  function uncount(r) {
    const st = S[stateAt(r)];
    if (st === L.COUNTED_EXCL) S[L.EXCL + nameOf(r)]--;
    else if (st === L.COUNTED_SHARED) S[L.SHARED_ + nameOf(r)]--;
    S[stateAt(r)] = 0;
  }

  // Rob every holder of name n: called just before a steal of n.
  function rob(n, r) {
    const snap = real.query();
    const robbed = [];
    for (const e of snap.held) {
      if (e.name !== names[n]) continue;
      const holderTid = tidOf(e.clientId);
      const hs = L.slotOfTid(S, holderTid);
      const hr = hs < 0 ? 0 : S[L.CUR + hs * L.NAMES_MAX + n];
      if (hr === 0) {
        fatal(`steal of ${n}: holder thread ${holderTid} has no current request on it`, { r });
        continue;
      }
      uncount(hr);
      S[stateAt(hr)] = L.ROBBED;
      robbed.push(hr);
    }
    return robbed;
  }

  // Ends the counting of a thread that is being ended (main thread only):
  // its callbacks may go on running until it dies, but its locks go to
  // others as soon as its native teardown runs.
  function beginEnd(endSlot) {
    Atomics.store(S, L.DYING + endSlot, 1);
    for (let n = 0; n < L.NAMES_MAX; n++) {
      const r = S[L.CUR + endSlot * L.NAMES_MAX + n];
      if (r !== 0) uncount(r);
    }
  }

  // Called by the participant when a lock callback starts.
  function enter(r, n, mode, hasLock) {
    lock();
    try {
      const t = ticket();
      let counted = false;
      if (hasLock) {
        const st = S[stateAt(r)];
        if (Atomics.load(S, L.DYING + slot) === 0 && st !== L.ROBBED) {
          const excl = S[L.EXCL + n];
          const shared = S[L.SHARED_ + n];
          if (excl !== 0 || (mode === 'exclusive' && shared !== 0)) {
            fatal(`mutual exclusion violated on name ${n}: a ${mode} holder (request ${r}) entered while ${excl} exclusive and ${shared} shared holders were counted`, { r });
          }
          S[(mode === 'exclusive' ? L.EXCL : L.SHARED_) + n]++;
          S[stateAt(r)] = mode === 'exclusive' ? L.COUNTED_EXCL : L.COUNTED_SHARED;
          counted = true;
        }
      }
      emit({ k: 'cb', t, tid, r, lock: hasLock, counted });
    } finally {
      unlock();
    }
  }

  function setCur(n, r) {
    S[L.CUR + slot * L.NAMES_MAX + n] = r;
  }

  // ---- the wrapped binding ----
  let wrapped = null;
  function wrap(binding) {
    real = binding;
    const w = wrapped = {
      // The addon's own: lib/binding.js checks it.
      abi: binding.abi,
      setup(dispatch, clientId, stuckCheck) {
        io = binding.setup(function wrappedDispatch() {
          const id = io[IO_ID];
          const events = io[IO_EVENTS];
          const r = logicalOf.get(id);
          if (r !== undefined) {
            lock();
            try {
              emit({ k: 'dlv', t: ticket(), tid, r, ev: events });
              if (events & EV_UNAVAILABLE) {
                setCur(nameOf(r), 0);
                logicalOf.delete(id);
              }
            } finally {
              unlock();
            }
            if (listeners.delivered) listeners.delivered(r, events);
          }
          return dispatch();
        }, clientId, stuckCheck);
        return io;
      },
      request(name, how) {
        const n = nameIndex.get(name);
        if (n === undefined) return binding.request(name, how);
        const r = pendingLogical;
        pendingLogical = 0;
        if (r === 0) fatal('binding.request on a stress name without a logical id');
        lock();
        try {
          const t = ticket();
          let robbed;
          if (how & STEAL) robbed = rob(n, r);
          S[stateAt(r)] = 0;
          S[L.STATE_NAME + (r & L.STATE_MASK)] = n + 1;
          setCur(n, r);
          emit({ k: 'req', t, tid, r, n, mode: how & SHARED ? 'shared' : 'exclusive', flags: (how & ~TRACKED) >> 1, robbed });
          binding.request(name, how);
          // id * 2, plus 1 when the lock was granted at once
          const result = io[IO_RESULT];
          logicalOf.set(result >>> 1, r);
          emit({ k: 'res', t: ticket(), tid, of: t, result: result & 1, snap: encode(binding.query()) });
          return undefined;
        } finally {
          unlock();
        }
      },
      release(id) {
        const r = logicalOf.get(id);
        if (r === undefined) return binding.release(id);
        lock();
        try {
          const t = ticket();
          uncount(r);
          setCur(nameOf(r), 0);
          emit({ k: 'rel', t, tid, r });
          const held = binding.release(id);
          logicalOf.delete(id);
          emit({ k: 'res', t: ticket(), tid, of: t, result: held, snap: encode(binding.query()) });
          if (listeners.released) listeners.released(r, held);
          return held;
        } finally {
          unlock();
        }
      },
      abort(id) {
        const r = logicalOf.get(id);
        if (r === undefined) return binding.abort(id);
        lock();
        try {
          const t = ticket();
          emit({ k: 'abt', t, tid, r });
          const removed = binding.abort(id);
          if (removed) {
            setCur(nameOf(r), 0);
            logicalOf.delete(id);
          }
          emit({ k: 'res', t: ticket(), tid, of: t, result: removed, snap: encode(binding.query()) });
          if (listeners.aborted) listeners.aborted(r, removed);
          return removed;
        } finally {
          unlock();
        }
      },
      query() {
        lock();
        try {
          const t = ticket();
          const snap = binding.query();
          emit({ k: 'qry', t, tid, snap: encode(snap) });
          return snap;
        } finally {
          unlock();
        }
      },
      // Not recorded: the watch for deadlocks' own (lib/deadlock.js).
      details: () => binding.details(),
      setTick: (fn) => binding.setTick(fn),
      tickIn: (ms, ref) => binding.tickIn(ms, ref),
    };
    return w;
  }

  // Intercept lib/'s require('node-gyp-build') before lib/ is loaded.
  require.cache[ngbPath].exports = function loadWrapped(dir) {
    return wrap(realLoad(dir));
  };

  return {
    S,
    ticket,
    emit,
    fatal,
    lock,
    unlock,
    enter,
    beginEnd,
    register,
    encode,
    tidOf,
    listeners,
    nativeQuery: () => real.query(),
    binding: () => real,
    // The participant names the logical request of its next locks.request().
    nextRequest(r) { pendingLogical = r; },
    curOf(n) { return S[L.CUR + slot * L.NAMES_MAX + n]; },
    stealsAllowed() { return Atomics.load(S, L.ENDING) === 0; },
    libRequests() { return wrapped && wrapped.requests; },
    logicalOf,
  };
}

module.exports = { instrument, EV_GRANTED, EV_UNAVAILABLE, EV_STOLEN };
