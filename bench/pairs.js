'use strict'

// What a change costs, to a few percent: a handful of web-locks' own
// figures, each measured in many pairs of fresh processes, one of this
// checkout and one of another (--baseline DIR, built), in alternating
// order, and judged on the median of the pairs' ratios. bench.js --baseline
// compares every figure, but each of its figures is one process's, and one
// process's figure moves by 5% to 40% from the next's on a shared machine;
// here each process times many repetitions and keeps their median, and a
// pair's two processes run back to back, so that a 3% change shows.
// --control also pairs the baseline with itself, in the same alternation:
// what the harness reads when nothing changed, which a figure's change must
// exceed to mean anything.
//
//   node bench/pairs.js --baseline ../base [--pairs 20] [--control] [--filter RE]
//
// Run it under the Node whose figures matter (bench.js measures under Node
// 26), on a quiet machine.

const { spawnSync } = require('child_process')
const path = require('path')
const fs = require('fs')
const { hold } = require('./lib/measure')

// Each case runs in a child: `run(pkg)` resolves with its figure (ns), the
// median of its repetitions after a warm-up.
const CASES = {
  'uncontended sync': {
    label: 'request+release, sync callback, 1 name (process-wide)',
    run: (pkg) => uncontended(require(pkg).locks, () => {})
  },
  'uncontended async': {
    label: 'request+release, async callback, 1 name (process-wide)',
    run: (pkg) => uncontended(require(pkg).locks, async () => {})
  },
  'queued 1k': {
    label: '1k queued on 1 name: request() each (process-wide)',
    run: (pkg) => queued(require(pkg).locks, 1000)
  },
  'query 1k': {
    label: '1k names held: query() per entry (process-wide)',
    run: (pkg) => query(require(pkg).locks, 1000)
  },
  'scope uncontended': {
    label: 'request+release, sync callback, 1 name (a scope)',
    // A scope of its own, in the directory measure() made for the child.
    run: async (pkg, dir) => {
      const locks = await require(pkg).openLockManager('pairs', { dir })
      try {
        return await uncontended(locks, () => {})
      } finally {
        await locks.close()
      }
    }
  }
}

const median = (xs) => {
  const s = xs.slice().sort((a, b) => a - b)
  const mid = s.length >> 1
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2
}
const now = () => process.hrtime.bigint()

// Repetitions of `once` (which returns ns per operation): the median of the
// last `keep` after `warm` more.
async function reps (once, warm, keep) {
  const out = []
  for (let i = 0; i < warm + keep; i++) {
    const ns = await once()
    if (i >= warm) out.push(ns)
  }
  return median(out)
}

function uncontended (locks, callback) {
  const n = 5000
  return reps(async () => {
    const t0 = now()
    for (let i = 0; i < n; i++) await locks.request('pairs', callback)
    return Number(now() - t0) / n
  }, 10, 50)
}

function queued (locks, n) {
  const callback = () => {}
  return reps(async () => {
    const holder = await hold(locks, 'pairs')
    let last
    const t0 = now()
    for (let i = 0; i < n; i++) last = locks.request('pairs', callback)
    const ns = Number(now() - t0) / n
    holder.release()
    await holder.done
    await last
    return ns
  }, 100, 300)
}

async function query (locks, n) {
  const holders = []
  for (let i = 0; i < n; i++) holders.push(await hold(locks, `pairs-${i}`))
  const ns = await reps(async () => {
    const t0 = now()
    await locks.query()
    return Number(now() - t0) / n
  }, 40, 160)
  for (const h of holders) h.release()
  await Promise.all(holders.map((h) => h.done))
  return ns
}

// One child: its case's figure for the package in pkg, on stdout. Its
// scratch directory is made and removed here, so that a child killed at
// the time limit leaves nothing behind.
function measure (id, pkg) {
  const base = fs.existsSync('/dev/shm') ? '/dev/shm' : require('os').tmpdir()
  const dir = fs.mkdtempSync(path.join(base, 'web-locks-pairs-'))
  let r
  try {
    r = spawnSync(process.execPath, [__filename, '--child', id, pkg, dir], { encoding: 'utf8', timeout: 120000 })
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
  const ns = Number(r.stdout.trim())
  if (r.status !== 0 || !(ns > 0)) {
    const how = r.signal !== null ? `killed by ${r.signal}${r.error ? ` (${r.error.code})` : ''}` : `status ${r.status}`
    throw new Error(`${id} with ${pkg} failed (${how}): ${r.stderr || r.stdout}`)
  }
  return ns
}

function parseArgs (argv) {
  const opts = { baseline: null, pairs: 20, control: false, filter: null }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`)
      return argv[++i]
    }
    if (a === '--baseline') opts.baseline = path.resolve(next())
    else if (a === '--pairs') opts.pairs = Number(next())
    else if (a === '--control') opts.control = true
    else if (a === '--filter') opts.filter = new RegExp(next(), 'i')
    else throw new Error(`unknown option ${a}`)
  }
  if (opts.baseline === null) throw new Error('usage: node bench/pairs.js --baseline DIR [--pairs N] [--control] [--filter RE]')
  if (!Number.isInteger(opts.pairs) || opts.pairs < 3) throw new Error('--pairs: a whole number of pairs, 3 or more')
  if (!fs.existsSync(path.join(opts.baseline, 'package.json'))) throw new Error(`--baseline ${opts.baseline}: no package there`)
  return opts
}

function percent (ratio) {
  return `${ratio >= 1 ? '+' : ''}${((ratio - 1) * 100).toFixed(1)}%`
}

function main () {
  const opts = parseArgs(process.argv.slice(2))
  const ours = path.join(__dirname, '..')
  console.log(`${opts.pairs} pairs of processes per case under Node ${process.version}: this checkout against ${opts.baseline}` +
    (opts.control ? ', and the baseline against itself (control)' : ''))
  const lines = []
  for (const [id, c] of Object.entries(CASES)) {
    if (opts.filter && !opts.filter.test(id)) continue
    const mine = []
    const theirs = []
    const ratios = []
    const control = []
    for (let i = 0; i < opts.pairs; i++) {
      // Alternating order, so that going first or second weighs on both.
      const [a, b] = i % 2 ? [measure(id, opts.baseline), measure(id, ours)].reverse() : [measure(id, ours), measure(id, opts.baseline)]
      mine.push(a)
      theirs.push(b)
      ratios.push(a / b)
      // The same pairing with the baseline on both sides: what the median
      // of the ratios reads when nothing changed (the first of a pair is
      // taken as "this checkout" in even pairs, the second in odd ones).
      if (opts.control) {
        const [x, y] = [measure(id, opts.baseline), measure(id, opts.baseline)]
        control.push(i % 2 ? y / x : x / y)
      }
    }
    const line = { id, label: c.label, ours: median(mine), baseline: median(theirs), ratio: median(ratios), worse: ratios.filter((r) => r > 1.03).length, control: opts.control ? median(control) : null }
    lines.push(line)
    console.log(`${line.label.padEnd(56)} ${line.ours.toFixed(1).padStart(9)} ns ${line.baseline.toFixed(1).padStart(9)} ns  ${percent(line.ratio).padStart(7)}` +
      `  (${line.worse}/${opts.pairs} pairs worse by more than 3%)` + (line.control !== null ? `  control ${percent(line.control)}` : ''))
  }
  const over = lines.filter((l) => l.ratio > 1.03)
  console.log(over.length ? `Worse by more than 3% (median of the pairs' ratios): ${over.map((l) => `${l.label} ${percent(l.ratio)}`).join('; ')}`
    : 'No figure worse by more than 3% (median of the pairs\' ratios).')
}

if (process.argv[2] === '--child') {
  const [, , , id, pkg, dir] = process.argv
  CASES[id].run(pkg, dir).then((ns) => {
    process.stdout.write(`${ns}\n`)
  }, (error) => {
    console.error(error)
    process.exitCode = 1
  })
} else {
  try {
    main()
  } catch (error) {
    console.error(error.message)
    process.exitCode = 2
  }
}
