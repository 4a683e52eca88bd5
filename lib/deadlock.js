'use strict'

// Deadlocks found and named, on every manager: the wait-for graph of a
// manager's details() (see manager-process.js), its cycles, and the watch
// that looks for them while a thread's requests wait.
//
// The graph's nodes are requests, held or pending, each named by its
// agent's clientId and its serial. Its edges:
// - a pending request waits for the locks held on its name in a mode that
//   conflicts with its own, and for the request just ahead of it in its
//   name's queue (only the first of a queue can be granted, spec 4.4; the
//   rest of the queue is reached through that one);
// - a held lock waits for every request, pending or held, that was made
//   inside its callback (its parent is the lock): a callback is taken to
//   await the requests it makes, and its lock is released only when it
//   returns. This is what tells one task waiting inside its own lock (a
//   deadlock, if what it waits for waits for it) from two independent tasks
//   of one agent, one holding and one waiting (none).
// A cycle through a pending request is a deadlock: nothing in it can move
// unless someone aborts, times out, steals or ends. Each cycle is named by
// its pending requests, each with the agent it waits for (the next node's).

// Its node key.
const keyOf = (clientId, serial) => `${clientId}\n${serial}`

function graph ({ held, pending }) {
  const P = pending.length
  const H = held.length
  const nodes = new Map() // key -> node
  const names = new Map() // name -> { all: [held nodes], exclusive: [held nodes], last: pending node or -1 }
  const entry = (name) => {
    let e = names.get(name)
    if (e === undefined) names.set(name, (e = { all: [], exclusive: [], last: -1 }))
    return e
  }
  const succ = []
  for (let i = 0; i < P; i++) {
    nodes.set(keyOf(pending[i].clientId, pending[i].serial), i)
    succ.push([])
  }
  // A name's held locks are reached through one hub per mode group, so that
  // the edges stay linear in the snapshot's size however many wait behind
  // how many: hub `all` (every holder) and hub `exclusive`.
  for (let j = 0; j < H; j++) {
    nodes.set(keyOf(held[j].clientId, held[j].serial), P + j)
    succ.push([])
  }
  let next = P + H
  const hub = () => {
    succ.push([])
    return next++
  }
  const hubs = new Map() // name -> { all, exclusive } hub nodes
  for (let j = 0; j < H; j++) {
    const e = entry(held[j].name)
    e.all.push(P + j)
    if (held[j].mode === 'exclusive') e.exclusive.push(P + j)
  }
  for (const [name, e] of names) {
    const h = { all: hub(), exclusive: hub() }
    for (const v of e.all) succ[h.all].push(v)
    for (const v of e.exclusive) succ[h.exclusive].push(v)
    hubs.set(name, h)
  }
  for (let i = 0; i < P; i++) {
    const { name, mode } = pending[i]
    const e = entry(name)
    const h = hubs.get(name)
    if (h !== undefined) succ[i].push(mode === 'exclusive' ? h.all : h.exclusive)
    if (e.last >= 0) succ[i].push(e.last)
    e.last = i
  }
  // Parents: a held lock of the same agent. made[i]: pending request i was
  // made inside a lock that is held.
  const made = new Uint8Array(P)
  const parentEdge = (info, v) => {
    if (info.parent === 0) return
    const p = nodes.get(keyOf(info.clientId, info.parent))
    if (p === undefined || p < P) return
    succ[p].push(v)
    if (v < P) made[v] = 1
  }
  for (let i = 0; i < P; i++) parentEdge(pending[i], i)
  for (let j = 0; j < H; j++) parentEdge(held[j], P + j)
  return { P, H, succ, made }
}

// Strongly connected components (Tarjan's, without recursion): comp[v].
function components (succ) {
  const n = succ.length
  const comp = new Int32Array(n).fill(-1)
  const low = new Int32Array(n)
  const order = new Int32Array(n).fill(-1)
  const onStack = new Uint8Array(n)
  const stack = []
  let counter = 0
  let ncomp = 0
  for (let root = 0; root < n; root++) {
    if (order[root] >= 0) continue
    const work = [[root, 0]]
    order[root] = low[root] = counter++
    stack.push(root)
    onStack[root] = 1
    while (work.length > 0) {
      const top = work[work.length - 1]
      const v = top[0]
      if (top[1] < succ[v].length) {
        const w = succ[v][top[1]++]
        if (order[w] < 0) {
          order[w] = low[w] = counter++
          stack.push(w)
          onStack[w] = 1
          work.push([w, 0])
        } else if (onStack[w]) {
          low[v] = Math.min(low[v], order[w])
        }
        continue
      }
      work.pop()
      if (work.length > 0) {
        const u = work[work.length - 1][0]
        low[u] = Math.min(low[u], low[v])
      }
      if (low[v] === order[v]) {
        let w
        do {
          w = stack.pop()
          onStack[w] = 0
          comp[w] = ncomp
        } while (w !== v)
        ncomp++
      }
    }
  }
  return comp
}

// The shortest path from `from` back to itself within its component: its
// nodes from `from`, or null.
function shortestCycle (succ, comp, from) {
  const parent = new Map([[from, -1]])
  const queue = [from]
  for (let q = 0; q < queue.length; q++) {
    const v = queue[q]
    for (const w of succ[v]) {
      if (w === from) {
        const path = []
        for (let x = v; x !== -1; x = parent.get(x)) path.push(x)
        return path.reverse()
      }
      if (comp[w] === comp[from] && !parent.has(w)) {
        parent.set(w, v)
        queue.push(w)
      }
    }
  }
  return null
}

// The cycles of a manager's details() through the pending requests of the
// agent `clientId` (every cycle if it is undefined). A cycle leaves each held
// lock on it through a request made inside it, which is what keeps the lock
// held: these requests name it (its key, its lead, what a rejection ends);
// the others on it only wait in a queue behind it, and rejecting one would
// end no wait. Of each strongly connected component with a cycle through
// one of the agent's pending requests, the shortest cycle through each
// request made inside a lock (from the first of its successors on a tie),
// those that have one of the agent's requests: every agent of a cycle,
// looking at the same state, names the same cycles, and each of its
// requests made inside a lock and on a cycle is on one it names. Each is
// { key, cycle, requests, mine, lead }: key names the cycle whoever finds
// it (its naming requests' node keys, sorted); cycle lists its pending
// requests in order, each { name, mode, clientId, waitsFor }, from the
// least naming one by key (its lead), and requests the same as
// { clientId, serial }; mine, the serials of `clientId`'s naming requests
// in it; lead, the lead's serial if it is one of them, else undefined.
function findDeadlocks (snapshot, clientId) {
  const { pending, held } = snapshot
  const { P, succ, made } = graph(snapshot)
  const comp = components(succ)
  const size = new Map()
  for (let v = 0; v < succ.length; v++) size.set(comp[v], (size.get(comp[v]) || 0) + 1)
  // The components with a cycle through a pending request of the agent.
  const cyclic = new Set()
  for (let i = 0; i < P; i++) {
    if (clientId !== undefined && pending[i].clientId !== clientId) continue
    if (size.get(comp[i]) > 1) cyclic.add(comp[i])
  }
  const found = new Map()
  for (let i = 0; i < P; i++) {
    if (made[i] === 0 || !cyclic.has(comp[i])) continue
    const path = shortestCycle(succ, comp, i)
    if (path === null) continue
    const members = path.filter((v) => v < P)
    if (clientId !== undefined && !members.some((v) => pending[v].clientId === clientId)) continue
    const naming = members.filter((v) => made[v] === 1)
    const keys = naming.map((v) => keyOf(pending[v].clientId, pending[v].serial))
    const key = [...keys].sort().join('\n\n')
    if (found.has(key)) continue
    // Rotated to start at the least naming key, so that every thread names
    // the cycle alike.
    let first = 0
    for (let k = 1; k < keys.length; k++) if (keys[k] < keys[first]) first = k
    const start = path.indexOf(naming[first])
    const rotated = [...path.slice(start), ...path.slice(0, start)]
    const cycle = []
    const requests = []
    for (let k = 0; k < rotated.length; k++) {
      const v = rotated[k]
      if (v >= P) continue
      requests.push({ clientId: pending[v].clientId, serial: pending[v].serial })
      // What it waits for: the next request or lock on the path (past a hub).
      let w = rotated[(k + 1) % rotated.length]
      for (let s = k + 2; w >= P + held.length; s++) w = rotated[s % rotated.length]
      const waitsFor = w < P ? pending[w].clientId : held[w - P].clientId
      const { name, mode } = pending[v]
      cycle.push({ name, mode, clientId: pending[v].clientId, waitsFor })
    }
    const mine = naming.filter((v) => pending[v].clientId === clientId).map((v) => pending[v].serial)
    const lead = pending[naming[first]].clientId === clientId ? pending[naming[first]].serial : undefined
    found.set(key, { key, cycle, requests, mine, lead })
  }
  return [...found.values()]
}

// The watch. A thread tracks what the graph needs (each request's parent:
// the lock inside whose callback it was made, through an
// AsyncLocalStorage around callbacks) and looks for cycles through its own
// waiting requests while it watches: while someone on the thread listens
// on web-locks.deadlock, or asked for rejections (rejectDeadlocks), or the
// environment says so for every thread (WEB_LOCKS_DEADLOCKS=watch or
// reject). A cycle is found only if every thread in it watched when its
// requests were made (their parents are known). A thread that does not
// watch costs a flag per request and nothing else; AsyncLocalStorage,
// which makes every promise of the thread dearer on Node before 24, is not
// used until the thread watches.
//
// Looks: 20 ms after a request starts to wait, then every 250 ms while any
// of the thread's requests wait; each takes the manager's details()
// (which lists every agent's requests and locks) and finds the cycles
// through this thread's. A cycle is published once it was seen in two looks
// in a row (a snapshot can catch a callback that made a request without
// awaiting it in the microseconds before its lock is released), once per
// thread while it lasts. The looks run on the binding's own timer, which
// fake timers installed in JS do not stop; the first look, and the next
// one after a look that saw a cycle, keep the thread alive (a thread that
// waits only on itself is let go otherwise: README, keep-alive).
const diagnostics = require('diagnostics_channel')
const binding = require('./binding.js')
const {
  PromisePrototypeThen, SafeMap, SafeSet, SetPrototypeAdd, SetPrototypeDelete, SetPrototypeGetSize, SetPrototypeForEach,
  MapPrototypeGet, MapPrototypeSet, MapPrototypeDelete, SafeWeakRef, domException
} = require('./intrinsics.js')

const deadlockChannel = diagnostics.channel('web-locks.deadlock')
const FIRST_MS = 20
const WATCH_MS = 250
// How many looks in a row see a cycle before it is published, and before
// its lead's thread (REJECT_LEAD) or any other thread that asked
// (REJECT_ANY: the lead's did not) rejects.
const PUBLISH_LOOKS = 2
const REJECT_LEAD = 2
const REJECT_ANY = 3

const fromEnv = (() => {
  const value = process.env.WEB_LOCKS_DEADLOCKS
  return value === 'watch' || value === 'reject' ? value : undefined
})()

// The thread's state, shared by every copy of lib/ on it (binding.js):
// its watches with waiting requests, the cycles it published (by key, each
// with the watches that still see it), how many watches reject, its
// AsyncLocalStorage once it watched; and the tick, which the first copy
// sets (each watch looks with its own copy's look).
const thread = binding.deadlocks
if (thread.tick === undefined) thread.tick = tick

// Whether the thread tracks parents and looks: cheap enough for every
// request.
function watching () {
  return thread.rejecting > 0 || fromEnv !== undefined || deadlockChannel.hasSubscribers
}

function frames () {
  if (thread.frames === undefined) {
    const { AsyncLocalStorage } = require('async_hooks')
    thread.frames = new AsyncLocalStorage()
  }
  return thread.frames
}

// The parent of a request about to be made: the innermost lock of the
// same agent whose callback this runs in and that is still held (inside a
// callback of another manager's lock, its outer ones are looked at).
function parentOf (agent) {
  if (thread.frames === undefined) return 0
  const frame = thread.frames.getStore()
  if (frame === undefined) return 0
  for (let i = 0; i < frame.length; i++) {
    const { agent: a, request } = frame[i]
    if (a !== agent) continue
    const r = request.deref()
    if (r !== undefined && r.held) return r.deadlock.serial
  }
  return 0
}

// Runs fn (a granted request's run()) inside the request's frame: the list of the
// locks whose callbacks it runs in, innermost first, each with a weak
// reference to its request, of those still held when it starts. A callback
// that schedules more work (a timer, the next run of a job) hands its frame
// on: held weakly and cut to what is held, no chain of old frames grows,
// and no frame keeps a request (nor what its promise holds) alive.
function within (request, fn) {
  const als = frames()
  const outer = als.getStore()
  const frame = [{ __proto__: null, agent: request.backend.agent, request: new SafeWeakRef(request) }]
  if (outer !== undefined) {
    for (let i = 0; i < outer.length; i++) {
      const r = outer[i].request.deref()
      if (r !== undefined && r.held) frame[frame.length] = outer[i]
    }
  }
  return als.run(frame, fn)
}

function watchOf (backend) {
  let w = backend.deadlocks
  if (w === undefined) {
    w = { __proto__: null, backend, look, waiting: new SafeSet(), seen: new SafeMap(), reject: fromEnv === 'reject', looking: false }
    backend.deadlocks = w
  }
  return w
}

const WAITING = 1
const WITHDRAWN = 2

// The tie of a request made while the thread watches (its deadlock field):
// its serial, which its backend gives it (the manager's number for it);
// its parent's, or 0; and its state: WAITING in its queue and watched,
// WITHDRAWN once rejected as part of a deadlock (its callback never to
// run), else 0.
function tie (agent) {
  // A literal defines its own properties (no setter on Object.prototype
  // sees them) and stays a fast object, as one with __proto__: null would not.
  return { serial: 0, parent: parentOf(agent), state: 0 }
}

// A request of the thread, made while the thread watched (it has a tie:
// only then are its parent and serial known), starts to wait.
function waiting (request) {
  if (!watching()) return
  const w = watchOf(request.backend)
  request.deadlock.state = WAITING
  SetPrototypeAdd(w.waiting, request)
  SetPrototypeAdd(thread.watches, w)
  binding.tickIn(FIRST_MS, true)
}

// It no longer waits; its watch's cycles are no longer its own once none
// does (one that forms again is published again).
function waited (request) {
  request.deadlock.state = 0
  const w = request.backend.deadlocks
  SetPrototypeDelete(w.waiting, request)
  if (SetPrototypeGetSize(w.waiting) === 0) {
    SetPrototypeDelete(thread.watches, w)
    // On a request's way out: whatever other code broke here ends the books
    // of this watch's cycles, not the request.
    try {
      if (w.seen.size > 0) found(w, [])
    } catch {}
  }
}

// The binding's tick (binding.js): every watch with waiting requests looks.
// It runs from the addon's timer, where a throw would end the process:
// whatever other code broke (a replaced builtin) ends a look, not more.
function tick () {
  const watches = []
  try {
    SetPrototypeForEach(thread.watches, (w) => { watches[watches.length] = w })
  } catch {}
  for (let i = 0; i < watches.length; i++) {
    try {
      watches[i].look(watches[i])
    } catch {}
  }
  try {
    rearm()
  } catch {}
}

// The next look keeps the thread alive only while a cycle seen is not yet
// published (or rejected, where this thread asked): a deadlock that stays
// keeps the thread no more than the spec's waits do (README, keep-alive).
function rearm () {
  if (SetPrototypeGetSize(thread.watches) === 0) return
  let keep = false
  SetPrototypeForEach(thread.watches, (w) => {
    for (const looks of w.seen.values()) if (looks < (w.reject ? REJECT_ANY : PUBLISH_LOOKS)) keep = true
  })
  binding.tickIn(WATCH_MS, keep)
}

function look (w) {
  const { backend } = w
  if (w.looking) return
  if (SetPrototypeGetSize(w.waiting) === 0 || backend.agent.closed) {
    found(w, [])
    return
  }
  let details
  try {
    details = backend.details()
  } catch {
    return // a failing manager: its requests are failed by it
  }
  if (details === null || typeof details.then !== 'function') {
    seen(w, details)
    return
  }
  w.looking = true
  PromisePrototypeThen(details, (snapshot) => {
    w.looking = false
    try {
      seen(w, snapshot)
      rearm()
    } catch {}
  }, () => { w.looking = false })
}

// A snapshot back after the last waiting request went (an abort, close())
// shows what is over.
function seen (w, snapshot) {
  const { backend } = w
  const clientId = backend.agent.clientId
  if (SetPrototypeGetSize(w.waiting) === 0 || backend.agent.closed || clientId === undefined) {
    found(w, [])
    return
  }
  let cycles
  try {
    cycles = findDeadlocks(snapshot, clientId)
  } catch {
    return // near the stack limit, or a snapshot of a failing manager
  }
  found(w, cycles)
}

// The cycles a look found: counted per watch, published per thread.
function found (w, cycles) {
  const now = new SafeMap()
  const fresh = []
  const rejected = []
  for (const f of cycles) {
    const looks = (MapPrototypeGet(w.seen, f.key) || 0) + 1
    MapPrototypeSet(now, f.key, looks)
    if (looks >= PUBLISH_LOOKS) {
      let seers = MapPrototypeGet(thread.published, f.key)
      if (seers === undefined) {
        MapPrototypeSet(thread.published, f.key, (seers = new SafeSet()))
        fresh.push(f)
      }
      SetPrototypeAdd(seers, w)
    }
    if (w.reject && (looks >= REJECT_ANY || (f.lead !== undefined && looks >= REJECT_LEAD))) rejected.push(f)
  }
  for (const key of w.seen.keys()) {
    if (now.has(key)) continue
    const seers = MapPrototypeGet(thread.published, key)
    if (seers !== undefined && SetPrototypeDelete(seers, w) && SetPrototypeGetSize(seers) === 0) MapPrototypeDelete(thread.published, key)
  }
  w.seen = now
  // Only now, with the books kept: a subscriber may end a request of the
  // cycle, and waited() then clears what this found.
  for (const f of fresh) {
    if (deadlockChannel.hasSubscribers) deadlockChannel.publish({ cycle: f.cycle.map((c) => ({ ...c })) })
  }
  for (const f of rejected) reject(w, f)
}

// One request of this thread in the cycle (its lead if it is this
// thread's) rejects, as an abort would: it leaves its queue and its
// callback never runs.
function reject (w, f) {
  const serial = f.lead !== undefined ? f.lead : f.mine[0]
  SetPrototypeForEach(w.waiting, (request) => {
    if (request.deadlock.serial === serial && request.deadlock.state === WAITING) request.withdraw(deadlockError(f.cycle))
  })
}

function deadlockError (cycle) {
  const steps = cycle.map((c) => `${JSON.stringify(c.name)} (${c.mode}) by ${c.clientId} waits for ${c.waitsFor}`)
  const error = domException(`Deadlock: ${steps.join('; ')}.`, 'OperationError')
  Object.defineProperty(error, 'cycle', { value: cycle.map((c) => Object.freeze({ ...c })), enumerable: true })
  return error
}

// rejectDeadlocks(manager's backend, on).
function setReject (backend, on) {
  const w = watchOf(backend)
  if (w.reject === on) return
  w.reject = on
  thread.rejecting += on ? 1 : -1
}

module.exports = { WAITING, WITHDRAWN, findDeadlocks, graph, components, watching, tie, within, waiting, waited, setReject }
