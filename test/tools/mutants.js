#!/usr/bin/env node
'use strict';
// Shows that the stress test can fail: builds copies of the addon, each
// with one deliberate bug in the lock manager or the binding, and runs a
// short stress run against each. Every mutant must be caught (the run must
// fail); the unmutated copy must pass.
//
//   node test/tools/mutants.js [--seconds N] [--seed S] [--only NAME]
const { execFileSync, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.resolve(__dirname, '..', '..');

// [name, file, exact text, replacement, what it breaks]
const MUTANTS = [
  ['shared-ignores-exclusive', 'src/core/algorithms-inl.h',
    'return mode == WL_EXCLUSIVE ? n->nheld == 0 : n->nexclusive == 0;',
    'return mode == WL_EXCLUSIVE ? n->nheld == 0 : 1;',
    'a shared request is granted next to an exclusive holder'],
  ['exclusive-ignores-shared', 'src/core/algorithms-inl.h',
    'return mode == WL_EXCLUSIVE ? n->nheld == 0 : n->nexclusive == 0;',
    'return mode == WL_EXCLUSIVE ? n->nexclusive == 0 : n->nexclusive == 0;',
    'an exclusive request is granted next to shared holders'],
  ['steal-appends', 'src/core/algorithms-inl.h',
    'wl__list_prepend(m, AT(n, wl__name_t, queue), AT(r, wl__req_t, qlink));',
    'wl__list_append(m, AT(n, wl__name_t, queue), AT(r, wl__req_t, qlink));',
    'a steal goes to the back of the queue'],
  ['abort-forgets-queue', 'src/core/algorithms-inl.h',
    '  if (r != 0 && REQ(m, r)->state == WL__QUEUED) {\n    wl__end(m, r);',
    '  if (r != 0 && REQ(m, r)->state == WL__QUEUED) {\n    REQ(m, r)->state = WL__IDLE;\n' +
    '    wl__list_remove(m, AT(r, wl__req_t, qlink));\n    wl__maybe_drop(m, REQ(m, r)->name);',
    'aborting the head of a queue does not grant the next request'],
  ['close-forgets-queues', 'src/core/algorithms-inl.h',
    'held)->next, alink);\n    wl__end(m, r);',
    'held)->next, alink);\n    wl__unhold(m, REQ(m, r)->name, r, WL__IDLE);',
    "a thread's end does not grant the requests waiting behind its locks"],
  ['release-says-held', 'src/core/algorithms-inl.h',
    'return wl__done(m, held);',
    'return wl__done(m, 1);',
    'release() of a stolen lock reports it was still held'],
  ['drain-strands-events', 'src/binding/thread.c',
    '    if (--*budget == 0) {\n      wlb__wake_self(t);\n      return 0;\n    }',
    '    if (--*budget == 1023) {\n      return 0;\n    }',
    'a thread takes one event per wake-up and strands the rest'],
  ['teardown-keeps-locks', 'src/binding/module.c',
    'if (t->dispatch != NULL)\n    wl_agent_close(&t->agent);',
    'if (t->dispatch != NULL)\n    (void)0;',
    "an ended thread's locks and requests stay in the manager"],
];

function args() {
  const out = { seconds: 4, seed: 7, only: null };
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i += 2) {
    if (a[i] === '--seconds') out.seconds = Number(a[i + 1]);
    else if (a[i] === '--seed') out.seed = Number(a[i + 1]);
    else if (a[i] === '--only') out.only = a[i + 1];
    else throw new Error(`unknown argument ${a[i]}`);
  }
  return out;
}

function build(dir, mutate) {
  execFileSync(path.join(__dirname, 'build-copy.sh'), ['--dir', dir], { stdio: ['ignore', 'ignore', 'inherit'] });
  if (!mutate) return;
  const [, file, from, to] = mutate;
  const p = path.join(dir, file);
  const text = fs.readFileSync(p, 'utf8');
  if (text.split(from).length !== 2) throw new Error(`mutant ${mutate[0]}: the text to replace is not found exactly once in ${file} (the source changed?)`);
  fs.writeFileSync(p, text.replace(from, to));
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
}

function stress(dir, { seconds, seed }, extra = []) {
  const r = spawnSync(process.execPath, [path.join(root, 'test/stress/run.js'), '--quiet', '--seconds', String(seconds), '--seed', String(seed), ...extra], {
    env: Object.assign({}, process.env, { WEB_LOCKS_PKG: dir }),
    encoding: 'utf8',
    timeout: (seconds + 120) * 1000,
  });
  const text = `${r.stdout}${r.stderr}`.replace(/^stress test failed.*\n/m, '');
  return { ok: r.status === 0, first: text.split('\n').filter((l) => l && !l.startsWith('stress: seed'))[0] || `(exit ${r.status}, signal ${r.signal})` };
}

function main() {
  const opts = args();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-mutant-'));
  let bad = 0;
  try {
    build(dir, null);
    const base = stress(dir, opts);
    console.log(`${base.ok ? 'ok  ' : 'FAIL'} unmutated copy passes${base.ok ? '' : `: ${base.first}`}`);
    if (!base.ok) bad++;
    for (const m of MUTANTS) {
      if (opts.only && m[0] !== opts.only) continue;
      build(dir, m);
      const r = stress(dir, opts);
      console.log(`${r.ok ? 'FAIL' : 'ok  '} ${m[0]} (${m[4]}): ${r.ok ? 'NOT caught' : `caught: ${r.first.slice(0, 160)}`}`);
      if (r.ok) bad++;
      if (m[0].includes('ignores')) {
        // The in-callback shared-memory counters alone, without the model.
        const c = stress(dir, opts, ['--no-model']);
        const byCounter = !c.ok && c.first.includes('mutual exclusion violated');
        console.log(`${byCounter ? 'ok  ' : 'FAIL'} ${m[0]}, model off: ${byCounter ? 'caught by the exclusion counters' : `not caught by the exclusion counters: ${c.first.slice(0, 160)}`}`);
        if (!byCounter) bad++;
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  process.exit(bad ? 1 : 0);
}

main();
