#!/usr/bin/env node
'use strict';
// The stress test from the command line:
//   node test/stress/run.js [--seconds N] [--seed S] [--threads K] [--quiet] [--verbose] [--no-model]
//   node test/stress/run.js --processes K [--seconds N] [--min-steps M] [--seed S] [--quiet]
//   node test/stress/run.js --postgres --processes K [--seconds N] [--seed S] [--restarts R | --restart-at S1,S2] [--cut] [--quiet]
// (`npm run stress -- --seconds 60`). --no-model skips the replay through the
// reference model, leaving the threads' own checks (to show they catch bugs).
// --processes runs the cross-process stress test (processes.js) with K
// processes on one machine-wide scope instead; with --postgres, on one
// PostgreSQL scope, on a server of its own (test/fixtures/postgres.js) or
// WEB_LOCKS_TEST_POSTGRES's, with sessions ended by the server, R server
// restarts (default 1 on a server of its own, which alone can restart; or at
// the given steps, to rerun a failure) and with --cut, network cuts by a
// TCP proxy. Prints the seed first; on a
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
    else if (a === '--min-steps') opts.minSteps = value();
    else if (a === '--postgres') opts.postgres = true;
    else if (a === '--cut') opts.cut = true;
    else if (a === '--restarts') opts.restarts = value();
    else if (a === '--restart-at') {
      const v = argv[++i];
      if (v === undefined || !/^(none|\d+(,\d+)*)$/.test(v)) throw new Error(`${a} needs step numbers, as 120,340, or none`);
      opts.restartAt = v === 'none' ? [] : v.split(',').map(Number);
    } else if (a === '--quiet') opts.quiet = true;
    else if (a === '--verbose') opts.verbose = true;
    else if (a === '--no-model') opts.model = false; // only the in-thread checks

    else throw new Error(`unknown argument ${a} (use --seconds N, --seed S, --threads K or --processes K [--min-steps M] [--postgres [--restarts R] [--cut]], --quiet)`);
  }
  if ((opts.cut || opts.restarts !== undefined || opts.restartAt) && !opts.postgres) throw new Error('--cut, --restarts and --restart-at go with --postgres');
  if (opts.minSteps !== undefined && !opts.processes) throw new Error('--min-steps goes with --processes');
  if (opts.postgres && !opts.processes) opts.processes = 4;
  return opts;
}

async function main() {
  const opts = parse(process.argv.slice(2));
  if (opts.seed === undefined) opts.seed = (Math.random() * 2 ** 31) >>> 0;
  const who = opts.processes ? `${opts.processes} processes${opts.postgres ? ' on PostgreSQL' : ''}` : `${opts.threads || 4} workers + main`;
  console.log(`stress: seed ${opts.seed}, ${who}, ${opts.seconds === undefined ? 5 : opts.seconds} s`);
  if (!opts.quiet) opts.log = (line) => console.log(`  ${line}`);
  const stats = opts.processes ? await runProcessStress(opts) : await runStress(opts);
  console.log(`stress: ok ${JSON.stringify(stats)}`);
}

main().catch((err) => {
  console.error(err && err.message ? err.message : err);
  process.exit(1);
});
