'use strict';
// One process of the cross-process stress test (processes.js): an agent of
// the scope that makes the driver's requests, releases and aborts, one
// command at a time, and reports what its callbacks and promises see. Its
// callbacks also check mutual exclusion through the file system: a holder
// lists the markers in its name's directory, then leaves its own there until
// it is released; the driver judges the listing.
//
// The scope is openLockManager(scope, options) with the driver's options:
// { dir } for the machine-wide manager, { postgres, schema } for PostgreSQL.
// Each acknowledgement ('requested', 'released', 'aborted') is sent once the
// operation is in the manager: after a query() that follows it, which on
// PostgreSQL goes on the same session after the calls made before it.
//
// The agent holds a lock of its own, on a name only it uses, for as long as
// it lasts: it says the agent's clientId ('ready') and, when the agent is
// ended under it (a PostgreSQL session lost), it is rejected with the rest
// of the agent's requests ('lost'). The driver then sends 'rejoin', and the
// next request joins as a new agent, whose own lock says its clientId.
const fs = require('node:fs');
const path = require('node:path');

const { pkg, scope, options, dir, idx } = JSON.parse(process.env.WEB_LOCKS_STRESS);
const { openLockManager } = require(pkg);

const gates = new Map();
const controllers = new Map();
let locks;
let generation = 0;

function send(message) {
  process.send(message);
}

function failure(error) {
  return { name: error && error.name, message: error && error.message, code: error && error.code };
}

// Sends `message` once the operations made so far are in the manager.
function acknowledge(message) {
  locks.query().then(
    () => send(message),
    (error) => send(Object.assign({ queryFailed: failure(error) }, message)),
  );
}

// The agent's own lock: 'ready' with its clientId once granted, 'lost' when
// the agent is ended under it.
function join() {
  const me = `stress-self:${idx}:${generation++}`;
  let life;
  locks.request(me, async () => {
    const clientId = (await locks.query()).held.find((e) => e.name === me).clientId;
    send({ type: 'ready', clientId });
    return new Promise((resolve) => { life = resolve; });
  }).then(
    () => send({ type: 'joinFailed', message: 'the own lock ended' }),
    (error) => send(Object.assign({ type: life === undefined ? 'joinFailed' : 'lost' }, failure(error))),
  );
}

const handlers = {
  request({ id, name, nameIndex, mode, ifAvailable, steal, abortable }) {
    const options = { mode, ifAvailable, steal };
    if (abortable) {
      const controller = new AbortController();
      controllers.set(id, controller);
      options.signal = controller.signal;
    }
    const p = locks.request(name, options, (lock) => {
      if (lock === null) {
        send({ type: 'unavailable', id });
        return 'missed';
      }
      const where = path.join(dir, 'inside', String(nameIndex));
      const seen = fs.readdirSync(where);
      const marker = path.join(where, `${mode}-${idx}-${id}`);
      fs.writeFileSync(marker, '');
      send({ type: 'granted', id, seen, lock: { name: lock.name === name, mode: lock.mode } });
      return new Promise((resolve) => {
        gates.set(id, () => {
          fs.rmSync(marker, { force: true });
          resolve('released');
        });
      });
    });
    acknowledge({ type: 'requested', id });
    p.then(
      (value) => send({ type: 'settled', id, ok: true, value }),
      (error) => send(Object.assign({ type: 'settled', id, ok: false }, failure(error))),
    );
  },
  // Ends a callback; acknowledged once the release it causes has been made
  // (in the microtasks that follow).
  release({ id }) {
    const gate = gates.get(id);
    gates.delete(id);
    gate();
    setImmediate(() => acknowledge({ type: 'released', id }));
  },
  abort({ id }) {
    controllers.get(id).abort(new Error('stress abort'));
    acknowledge({ type: 'aborted', id });
  },
  rejoin() {
    join();
  },
  exit() {
    process.exit(0);
  },
  crash() {
    setImmediate(() => { throw new Error('stress crash'); });
  },
};

async function main() {
  locks = await openLockManager(scope, options);
  process.on('message', (message) => handlers[message.cmd](message));
  join();
}

main().catch((error) => {
  send(Object.assign({ type: 'joinFailed' }, failure(error)));
});
