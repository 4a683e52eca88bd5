'use strict';
// The PostgreSQL manager's ring of watchers (lib/postgres/watch.js, run()):
// each agent waits for the life lock of the next agent of the scope, and an
// agent that joins tells the one before it ('r') to watch it instead. Here
// the 'r' comes at the moments the watch loop is not waiting: with the
// neighbour's lookup on its way (the agent alone), with the watcher's
// connection being made, and with the wait's statement not yet at the
// server (the cancel that should end it finds nothing to cancel). Each time
// the new agent must be watched: its death is seen at once, and a lock it
// held is granted to the next agent within a second or two, not after the
// watchers' safety net (or never, for an agent that was alone).
//
// The moments are made by holding this process's pg calls (Client's
// connect and query) until the 'r' has arrived: only the manager under test
// opens connections in this process while a hold is armed; the other agents
// are child processes.
const assert = require('node:assert/strict');
const { api, deferred, scopeName } = require('./fixtures/util');
const { within } = require('./stress/scopes');
const { spawnProcessAgent, terminateAll } = require('./fixtures/agent');
const { postgres } = require('./fixtures/postgres');

// A death is seen "at once": generous for a loaded machine, far below the
// 25 s slices the watchers of this process wait in here.
const SEEN_MS = 5000;

// The manager's statements are named after what they do (statements() in
// lib/postgres/statements.js), its watcher's wait too.
function nameOf(args) {
  const first = args[0];
  return (first !== null && typeof first === 'object' && first.name) || '';
}

function isWait(args) {
  return nameOf(args).endsWith('_wait');
}

describe('openLockManager (PostgreSQL): the ring of watchers', function () {
  this.timeout(30000);
  let openLockManager;
  let url;
  let Client;
  let restore = [];
  const opened = [];

  before(async function () {
    ({ openLockManager } = api());
    ({ Client } = require('pg'));
    ({ url } = await postgres());
  });
  // The watchers' waits come in slices of 250 ms, each of which also
  // looks again at who the neighbour is: a safety net that would hide a
  // ring that missed an agent. This process's watchers wait in slices of
  // 25 s here, so the ring alone must see each death.
  beforeEach(function () {
    patch('query', function (original, args) {
      const text = typeof args[0] === 'string' ? args[0] : '';
      if (text.startsWith('SET lock_timeout = ')) args = ['SET lock_timeout = 25000', ...args.slice(1)];
      return original.apply(this, args);
    });
  });
  afterEach(async function () {
    // Last patch first: each one's original is the patch before it.
    for (const undo of restore.splice(0).reverse()) undo();
    await terminateAll();
    for (const m of opened.splice(0)) await m.close();
  });

  async function open(scope) {
    const m = await openLockManager(scope, { postgres: url });
    opened.push(m);
    return m;
  }

  function agent(scope) {
    return spawnProcessAgent({ scope, postgres: url });
  }

  // Replaces Client.prototype[method] until the test ends.
  function patch(method, replacement) {
    const original = Client.prototype[method];
    Client.prototype[method] = function (...args) {
      return replacement.call(this, original, args);
    };
    restore.push(() => { Client.prototype[method] = original; });
  }

  // The clients this process connects from now on, in order.
  function recordClients() {
    const clients = [];
    patch('connect', function (original, args) {
      clients.push(this);
      return original.apply(this, args);
    });
    return clients;
  }

  // Resolves at the first 'r' (a new agent next to it) that `client` gets.
  function retargeted(client) {
    return new Promise((resolve) => {
      client.on('notification', (message) => { if (message.payload === 'r') resolve(); });
    });
  }

  // `newcomer` holds x, `manager` waits for it, the newcomer's process is
  // killed: the manager's watcher must see it (the grant within SEEN_MS).
  async function deathIsSeen(manager, newcomer) {
    const id = await newcomer.request('x');
    await newcomer.granted(id);
    let release;
    const granted = deferred();
    const done = manager.request('x', () => {
      granted.resolve();
      return new Promise((resolve) => { release = resolve; });
    });
    await manager.query(); // its request is in the database
    newcomer.child.kill('SIGKILL');
    await within(granted.promise, SEEN_MS, "the grant after the death of the agent that joined next to the manager's");
    release();
    await done;
  }

  it('an agent alone sees the agent that joins while its lookup of a neighbour is on its way', async function () {
    const scope = scopeName('ring-alone');
    // The manager's first lookup of its neighbour (none: it is alone) is
    // held until the newcomer's 'r' has arrived.
    const clients = recordClients();
    const gate = deferred();
    let held = false;
    patch('query', function (original, args) {
      const result = original.apply(this, args);
      if (held || !nameOf(args).endsWith('_neighbour')) return result;
      held = true;
      return result.then(async (value) => {
        await gate.promise;
        return value;
      });
    });
    const manager = await open(scope);
    const heard = retargeted(clients[0]);
    const newcomer = await agent(scope);
    await heard;
    gate.resolve();
    await deathIsSeen(manager, newcomer);
  });

  it('an agent sees the agent that joins while its watcher connection is being made', async function () {
    const scope = scopeName('ring-connect');
    const first = await agent(scope);
    // The manager's third connection (its watcher, for `first`; the second
    // is its join's probe, ended by then) is held until the newcomer's 'r'
    // has arrived.
    const clients = [];
    const reached = deferred();
    const gate = deferred();
    patch('connect', function (original, args) {
      clients.push(this);
      if (clients.length !== 3) return original.apply(this, args);
      reached.resolve();
      return gate.promise.then(() => original.apply(this, args));
    });
    const manager = await open(scope);
    await reached.promise;
    const heard = retargeted(clients[0]);
    const newcomer = await agent(scope);
    await heard;
    gate.resolve();
    await deathIsSeen(manager, newcomer);
    assert.ok(first.exitCode === undefined);
  });

  it('an agent sees the agent that joins while its wait is on its way to the server (the cancel finds no wait)', async function () {
    const scope = scopeName('ring-cancel');
    const first = await agent(scope);
    // The manager's first wait (for `first`) reaches the server only after
    // the newcomer's 'r' has made the manager cancel it.
    const clients = recordClients();
    const reached = deferred();
    const cancelled = deferred();
    const gate = deferred();
    let held = false;
    patch('query', function (original, args) {
      if (nameOf(args).endsWith('_cancel')) {
        const result = original.apply(this, args);
        result.then(() => cancelled.resolve(), () => cancelled.resolve());
        return result;
      }
      if (held || !isWait(args)) return original.apply(this, args);
      held = true;
      reached.resolve();
      return gate.promise.then(() => original.apply(this, args));
    });
    const manager = await open(scope);
    await reached.promise;
    const newcomer = await agent(scope);
    await cancelled.promise;
    gate.resolve();
    await deathIsSeen(manager, newcomer);
    assert.ok(first.exitCode === undefined);
    // Its session, its join's probe, and one watcher.
    assert.equal(clients.length, 3);
  });
});
