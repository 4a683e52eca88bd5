#!/usr/bin/env node
'use strict';
// Many worker threads started and ended while they hold and wait on locks:
// nothing of them may stay behind.
//
//   node --expose-gc test/resources/churn.js [--workers 10000] [--parallel 4]
//
// The main thread holds "churn:common" throughout. Each worker holds a lock
// of its own and a shared one, queues on "churn:common" (so it is waiting
// when it ends), and queues on "churn:chain", which each worker holds in
// turn (so the workers wait on each other). Then it is ended, in turn by
// terminate(), process.exit(), an uncaught exception, or terminate() right
// after it was started (while it may still be loading the addon). Every 500
// workers (or fifth of the run), once all of those have exited, the manager must hold nothing but
// the main thread's lock. At the end: the process's memory, OS threads and
// handles must be back where they were after the warm-up.
const assert = require('node:assert/strict');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { sample, mb, args } = require('./measure');

const PKG = process.env.WEB_LOCKS_PKG ? path.resolve(process.env.WEB_LOCKS_PKG) : path.resolve(__dirname, '..', '..');
const { locks } = require(PKG);

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { locks } = require(workerData.pkg);
const forever = () => new Promise(() => {});
let held = 0;
const granted = () => { if (++held === 2) parentPort.postMessage('ready'); };
locks.request('churn:own:' + workerData.i, () => { granted(); return forever(); });
locks.request('churn:shared', { mode: 'shared' }, () => { granted(); return forever(); });
locks.request('churn:common', () => {});
locks.request('churn:chain', () => forever());
parentPort.on('message', (m) => {
  if (m === 'exit') process.exit(0);
  if (m === 'throw') setImmediate(() => { throw new Error('churn: on purpose'); });
});
`;

async function main() {
  const { workers: total, parallel } = args({ workers: 10000, parallel: 4 });
  let releaseCommon;
  const common = locks.request('churn:common', () => new Promise((r) => { releaseCommon = r; }));
  await new Promise((r) => setImmediate(r));

  const warmup = Math.max(parallel, Math.floor(total / 10));
  let before = null;
  let started = 0;
  let exited = 0;
  const byKind = { terminate: 0, exit: 0, throw: 0, early: 0 };
  const t0 = Date.now();

  async function one(i) {
    const w = new Worker(WORKER, { eval: true, workerData: { pkg: PKG, i }, resourceLimits: { maxYoungGenerationSizeMb: 2 } });
    const exit = new Promise((resolve) => w.once('exit', resolve));
    const ready = new Promise((resolve) => w.once('message', resolve));
    w.on('error', () => {}); // the uncaught exception on purpose
    const kind = ['terminate', 'exit', 'throw', 'early'][i % 4];
    byKind[kind]++;
    if (kind === 'early') {
      w.terminate();
    } else {
      await Promise.race([ready, exit]);
      if (kind === 'terminate') w.terminate();
      else w.postMessage(kind);
    }
    const code = await exit;
    // terminate() before the thread runs any JavaScript may give code 0.
    assert.ok(kind === 'exit' ? code === 0 : code === 1 || (kind === 'early' && code === 0), `worker ${i} (${kind}) exited with code ${code}`);
    exited++;
  }

  async function checkpoint() {
    const snap = await locks.query();
    const others = [...snap.held, ...snap.pending].filter((e) => e.name !== 'churn:common' || snap.pending.includes(e));
    assert.deepEqual(others, [], `after ${exited} workers ended, the manager still has: ${JSON.stringify(others.slice(0, 5))}`);
    assert.equal(snap.held.length, 1, 'only the main thread\'s lock is held');
  }

  while (started < total) {
    const batch = Math.min(500, Math.ceil(total / 5), total - started);
    const running = new Set();
    for (let k = 0; k < batch; k++) {
      const p = one(started++).finally(() => running.delete(p));
      running.add(p);
      if (running.size >= parallel) await Promise.race(running);
    }
    await Promise.all(running);
    await checkpoint();
    if (before === null && started >= warmup) before = await sample();
  }
  const seconds = (Date.now() - t0) / 1000;
  const after = await sample();
  releaseCommon();
  await common;
  const left = await locks.query();

  const grown = after.rss - before.rss;
  // The addon's per-thread state is a few hundred bytes: a leak of it shows
  // in the valgrind and ASan runs; this catches anything bigger.
  const allowance = 8 * 1048576 + total * 1024;
  console.log(JSON.stringify({
    workers: total, byKind, seconds,
    rssBefore: mb(before.rss), rssAfter: mb(after.rss), rssGrowth: mb(grown), allowance: mb(allowance),
    heapBefore: mb(before.heapUsed), heapAfter: mb(after.heapUsed),
    externalBefore: mb(before.external), externalAfter: mb(after.external),
    threadsBefore: before.threads, threadsAfter: after.threads,
    resourcesBefore: before.resources, resourcesAfter: after.resources,
  }));
  assert.deepEqual(left, { held: [], pending: [] }, 'nothing left in the manager');
  assert.ok(grown < allowance, `RSS grew by ${mb(grown)} over ${total} workers (allowed ${mb(allowance)})`);
  assert.ok(after.heapUsed - before.heapUsed < 8 * 1048576, `JS heap grew by ${mb(after.heapUsed - before.heapUsed)}`);
  assert.equal(after.threads, before.threads, 'every worker\'s OS thread is gone');
  assert.deepEqual(after.resources, before.resources, 'no handle or request left behind');
  console.log(`ok: ${total} workers started and ended; RSS ${mb(before.rss)} -> ${mb(after.rss)}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
