'use strict';
// One process of the cross-process stress test (processes.js): an agent of
// the scope that makes the driver's requests, releases and aborts, one
// command at a time, and reports what its callbacks and promises see. Its
// callbacks also check mutual exclusion through the file system: a holder
// lists the markers in its name's directory, then leaves its own there until
// it is released; the driver judges the listing.
const fs = require('node:fs');
const path = require('node:path');

const { pkg, scope, dir, idx } = JSON.parse(process.env.WEB_LOCKS_STRESS);
const { openLockManager } = require(pkg);

const gates = new Map();
const controllers = new Map();
let locks;

function send(message) {
  process.send(message);
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
    send({ type: 'requested', id });
    p.then(
      (value) => send({ type: 'settled', id, ok: true, value }),
      (error) => send({ type: 'settled', id, ok: false, name: error && error.name, message: error && error.message }),
    );
  },
  // Ends a callback; acknowledged once the release it causes has been made
  // (in the microtasks that follow).
  release({ id }) {
    const gate = gates.get(id);
    gates.delete(id);
    gate();
    setImmediate(() => send({ type: 'released', id }));
  },
  abort({ id }) {
    controllers.get(id).abort(new Error('stress abort'));
    send({ type: 'aborted', id });
  },
  exit() {
    process.exit(0);
  },
  crash() {
    setImmediate(() => { throw new Error('stress crash'); });
  },
};

async function main() {
  locks = await openLockManager(scope, { dir });
  // Its clientId, from a lock it holds on a name of its own.
  const me = `whoami:${idx}`;
  const clientId = await locks.request(me, async () => (await locks.query()).held.find((e) => e.name === me).clientId);
  process.on('message', (message) => handlers[message.cmd](message));
  send({ type: 'ready', clientId });
}

main();
