'use strict';
// What the resource runs measure: the process's resident set, V8's heap and
// external memory, its OS threads, and Node's active handles and requests.
// Run with --expose-gc so that samples are taken after a full collection.
const fs = require('node:fs');

// Create the stdio handles now, so that they are in every sample.
void process.stdout;
void process.stderr;

function threads() {
  try {
    return fs.readdirSync('/proc/self/task').length;
  } catch {
    return -1;
  }
}

async function sample() {
  // Two collections with a turn of the loop between them, so that weak
  // callbacks and finalizers of the first have run.
  if (global.gc) {
    global.gc();
    await new Promise((r) => setImmediate(r));
    global.gc();
  }
  const m = process.memoryUsage();
  return {
    rss: m.rss,
    heapUsed: m.heapUsed,
    external: m.external,
    arrayBuffers: m.arrayBuffers,
    threads: threads(),
    // Timers and immediates run out by themselves, so they cannot be left
    // behind; Node's own worker bookkeeping queues an immediate now and then
    // (seen in CI: one in the sample before, none after).
    resources: process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap' && r !== 'Timeout' && r !== 'Immediate'),
  };
}

const mb = (n) => `${(n / 1048576).toFixed(1)} MB`;

function args(defaults) {
  const out = { ...defaults };
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i += 2) {
    const key = a[i].replace(/^--/, '');
    if (!(key in defaults)) throw new Error(`unknown argument ${a[i]} (known: ${Object.keys(defaults).map((k) => `--${k}`).join(' ')})`);
    out[key] = Number(a[i + 1]);
  }
  return out;
}

module.exports = { sample, mb, args, threads };
