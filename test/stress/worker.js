'use strict';
// A worker thread of the stress test: instruments the binding, loads the
// package, takes its life lock (held until the thread ends, so other threads
// can tell it is gone), registers its clientId, then runs a Participant
// under the main thread's commands.
const { parentPort, workerData } = require('node:worker_threads');
const { instrument } = require('./instrument');
const { Participant } = require('./participant');
const L = require('./layout');

const { tid, slot, sab, pkg, names, seed } = workerData;
const S = new Int32Array(sab);
const inst = instrument({
  pkg, sab, tid, slot, names,
  sink(rec) {
    parentPort.postMessage(rec);
    Atomics.add(S, L.POSTED + slot, 1);
  },
});
const { locks } = require(pkg);

async function start() {
  const life = L.lifeName(tid);
  await new Promise((resolve) => {
    locks.request(life, () => {
      resolve();
      return new Promise(() => {}); // held for the thread's whole life
    });
  });
  const snap = await locks.query();
  const mine = snap.held.find((e) => e.name === life);
  inst.register(mine.clientId);
  const p = new Participant({ tid, inst, locks, names, seed });
  const handlers = {
    pause() {
      p.pause();
      parentPort.postMessage({ ctl: 'paused' });
    },
    resume() {
      p.resume();
    },
    report() {
      parentPort.postMessage({ ctl: 'report', report: p.report() });
    },
    async finish() {
      await p.finish();
      parentPort.postMessage({ ctl: 'finished', report: p.report() });
      // Nothing is left to keep this thread alive: it must now exit by itself.
      parentPort.close();
    },
    exit() {
      process.exit(7);
    },
    throw() {
      setImmediate(() => {
        throw new Error('stress: uncaught on purpose');
      });
    },
    exitInCallback() {
      p.onCallback = () => process.exit(7);
    },
    spinInCallback() {
      p.onCallback = () => {
        parentPort.postMessage({ ctl: 'spinning' });
        for (;;) { /* until terminated */ }
      };
    },
  };
  parentPort.on('message', (m) => handlers[m.cmd](m));
  parentPort.postMessage({ ctl: 'ready', clientId: mine.clientId });
  p.run();
}

start();
