'use strict';
// The randomized multi-thread stress test (test/stress/), bounded: a few
// fixed seeds and one random seed, each run in a child process (the stress
// driver loads the package through its instrumentation, so it needs a thread
// that has not loaded it yet). A failure shows the seed, the command that
// reruns it, and the operation trace. Longer runs: npm run stress -- --seconds N
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');

const RUN = path.join(__dirname, 'stress', 'run.js');

function stress(args, ms) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [RUN, '--quiet', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    const timer = setTimeout(() => {
      out += `\n(killed after ${ms} ms)`;
      child.kill('SIGKILL');
    }, ms);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, out });
    });
  });
}

describe('stress: random operations on many threads against the reference model', function () {
  const SECONDS = 3;
  this.timeout((SECONDS + 40) * 1000);

  const seeds = [1, 2, 3, (Math.random() * 2 ** 31) >>> 0];
  for (const [i, seed] of seeds.entries()) {
    it(`seed ${seed}${i === seeds.length - 1 ? ' (random)' : ''}: mutual exclusion, every request ends once, grants in queue order, state equal to the model's, nothing left`, async function () {
      const r = await stress(['--seed', String(seed), '--seconds', String(SECONDS), '--threads', '4'], (SECONDS + 35) * 1000);
      assert.equal(r.code, 0, `seed ${seed} (rerun: node test/stress/run.js --seed ${seed} --seconds ${SECONDS})\n${r.out}`);
      const stats = JSON.parse(r.out.slice(r.out.indexOf('stress: ok ') + 11).split('\n')[0]);
      // The run did what it is for (loose enough for a slow machine or a
      // sanitizer build).
      assert.ok(stats.requests > 100 && stats.granted > 50, JSON.stringify(stats));
      assert.ok(stats.threadsSpawned > 4 && Object.keys(stats.ended).filter((k) => k !== 'graceful').length >= 3, JSON.stringify(stats));
    });
  }
});

describe('stress: random operations from many processes on one scope against the reference model', function () {
  // Longer than the threads' run: starting processes takes most of it.
  const SECONDS = 6;
  this.timeout((SECONDS + 60) * 1000);
  if (process.platform !== 'linux') return;

  const seeds = [1, (Math.random() * 2 ** 31) >>> 0];
  for (const [i, seed] of seeds.entries()) {
    it(`seed ${seed}${i === seeds.length - 1 ? ' (random)' : ''}: every event reaches its process, mutual exclusion, query() equal to the model's, processes killed, exiting and crashing, nothing left`, async function () {
      const r = await stress(['--seed', String(seed), '--seconds', String(SECONDS), '--processes', '4'], (SECONDS + 55) * 1000);
      assert.equal(r.code, 0, `seed ${seed} (rerun: node test/stress/run.js --processes 4 --seed ${seed} --seconds ${SECONDS})\n${r.out}`);
      const stats = JSON.parse(r.out.slice(r.out.indexOf('stress: ok ') + 11).split('\n')[0]);
      assert.ok(stats.requests > 30 && stats.granted > 10 && stats.stolen + stats.aborted + stats.unavailable > 3, JSON.stringify(stats));
      assert.ok(stats.killed + stats.exited + stats.crashed >= 3, JSON.stringify(stats));
    });
  }
});
