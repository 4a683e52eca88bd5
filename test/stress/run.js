#!/usr/bin/env node
'use strict';
// The stress test from the command line:
//   node test/stress/run.js [--seconds N] [--seed S] [--threads K] [--quiet] [--verbose] [--no-model]
//   node test/stress/run.js --processes K [--seconds N] [--seed S] [--quiet]
// (`npm run stress -- --seconds 60`). --no-model skips the replay through the
// reference model, leaving the threads' own checks (to show they catch bugs).
// --processes runs the cross-process stress test (processes.js) with K
// processes on one machine-wide scope instead. Prints the seed first; on a
// failure, the seed, the command to rerun it and the operation trace, and
// exits 1.
const { runStress } = require('./driver');
const { runProcessStress } = require('./processes');

function parse(argv) {
  const opts = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined || !/^\d+(\.\d+)?$/.test(v)) throw new Error(`${a} needs a number`);
      return Number(v);
    };
    if (a === '--seconds') opts.seconds = value();
    else if (a === '--seed') opts.seed = value();
    else if (a === '--threads') opts.threads = value();
    else if (a === '--processes') opts.processes = value();
    else if (a === '--quiet') opts.quiet = true;
    else if (a === '--verbose') opts.verbose = true;
    else if (a === '--no-model') opts.model = false; // only the in-thread checks

    else throw new Error(`unknown argument ${a} (use --seconds N, --seed S, --threads K or --processes K, --quiet)`);
  }
  return opts;
}

async function main() {
  const opts = parse(process.argv.slice(2));
  if (opts.seed === undefined) opts.seed = (Math.random() * 2 ** 31) >>> 0;
  const who = opts.processes ? `${opts.processes} processes` : `${opts.threads || 4} workers + main`;
  console.log(`stress: seed ${opts.seed}, ${who}, ${opts.seconds === undefined ? 5 : opts.seconds} s`);
  if (!opts.quiet) opts.log = (line) => console.log(`  ${line}`);
  const stats = opts.processes ? await runProcessStress(opts) : await runStress(opts);
  console.log(`stress: ok ${JSON.stringify(stats)}`);
}

main().catch((err) => {
  console.error(err && err.message ? err.message : err);
  process.exit(1);
});
