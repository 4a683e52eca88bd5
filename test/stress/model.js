'use strict';
// A reference model of the Web Locks lock manager: the algorithms of the
// spec's sections 2 and 4, transcribed step by step in plain, single-threaded
// JavaScript, with lists and linear scans and no shortcuts. It holds no
// promises or callbacks: where the spec enqueues steps on an agent's event
// loop, the model records an event for that agent instead:
//
//   { agent, id, kind: 'granted' }      the callback will be called with a lock
//   { agent, id, kind: 'unavailable' }  ifAvailable: it will be called with null
//   { agent, id, kind: 'stolen' }       the lock's released promise is rejected
//
// Requests and locks are named by the caller's request ids. `agent` is any
// value the caller uses for an agent (the stress test uses a thread index).

class LockModel {
  constructor() {
    this.queueMap = new Map(); // name -> [request], the lock request queue map
    this.held = []; // the held lock set, in the order locks were added
    this.events = []; // emitted by every operation; the caller drains them
  }

  clone() {
    const copy = new LockModel();
    for (const [name, queue] of this.queueMap) copy.queueMap.set(name, queue.map((r) => ({ ...r })));
    copy.held = this.held.map((l) => ({ ...l }));
    return copy;
  }

  takeEvents() {
    const events = this.events;
    this.events = [];
    return events;
  }

  // "get the lock request queue"
  queueFor(name) {
    if (!this.queueMap.has(name)) this.queueMap.set(name, []);
    return this.queueMap.get(name);
  }

  // A lock request is grantable (§2.5).
  grantable(request) {
    const queue = this.queueFor(request.name);
    if (queue.length > 0 && queue[0] !== request) return false;
    if (request.mode === 'exclusive') return !this.held.some((lock) => lock.name === request.name);
    return !this.held.some((lock) => lock.mode === 'exclusive' && lock.name === request.name);
  }

  // Request a lock (§4.1 step 3, the steps on the lock task queue).
  // request: { id, agent, name, mode, ifAvailable, steal }
  request({ id, agent, name, mode, ifAvailable = false, steal = false }) {
    const request = { id, agent, name, mode };
    const queue = this.queueFor(name);
    if (steal) {
      for (const lock of [...this.held]) {
        if (lock.name === name) {
          this.held.splice(this.held.indexOf(lock), 1);
          this.events.push({ agent: lock.agent, id: lock.id, kind: 'stolen' });
        }
      }
      queue.unshift(request);
    } else {
      if (ifAvailable && !this.grantable(request)) {
        this.events.push({ agent, id, kind: 'unavailable' });
        return;
      }
      queue.push(request);
    }
    this.process(queue);
  }

  // Release a lock (§4.2). Returns whether the lock was in the held set (a
  // stolen lock is not).
  release(id) {
    const lock = this.held.find((l) => l.id === id);
    if (lock === undefined) return false;
    this.held.splice(this.held.indexOf(lock), 1);
    this.process(this.queueFor(lock.name));
    return true;
  }

  // Abort the request (§4.3). Returns whether it was still in its queue.
  abort(id) {
    for (const queue of this.queueMap.values()) {
      const i = queue.findIndex((r) => r.id === id);
      if (i >= 0) {
        queue.splice(i, 1);
        this.process(queue);
        return true;
      }
    }
    return false;
  }

  // Process the lock request queue (§4.4).
  process(queue) {
    for (const request of [...queue]) {
      if (!this.grantable(request)) return;
      queue.splice(queue.indexOf(request), 1);
      this.held.push({ id: request.id, agent: request.agent, name: request.name, mode: request.mode });
      this.events.push({ agent: request.agent, id: request.id, kind: 'granted' });
    }
  }

  // Terminate remaining locks and requests (§2.6).
  terminate(agent) {
    for (const queue of [...this.queueMap.values()]) {
      for (const request of [...queue]) {
        if (request.agent === agent) this.abort(request.id);
      }
    }
    for (const lock of [...this.held]) {
      if (lock.agent === agent) this.release(lock.id);
    }
    // The agent's event loop is gone: nothing more is delivered to it.
    this.events = this.events.filter((e) => e.agent !== agent);
  }

  // Snapshot the lock state (§4.5).
  snapshot() {
    const pending = [];
    for (const queue of this.queueMap.values()) {
      for (const r of queue) pending.push({ name: r.name, mode: r.mode, agent: r.agent, id: r.id });
    }
    const held = this.held.map((l) => ({ name: l.name, mode: l.mode, agent: l.agent, id: l.id }));
    return { held, pending };
  }

  // Where a request is: 'queued', 'held', or undefined.
  stateOf(id) {
    if (this.held.some((l) => l.id === id)) return 'held';
    for (const queue of this.queueMap.values()) if (queue.some((r) => r.id === id)) return 'queued';
    return undefined;
  }
}

module.exports = { LockModel };
