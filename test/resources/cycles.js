#!/usr/bin/env node
'use strict';
// Many request/release cycles: the process's memory must stay flat.
//
//   node --expose-gc --max-semi-space-size=1 test/resources/cycles.js [--cycles 1000000]
//
// Four kinds of cycle, in turn: an exclusive request on a free name, a
// shared one, an ifAvailable miss, and a queued request aborted by its
// signal; names come from a pool of 1,000 plus a fresh name every 16th cycle
// (so the manager's table of names grows and shrinks). Two worker threads
// contend on the same names throughout, so grants also cross threads. The
// memory is sampled at each fifth of the run (the first fifth is the
// warm-up); the run fails if it grew by more than a small allowance, if anything is left in
// the manager, or if a handle is left behind.
const assert = require('node:assert/strict');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { sample, mb, args } = require('./measure');

const PKG = process.env.WEB_LOCKS_PKG ? path.resolve(process.env.WEB_LOCKS_PKG) : path.resolve(__dirname, '..', '..');
const { locks } = require(PKG);

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { locks } = require(workerData.pkg);
const stop = new Int32Array(workerData.stop);
let cycles = 0;
(async () => {
  while (Atomics.load(stop, 0) === 0) {
    const name = 'cyc:' + (cycles % 1000);
    await locks.request(name, { mode: cycles & 1 ? 'shared' : 'exclusive' }, () => {});
    cycles++;
  }
  parentPort.postMessage(cycles);
})();
`;

function hold(name) {
  let release;
  let granted;
  const gate = new Promise((r) => { release = r; });
  const grant = new Promise((r) => { granted = r; });
  const done = locks.request(name, () => {
    granted();
    return gate;
  });
  return { granted: grant, release, done };
}

async function main() {
  const { cycles } = args({ cycles: 1000000 });
  const initial = await sample(); // handles before the workers exist
  const stop = new Int32Array(new SharedArrayBuffer(4));
  // A fixed young generation, so that its growth is not mistaken for a leak.
  const workers = [0, 1].map(() => new Worker(WORKER, { eval: true, workerData: { pkg: PKG, stop: stop.buffer }, resourceLimits: { maxYoungGenerationSizeMb: 2 } }));
  const workerCycles = workers.map((w) => new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject); }));
  const workerExits = workers.map((w) => new Promise((resolve) => w.once('exit', resolve)));

  const noop = () => {};
  // Samples at each fifth of the run, the workers still running; the first
  // fifth is the warm-up.
  const samples = [];
  const every = Math.floor(cycles / 5);
  const started = Date.now();
  for (let i = 0; i < cycles; i++) {
    if (i > 0 && i % every === 0) samples.push(await sample());
    const name = i % 16 === 15 ? `cyc-fresh:${i}` : `cyc:${i % 1000}`;
    switch (i & 3) {
      case 0:
        await locks.request(name, noop);
        break;
      case 1:
        await locks.request(name, { mode: 'shared' }, noop);
        break;
      case 2: {
        // Held here (once granted: a worker may hold it first) while an
        // ifAvailable request misses.
        const h = hold(name);
        await h.granted;
        await locks.request(name, { ifAvailable: true }, noop);
        h.release();
        await h.done;
        break;
      }
      default: {
        // Queued behind a held lock, then aborted.
        const h = hold(name);
        const controller = new AbortController();
        const queued = locks.request(name, { signal: controller.signal }, noop).catch(() => {});
        await h.granted;
        controller.abort();
        await queued;
        h.release();
        await h.done;
      }
    }
  }
  samples.push(await sample());
  const seconds = (Date.now() - started) / 1000;
  Atomics.store(stop, 0, 1);
  const byWorkers = (await Promise.all(workerCycles)).reduce((a, b) => a + b, 0);
  await Promise.all(workerExits);
  const ended = await sample();
  const left = await locks.query();
  const before = samples[0];
  const after = samples[samples.length - 1];
  const grown = after.rss - before.rss;
  // A leak of 8 bytes per cycle would be 8 MB over a million cycles.
  const allowance = 4 * 1048576 + cycles * 4;
  console.log(JSON.stringify({
    cycles, workerCycles: byWorkers, seconds,
    rssBefore: mb(before.rss), rssAfter: mb(after.rss), rssGrowth: mb(grown), allowance: mb(allowance),
    heapBefore: mb(before.heapUsed), heapAfter: mb(after.heapUsed),
    externalBefore: mb(before.external), externalAfter: mb(after.external),
    rssSamples: samples.map((x) => mb(x.rss)),
    rssAfterWorkersEnded: mb(ended.rss),
    threadsBefore: before.threads, threadsAfter: ended.threads,
    resourcesBefore: initial.resources, resourcesAfter: ended.resources,
  }));
  assert.deepEqual(left, { held: [], pending: [] }, 'nothing left in the manager');
  assert.ok(grown < allowance, `RSS grew by ${mb(grown)} over ${cycles} cycles (allowed ${mb(allowance)})`);
  assert.ok(after.heapUsed - before.heapUsed < 4 * 1048576, `JS heap grew by ${mb(after.heapUsed - before.heapUsed)}`);
  assert.ok(ended.threads <= before.threads - 2, `threads: ${before.threads} -> ${ended.threads} (the two workers' threads must be gone)`);
  assert.deepEqual(ended.resources, initial.resources, 'no handle or request left behind');
  console.log(`ok: ${cycles} cycles here and ${byWorkers} in two workers; RSS ${mb(before.rss)} -> ${mb(after.rss)}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
