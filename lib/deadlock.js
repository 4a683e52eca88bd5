'use strict'

// Deadlocks in a snapshot of a lock manager (query()'s { held, pending }),
// whichever manager took it: the process-wide one, a scope, PostgreSQL.
//
// The wait-for graph. A pending request waits for the locks held on its
// name that conflict with its mode, and for the request just ahead of it in
// its name's queue (only the first of a queue can be granted, spec 4.4; the
// rest of the queue is reached through that one). A held lock waits for
// every pending request of its agent: an agent that waits is assumed not to
// release what it holds until it is granted, which is what makes a cycle a
// deadlock (nothing in it can move unless someone aborts, times out, steals
// or ends). A cycle is a path from a pending request back to itself; an
// agent waiting on its own lock is one (its request -> its lock -> its
// request). Each cycle is named by its pending requests, each with the
// agent it waits for (the next node's agent).
//
// Nodes: pending entries [0, P), held entries [P, P + H), and one hub per
// agent [P + H, ...), through which its held entries reach its pending
// ones, so that the edges are linear in the snapshot's size.

function graph ({ held, pending }) {
  const P = pending.length
  const H = held.length
  const hubs = new Map() // clientId -> hub node
  const hub = (clientId) => {
    let node = hubs.get(clientId)
    if (node === undefined) {
      node = P + H + hubs.size
      hubs.set(clientId, node)
    }
    return node
  }
  const names = new Map() // name -> { exclusive: [held nodes], all: [held nodes], last: pending node }
  const entry = (name) => {
    let e = names.get(name)
    if (e === undefined) names.set(name, (e = { exclusive: [], all: [], last: -1 }))
    return e
  }
  for (let j = 0; j < H; j++) {
    const e = entry(held[j].name)
    e.all.push(P + j)
    if (held[j].mode === 'exclusive') e.exclusive.push(P + j)
  }
  const succ = []
  const ahead = new Array(P) // the pending node just ahead, or -1
  const index = new Array(P) // its place among its agent's pending on its name
  const mineOnName = new Map() // clientId + '\0' + name -> count so far
  for (let i = 0; i < P; i++) {
    const { name, mode, clientId } = pending[i]
    const e = entry(name)
    const out = mode === 'exclusive' ? e.all.slice() : e.exclusive.slice()
    if (e.last >= 0) out.push(e.last)
    ahead[i] = e.last
    e.last = i
    const k = clientId + '\0' + name
    index[i] = mineOnName.get(k) || 0
    mineOnName.set(k, index[i] + 1)
    succ.push(out)
    hub(clientId)
  }
  for (let j = 0; j < H; j++) succ.push([hub(held[j].clientId)])
  for (let n = 0; n < hubs.size; n++) succ.push([])
  for (let i = 0; i < P; i++) succ[hubs.get(pending[i].clientId)].push(i)
  return { P, H, succ, ahead, index, total: mineOnName }
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

// The shortest path from `from`'s successors back to `from`, within its
// component: its nodes from `from`, or null.
function shortestCycle (succ, comp, from) {
  const parent = new Map([[from, -1]])
  const queue = []
  for (const w of succ[from]) {
    if (w === from) return [from]
    if (comp[w] === comp[from] && !parent.has(w)) {
      parent.set(w, from)
      queue.push(w)
    }
  }
  for (let q = 0; q < queue.length; q++) {
    const v = queue[q]
    for (const w of succ[v]) {
      if (w === from) {
        const path = []
        for (let x = v; x !== from; x = parent.get(x)) path.push(x)
        path.push(from)
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

// The cycles through the pending requests of the agent `clientId`: for
// each of them that is on a cycle, the shortest one, once. Each is
// { key, cycle, mine }: key names the cycle whoever finds it (its requests
// by name, place in their queues and agent, from the least); cycle lists its
// pending requests in order, each { name, mode, clientId, waitsFor }, from
// the one the key names first (its lead); mine lists those of `clientId` as
// { name, index, of }, index being its place among that agent's `of`
// pending requests on the name (request order); lead is the lead if it is
// one of them, else null.
function findDeadlocks (snapshot, clientId) {
  const { pending, held } = snapshot
  const { P, succ, index, total } = graph(snapshot)
  const comp = components(succ)
  const size = new Map()
  for (let v = 0; v < succ.length; v++) size.set(comp[v], (size.get(comp[v]) || 0) + 1)
  const owner = (v) => (v < P ? pending[v].clientId : held[v - P].clientId)
  const place = new Map() // pending node -> its place in its name's queue
  const seen = new Map()
  for (let i = 0; i < P; i++) {
    seen.set(pending[i].name, (seen.get(pending[i].name) || 0) + 1)
    place.set(i, seen.get(pending[i].name) - 1)
  }
  const found = new Map()
  for (let i = 0; i < P; i++) {
    if (pending[i].clientId !== clientId) continue
    if (size.get(comp[i]) === 1 && !succ[i].includes(i)) continue
    const path = shortestCycle(succ, comp, i)
    if (path === null) continue
    const requests = path.filter((v) => v < P)
    const ids = requests.map((v) => JSON.stringify([pending[v].name, place.get(v), pending[v].clientId]))
    let first = 0
    for (let k = 1; k < ids.length; k++) if (ids[k] < ids[first]) first = k
    const key = [...ids.slice(first), ...ids.slice(0, first)].join(',')
    if (found.has(key)) continue
    const cycle = []
    for (let k = 0; k < path.length; k++) {
      const v = path[k]
      if (v >= P) continue
      const next = path[(k + 1) % path.length]
      cycle.push({ name: pending[v].name, mode: pending[v].mode, clientId: pending[v].clientId, waitsFor: owner(next) })
    }
    const rotated = [...cycle.slice(first), ...cycle.slice(0, first)]
    const at = (v) => ({ name: pending[v].name, index: index[v], of: total.get(clientId + '\0' + pending[v].name) })
    const mine = requests.filter((v) => pending[v].clientId === clientId).map(at)
    const leader = requests[first]
    const lead = pending[leader].clientId === clientId ? at(leader) : null
    found.set(key, { key, cycle: rotated, mine, lead })
  }
  return [...found.values()]
}

// The watch: a thread looks for cycles through its own waiting requests of
// a manager while it has any, and while someone on the thread listens
// (the channel) or asked for a rejection (rejectDeadlocks): a first look
// soon after a request starts to wait, then one every WATCH_MS while any
// waits. A request granted at once costs nothing more than a flag; nobody
// listening, nothing is looked at. A cycle is published once per thread
// while it lasts (by its key); one that forms again is published again.
// Its members' threads each find it in their own looks, so each hears of
// it on its own channel, however it formed.
const diagnostics = require('diagnostics_channel')
const { setTimeout } = require('timers')
const {
  PromiseResolve, PromisePrototypeThen, SafeSet, SetPrototypeAdd, SetPrototypeDelete, SetPrototypeForEach,
  SetPrototypeGetSize, domException
} = require('./intrinsics.js')

const deadlockChannel = diagnostics.channel('web-locks.deadlock')
const FIRST_MS = 20
const WATCH_MS = 250

// The state of a backend's watch, made at its first waiting request. What
// runs on a request's way in and out (waiting, waited) uses only the
// builtins taken at load, as the rest of lib/ does; a look runs in a timer,
// and whatever other code broke there ends that look, not the request.
function watchOf (backend) {
  let w = backend.deadlocks
  if (w === undefined) {
    w = { __proto__: null, waiting: new SafeSet(), timer: undefined, reported: undefined, reject: false }
    backend.deadlocks = w
  }
  return w
}

const WAITING = 1
const WITHDRAWN = 2

// Only while the watch is on: a thread that nobody watches keeps no set.
function waiting (request) {
  const { backend } = request
  let w = backend.deadlocks
  if (!deadlockChannel.hasSubscribers && (w === undefined || !w.reject)) return
  if (w === undefined) w = watchOf(backend)
  request.deadlock = WAITING
  SetPrototypeAdd(w.waiting, request)
  arm(backend, w, FIRST_MS)
}

// Its last waiting request gone, the cycles it saw are no longer its own
// (one that forms again is published again).
function waited (request) {
  request.deadlock = 0
  const w = request.backend.deadlocks
  SetPrototypeDelete(w.waiting, request)
  if (w.reported !== undefined && SetPrototypeGetSize(w.waiting) === 0) {
    try {
      found(w, [])
    } catch {}
  }
}

function arm (backend, w, ms) {
  if (w.timer !== undefined || SetPrototypeGetSize(w.waiting) === 0) return
  if (!w.reject && !deadlockChannel.hasSubscribers) return
  w.timer = setTimeout(look, ms, backend, w)
  // The waiting requests keep the thread alive as they should; the watch
  // does not, but for its first look: a thread whose requests wait only
  // on itself would be let go (the keep-alive rule) before it looked.
  if (ms !== FIRST_MS) w.timer.unref()
}

function look (backend, w) {
  w.timer = undefined
  if (SetPrototypeGetSize(w.waiting) === 0 || backend.agent.closed) {
    found(w, [])
    return
  }
  const again = () => arm(backend, w, WATCH_MS)
  try {
    const clientId = backend.agent.clientId
    if (clientId === undefined) {
      again()
      return
    }
    PromisePrototypeThen(PromisePrototypeThen(PromiseResolve(backend.query()), (s) => found(w, findDeadlocks(s, clientId))), again, again)
  } catch {
    again()
  }
}

// The cycles this thread has published, by key, each with the watches that
// still see it: a thread with two agents in one cycle (two managers of one
// scope, or of one PostgreSQL database) hears of it once.
const published = new Map()

function found (w, cycles) {
  const now = new Map()
  for (const f of cycles) {
    const looks = ((w.reported !== undefined && w.reported.get(f.key)) || 0) + 1
    now.set(f.key, looks)
    let seers = published.get(f.key)
    if (seers === undefined) {
      published.set(f.key, (seers = new Set()))
      if (deadlockChannel.hasSubscribers) deadlockChannel.publish({ cycle: f.cycle.map((c) => ({ ...c })) })
    }
    seers.add(w)
    // The lead's thread rejects at once; another member's only if the
    // cycle outlived one more look (the lead's thread did not ask for it):
    // one rejection ends a cycle, and threads agree on the lead unasked.
    if (w.reject && (f.lead !== null || looks > 1)) reject(w, f.cycle, f.lead || f.mine[f.mine.length - 1])
  }
  if (w.reported !== undefined) {
    for (const key of w.reported.keys()) {
      const seers = now.has(key) ? undefined : published.get(key)
      if (seers !== undefined && seers.delete(w) && seers.size === 0) published.delete(key)
    }
  }
  w.reported = now.size > 0 ? now : undefined
}

// A request of this thread in the cycle rejects, as an abort would (it
// leaves its queue; its callback never runs), with an error that names the
// cycle.
// Skipped (until the next look) where this thread's waiting requests on the
// name are not those the snapshot shows: one was granted or joined since.
function reject (w, cycle, { name, index, of }) {
  const on = []
  SetPrototypeForEach(w.waiting, (request) => { if (request.name === name) on.push(request) })
  if (on.length === of) on[index].withdraw(deadlockError(cycle))
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
  w.reject = on
  arm(backend, w, FIRST_MS)
}

module.exports = { WAITING, WITHDRAWN, findDeadlocks, graph, components, waiting, waited, setReject, deadlockChannel }
