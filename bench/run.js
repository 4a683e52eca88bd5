'use strict'

// The benchmark's orchestrator. Every figure is measured in a fresh child
// process (bench/child.js, bench/memory.js) under one Node >= 24, for
// web-locks and for the references alike, so that one implementation's
// hang, crash or garbage cannot disturb another's figures; the ratios
// compare figures of this run under that same Node.
//
//   npm run bench                       full run (< 20 minutes)
//   npm run bench -- --quick            CI-sized (about a minute)
//   npm run bench -- --filter handoff   only the cases whose name matches
//   npm run bench -- --node /path/node  use this Node >= 24
//   npm run bench -- --json out.json    also write every outcome as JSON
//   npm run bench -- --windows          the scope cases under node.exe and wine too
//   npm run bench -- --baseline DIR     every web-locks figure against another checkout's, same run
//   npm run bench -- --baseline DIR --passes 5   the same, in 5 passes
//
// The PostgreSQL cases (postgres in their names) run against one server for
// the whole run: started here (lib/postgres.js), or that of
// WEB_LOCKS_BENCH_POSTGRES=<connection string>.

const os = require('os')
const path = require('path')
const fs = require('fs')
const { findNode } = require('./lib/node-binary')
const { runChild } = require('./lib/spawn')
const wineBench = require('./lib/wine')
const format = require('./lib/format')
const { evaluate } = require('./lib/targets')
const { IMPLS, FLOORS, baseImpl } = require('./lib/references')
const { median } = require('./lib/stats')
const pgBench = require('./lib/postgres')
const placement = require('./lib/placement')

const CASES = ['uncontended', 'burst', 'held', 'handoff', 'contention', 'readers', 'options', 'memory',
  'scope-uncontended', 'scope-handoff', 'scope-contention', 'scope-kill',
  'postgres-uncontended', 'postgres-handoff', 'postgres-contention', 'postgres-queue']
// The cases that --windows runs, each on both sides (lib/wine.js).
const WINDOWS_CASES = ['scope-uncontended', 'scope-handoff', 'scope-kill']

const USAGE = `usage: node bench/bench.js [--quick] [--filter <regex>] [--node <node >= 24>] [--no-current] [--json <file>] [--windows] [--baseline <dir> [--passes <n>]]
  --quick        CI-sized run (about a minute): fewer sizes, rounds and threads (--full: the default)
  --filter RE    only the measurement points whose name matches RE (e.g. 'uncontended|handoff')
  --node PATH    the Node >= 24 to measure under (default: the running Node if >= 24,
                 else node-<platform>-<arch>@26 installed from npm into a cache)
  --no-current   do not also measure web-locks under the running Node (the default with --quick;
                 --current to force it)
  --json FILE    write every outcome as JSON
  --windows      only the scope cases (uncontended, handoff, SIGKILL), each under Windows's node.exe run
                 by wine and under Linux's node of the same major (--node: another), with the floors of each,
                 both loading the package as it ships (packed first); wine's figures are not Windows's
  --baseline DIR every web-locks figure also measured with the package in DIR (another checkout, built),
                 in alternating processes, and each one's change printed: the median of the passes' ratios
  --passes N     with --baseline: at least N passes per point (default 2)
The PostgreSQL cases (--filter postgres) start a server for the run (test/fixtures/postgres.js),
or use WEB_LOCKS_BENCH_POSTGRES=<connection string>.`

function parseArgs (argv) {
  const opts = { quick: false, filter: null, node: null, current: undefined, json: null, windows: false, baseline: null, passes: null }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`)
      return argv[++i]
    }
    if (a === '--quick') opts.quick = true
    else if (a === '--full') opts.quick = false
    else if (a === '--filter') opts.filter = new RegExp(next(), 'i')
    else if (a.startsWith('--filter=')) opts.filter = new RegExp(a.slice(9), 'i')
    else if (a === '--node') opts.node = path.resolve(next())
    else if (a === '--no-current') opts.current = false
    else if (a === '--current') opts.current = true
    else if (a === '--json') opts.json = path.resolve(next())
    else if (a === '--windows') opts.windows = true
    else if (a === '--baseline') opts.baseline = path.resolve(next())
    else if (a === '--passes') opts.passes = passesOf(next())
    else if (a === '--help' || a === '-h') opts.help = true
    else throw new Error(`unknown option ${a}\n${USAGE}`)
  }
  // web-locks under the running Node too: in full runs, unless told
  // (--windows has its own second column: wine).
  if (opts.windows && opts.baseline) throw new Error('--baseline and --windows cannot be used together')
  if (opts.passes !== null && !opts.baseline) throw new Error('--passes is for --baseline')
  if (opts.passes === null) opts.passes = 2
  if (opts.windows || opts.baseline) opts.current = false
  else if (opts.current === undefined) opts.current = !opts.quick
  return opts
}

function passesOf (text) {
  const n = Number(text)
  if (!Number.isInteger(n) || n < 2 || n > 99) throw new Error(`--passes: ${JSON.stringify(text)} is not a number of passes from 2 to 99`)
  return n
}

const log = (...a) => process.stderr.write(`${a.join(' ')}\n`)

// A fresh directory for a point of a cross-process case (point.scratch):
// its scope's file, proper-lockfile's lock files, its signal files. In
// /dev/shm, where openLockManager puts scopes by default; removed here
// after the point, whatever became of the child and the processes it forked.
function scratchDir () {
  for (const base of ['/dev/shm', os.tmpdir()]) {
    try {
      return fs.mkdtempSync(path.join(base, 'web-locks-bench-'))
    } catch {
      // not there, or not writable: the next
    }
  }
  throw new Error('no writable directory for the cross-process cases')
}

// The addon every child loads (from the repository, or the package
// --windows packed): which build, so that a rebuild during the run (which
// would mix two builds in one table) is caught.
function addonBuild (pkg = path.join(__dirname, '..')) {
  try {
    const file = require('node-gyp-build').path(pkg)
    const hash = require('crypto').createHash('sha256').update(fs.readFileSync(file)).digest('hex').slice(0, 12)
    return { file: path.relative(path.join(__dirname, '..'), file), hash, mtime: fs.statSync(file).mtime.toISOString().slice(0, 19) }
  } catch (error) {
    return { file: '?', hash: `unknown (${error.message})`, mtime: '?' }
  }
}

function implLabel (impl) {
  if (impl === 'web-locks@current') return `web-locks @${process.version}`
  if (impl.endsWith('@baseline')) return `${baseImpl(impl)} (baseline)`
  return impl
}

// --baseline: web-locks' own implementations, each measured a second time
// with the package of the baseline directory ('x@baseline': x in a child
// whose WEB_LOCKS_BENCH_PKG is that directory, which the processes and
// threads it starts inherit).
const OURS = new Set(['web-locks', 'web-locks-scope', 'web-locks-postgres'])

function baselineOf (dir) {
  let name
  try {
    name = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).name
  } catch (error) {
    throw new Error(`--baseline ${dir}: no package.json there (${error.code || error.message})`)
  }
  if (name !== 'web-locks') throw new Error(`--baseline ${dir}: the package there is ${JSON.stringify(name)}, not web-locks`)
  const addon = addonBuild(dir)
  if (addon.file === '?') throw new Error(`--baseline ${dir}: no addon built there (npm run build in it first)`)
  return { dir, addon }
}

// Each of web-locks' implementations beside its baseline twin, in at
// least `passes` passes (2 or more), so that the alternating order weighs on
// both alike, and each pass gives a ratio of the two (printBaseline).
function withBaseline (point, passes) {
  if (!point.impls.some((impl) => OURS.has(impl))) return point
  return {
    ...point,
    impls: point.impls.flatMap((impl) => (OURS.has(impl) ? [impl, `${impl}@baseline`] : [impl])),
    passes: Math.max(point.passes || 1, passes)
  }
}

// Whether to skip a point because a smaller size of the same series was
// already too slow for this implementation: it was killed for it, or one
// round at this size would not fit in the child's time limit. A round's
// time is projected from the last size's, scaled by the work per round
// (point.work, requests per round) and by the growth of the per-request
// figures between the last two sizes.
function tooSlow (previous, point, timeoutMs) {
  if (!previous.length) return null
  const last = previous[previous.length - 1]
  const size = (n) => n.toLocaleString('en-US')
  if (last.outcome.fail === 'too slow') return `skipped: ${size(last.point.size)} was already too slow`
  const figures = (o) => (o.result || o.partial || {})
  // A run that failed before finishing a round: its whole time.
  const lastMs = figures(last.outcome).roundMs || (last.outcome.fail && last.outcome.wallMs)
  if (!lastMs) return null
  let growth = 0
  if (previous.length >= 2) {
    const before = previous[previous.length - 2]
    const a = figures(before.outcome)
    const b = figures(last.outcome)
    // The figures that make up a round's time (point.scale), or all.
    for (const key of point.scale || Object.keys(b)) {
      if (key === 'roundMs' || key === 'rounds' || /Gc$/.test(key) || !(a[key] > 0) || !(b[key] > 0)) continue
      growth = Math.max(growth, Math.log(b[key] / a[key]) / Math.log(last.point.size / before.point.size))
    }
  }
  // A run that failed within its first round did one repetition at most,
  // and will most likely fail there again at the next size.
  const failedEarly = !figures(last.outcome).roundMs
  const work = (p) => (failedEarly ? p.size : (p.work || p.size))
  const projected = lastMs * (work(point) / work(last.point)) * Math.pow(point.size / last.point.size, Math.min(growth, 2))
  // web-locks is only skipped when far beyond the limit: the projection is
  // rough, and its figures at every size are what the targets are about.
  if (projected > timeoutMs * (point.impl === 'web-locks' ? 3 : 0.8)) {
    return `skipped: ${size(last.point.size)} took ${(lastMs / 1000).toFixed(1)} s a round, ` +
      `${size(point.size)} would take ~${Math.round(projected / 1000)} s`
  }
  return null
}

// One outcome from the passes of a point: per-metric medians of the
// passes' figures (sums for violations and sample counts); a failure in
// any pass is the outcome, with what the other passes measured as partial.
function merge (list) {
  if (list.length === 1) return list[0]
  const ok = list.filter((o) => o.result)
  const combined = ok.length ? summarize(ok.map((o) => o.result)) : null
  const failed = list.find((o) => o.fail)
  const wallMs = list.reduce((a, o) => a + (o.wallMs || 0), 0)
  if (failed) {
    return { ...failed, detail: `${failed.detail || ''} (in pass ${list.indexOf(failed) + 1} of ${list.length})`, partial: combined || failed.partial, wallMs }
  }
  return { result: { ...combined, passes: ok.length }, wallMs }
}

function summarize (results) {
  const out = {}
  for (const key of Object.keys(results[0])) {
    const values = results.map((r) => r[key]).filter((v) => typeof v === 'number')
    out[key] = /^violations|^samples|^rounds$/.test(key) ? values.reduce((a, b) => a + b, 0) : median(values)
  }
  return out
}

async function main (argv) {
  const opts = parseArgs(argv)
  if (opts.help) {
    console.log(USAGE)
    return
  }
  const wine = opts.windows ? await wineBench.start(log) : null
  try {
    await measureAll(opts, wine)
  } finally {
    if (wine) wine.stop()
  }
}

async function measureAll (opts, wine) {
  const started = Date.now()
  const settings = opts.quick
    ? { rounds: 3, budgetMs: 900, timeoutMs: 20000, idleMs: 3000 }
    : { rounds: 5, budgetMs: 12000, timeoutMs: 90000, idleMs: 5000 }

  // --windows: Linux's children load the packed package too.
  if (wine) process.env.WEB_LOCKS_BENCH_PKG = wine.pkg
  const node = wine && !opts.node ? wine.linux : findNode({ explicit: opts.node, log })
  let benchNode = node.bin
  if (!benchNode) {
    log(`no Node >= 24 (${node.why}): measuring under ${process.version} without the built-in`)
    benchNode = process.execPath
  }
  const benchVersion = node.version || process.version
  if (benchNode === process.execPath) opts.current = false

  let plan = []
  for (const id of CASES) {
    if (opts.windows && !WINDOWS_CASES.includes(id)) continue
    const mod = require(`./cases/${id}`)
    for (const point of mod.points(opts)) {
      if (opts.filter && !opts.filter.test(`${point.key} ${point.label}`)) continue
      plan.push({ mod, id, point })
    }
  }
  if (!plan.length) throw new Error('no case matches --filter')

  log(`web-locks benchmark: ${opts.quick ? 'quick' : 'full'} run of ${plan.length} points under Node ${benchVersion}`)
  // The PostgreSQL cases' server, for the whole run.
  let postgres = null
  if (plan.some((p) => p.point.postgres)) {
    try {
      postgres = await pgBench.startServer(log)
    } catch (error) {
      postgres = { fail: String((error && error.message) || error).split('\n')[0].slice(0, 200) }
      log(`no PostgreSQL for the postgres cases: ${postgres.fail}`)
    }
  }
  const baseline = opts.baseline ? baselineOf(opts.baseline) : null
  if (baseline !== null) {
    log(`baseline: ${baseline.dir} (addon ${baseline.addon.file}, sha256 ${baseline.addon.hash})`)
    plan = plan.map((p) => ({ ...p, point: withBaseline(p.point, opts.passes) }))
  }
  // Each PostgreSQL point once per placement of client and server
  // (lib/placement.js).
  const placements = postgres && !postgres.fail ? placement.placements(postgres) : null
  if (placements !== null) {
    log(`PostgreSQL cases: ${placements.list.map((p) => p.what).join('; then ')}`)
    plan = plan.flatMap((p) => !p.point.postgres ? [p] : placements.list.map((pl) => ({ ...p, point: placed(p.point, pl) })))
  }
  try {
    await runPlan({ opts, settings, node, benchNode, benchVersion, plan, started, postgres, wine, placements, baseline })
  } finally {
    if (postgres && postgres.stop) await postgres.stop().catch((error) => log(`stopping PostgreSQL: ${error.message}`))
  }
}

// A PostgreSQL point in a placement: its key, label and series say which.
function placed (point, pl) {
  if (pl.id === null) return { ...point, placement: pl }
  return {
    ...point,
    key: `${point.key}@${pl.id}`,
    label: `${point.label} [${pl.short}]`,
    series: point.series && `${point.series}@${pl.id}`,
    placement: pl
  }
}

// A case's rows; a PostgreSQL case's once per placement, each row beside
// its twins.
function caseRows (mod, get, opts, placements) {
  if (mod.table !== 'postgres' || placements === null || placements.list[0].id === null) return mod.rows(get, opts)
  const each = placements.list.map((pl) => mod.rows((key, impl) => get(`${key}@${pl.id}`, impl), opts)
    .map((r) => ({ ...r, id: `${r.id}@${pl.id}`, label: `${r.label} [${pl.short}]` })))
  return each[0].flatMap((_, i) => each.map((rows) => rows[i]))
}

async function runPlan ({ opts, settings, node, benchNode, benchVersion, plan, started, postgres, wine, placements, baseline }) {
  const addonBefore = addonBuild(wine ? wine.pkg : undefined)
  const outcomes = new Map() // `${key}\0${impl}` -> outcome
  const passOutcomes = new Map() // `${key}\0${impl}` -> the outcome of each pass
  const loads = [] // the 1-minute load average before each point
  const seriesDone = new Map() // `${series}\0${impl}` -> [{ size, outcome }]
  for (const { id, point } of plan) {
    // Points with passes > 1 run every implementation that many times,
    // in alternating order (ours first, then last, ...), so that a
    // change in the machine's load during the point weighs on all alike.
    const passes = point.passes || 1
    const runs = new Map(point.impls.map((impl) => [impl, []]))
    for (let pass = 0; pass < passes; pass++) {
      const order = pass % 2 ? [...point.impls].reverse() : point.impls
      for (const impl of order) {
        const seriesKey = `${point.series}\0${impl}`
        const timeoutMs = point.timeoutMs || settings.timeoutMs
        const skip = point.series && tooSlow(seriesDone.get(seriesKey) || [], { ...point, impl }, timeoutMs)
        let outcome
        if (impl === 'built-in' && !node.bin) {
          outcome = { fail: 'n/a', detail: `needs Node >= 24 (${node.why})` }
        } else if (point.postgres && postgres.fail) {
          outcome = { fail: 'n/a', detail: `no PostgreSQL: ${postgres.fail}` }
        } else if (skip) {
          outcome = { fail: 'too slow', detail: skip }
        } else if (runs.get(impl).some((o) => o.fail)) {
          continue // failed in an earlier pass: once is enough
        } else {
          const bin = impl === 'web-locks@current' ? process.execPath : benchNode
          const script = path.join(__dirname, point.script || 'child.js')
          const twin = impl.endsWith('@baseline')
          const spec = {
            case: id,
            impl: wineBench.onWine(impl) || twin ? baseImpl(impl) : impl,
            params: point.params,
            rounds: point.rounds || settings.rounds,
            budgetMs: point.budgetMs || settings.budgetMs,
            quick: opts.quick
          }
          if (point.scratch) spec.dir = scratchDir()
          // A fresh schema and application_name per child (lib/postgres.js).
          if (point.postgres) spec.postgres = pgBench.pointPlace(postgres.url, postgres.pid !== undefined)
          loads.push(os.loadavg()[0])
          if (point.placement) placement.pinServer(point.placement, postgres)
          try {
            outcome = wineBench.onWine(impl)
              ? await wine.run(script, spec, timeoutMs)
              : await runChild(...placement.command(point.placement, bin, [...(point.nodeArgs || []), script, JSON.stringify(spec)]),
                { timeoutMs, idleMs: settings.idleMs, env: twin ? { ...process.env, WEB_LOCKS_BENCH_PKG: baseline.dir } : undefined })
          } finally {
            if (spec.dir) fs.rmSync(spec.dir, { recursive: true, force: true })
            if (spec.postgres) await pgBench.cleanPoint(spec.postgres).catch((error) => log(`  cleaning ${spec.postgres.schema}: ${error.message}`))
          }
        }
        runs.get(impl).push(outcome)
        const summary = outcome.fail ? `${outcome.fail}${outcome.detail ? ` (${outcome.detail})` : ''}` : 'ok'
        log(`  ${point.label.padEnd(44)} ${implLabel(impl).padEnd(18)} ${summary.slice(0, 100)}` +
          `${outcome.wallMs !== undefined ? `  [${(outcome.wallMs / 1000).toFixed(1)} s]` : ''}` +
          `${passes > 1 ? `  (pass ${pass + 1}/${passes})` : ''}`)
      }
    }
    for (const impl of point.impls) {
      const outcome = merge(runs.get(impl))
      outcomes.set(`${point.key}\0${impl}`, outcome)
      passOutcomes.set(`${point.key}\0${impl}`, runs.get(impl))
      if (point.series) {
        const seriesKey = `${point.series}\0${impl}`
        if (!seriesDone.has(seriesKey)) seriesDone.set(seriesKey, [])
        seriesDone.get(seriesKey).push({ point, outcome })
      }
    }
  }

  const get = (key, impl) => outcomes.get(`${key}\0${impl}`)
  const sections = []
  for (const id of CASES) {
    if (opts.windows && !WINDOWS_CASES.includes(id)) continue
    const mod = require(`./cases/${id}`)
    const rows = caseRows(mod, get, opts, placements).filter((r) => Object.keys(r.cells).length > 0)
    if (rows.length) sections.push({ title: opts.windows ? mod.windowsSection : mod.section, rows, table: mod.table })
  }
  const allRows = sections.flatMap((s) => s.rows)
  // The same rows from the baseline's figures; and both from each pass
  // alone (pass p of each implementation: their processes ran side by
  // side, in the same conditions).
  const twin = (impl) => (OURS.has(impl) ? `${impl}@baseline` : impl)
  const rowsOf = (getter) => CASES.flatMap((id) => caseRows(require(`./cases/${id}`), getter, opts, placements))
  const baselineRows = baseline === null ? null : rowsOf((key, impl) => get(key, twin(impl)))
  const passRows = []
  const mostPasses = Math.max(0, ...[...passOutcomes.values()].map((runs) => runs.length))
  for (let p = 0; baseline !== null && p < mostPasses; p++) {
    const pass = (key, impl) => {
      const runs = passOutcomes.get(`${key}\0${impl}`)
      return runs && runs[p]
    }
    passRows.push({ ours: rowsOf(pass), theirs: rowsOf((key, impl) => pass(key, twin(impl))) })
  }
  const addon = { before: addonBefore, after: addonBuild(wine ? wine.pkg : undefined) }
  print({ opts, node, benchVersion, sections, allRows, outcomes, plan, started, get, loads, addon, postgres, wine, placements })
  const comparison = baseline !== null ? printBaseline(allRows, baselineRows, passRows, baseline) : null
  if (opts.json) {
    fs.writeFileSync(opts.json, JSON.stringify({ opts: { ...opts, filter: String(opts.filter) }, node: benchVersion, rows: allRows, baselineRows, comparison, outcomes: [...outcomes] }, null, 1))
  }
}

// Which cases ran several processes per implementation.
function passesNote (plan) {
  const byCase = new Map()
  for (const { id, point } of plan) if ((point.passes || 1) > 1) byCase.set(id, point.passes)
  if (!byCase.size) return ''
  return `${[...byCase].map(([id, n]) => `${id} ${n}`).join(', ')} processes per implementation and point, ` +
    'in alternating order, median of their figures (processes differ more than rounds do).'
}

// --windows: the scope cases' table has a side each (lib/wine.js), each
// side's web-locks against that side's floors.
function wineTable (wine, col) {
  const figure = (r, column) => r.cells[column] && r.cells[column].value
  // A time over another (ours over the floor, wine's over Linux's): how
  // many times as long (a lock under wine is thousands of floors: ×floor's
  // inverse would read 0.00x).
  const over = (title, column, base) => ({
    title,
    get: (r) => (r.better === 'lower' && figure(r, column) > 0 && figure(r, base) > 0 ? format.ratioText(figure(r, column) / figure(r, base)) : '')
  })
  return {
    intro: `Linux and wine side by side: web-locks through openLockManager(scope) (its file in /dev/shm; Z:\\dev\\shm under wine), ` +
      `each process its own agent, under Linux's node and under node.exe ${wine.version} (${wine.wine}), each loading the packed ` +
      'package (its linux-x64 and win32-x64 prebuilds); the floors measured by the same node in the same run: await ' +
      'Promise.resolve() for uncontended, a one-way ping-pong between 2 processes for handoff (Unix socket on Linux, a named ' +
      'pipe under wine; or TCP on 127.0.0.1). Under wine, SIGKILL is TerminateProcess. ÷floor: our time over the floor\'s; ' +
      'wine÷Linux: wine\'s figure over Linux\'s. Wine is not Windows: its wineserver carries the file locks, events, pipes ' +
      'and process handles; these are wine\'s figures, not Windows\'s.',
    columns: [
      { title: 'case', left: true, get: (r) => r.label },
      col('Linux web-locks', 'web-locks'),
      col('Linux floor', 'floor'),
      over('÷floor', 'web-locks', 'floor'),
      col('wine web-locks', 'web-locks@wine'),
      col('wine floor', 'floor@wine'),
      over('÷floor', 'web-locks@wine', 'floor@wine'),
      over('wine÷Linux', 'web-locks@wine', 'web-locks')
    ]
  }
}

function print ({ opts, node, benchVersion, sections, allRows, outcomes, plan, started, get, loads, addon, postgres, wine, placements }) {
  const ours = (r) => r.cells['web-locks']
  const col = (title, column) => ({ title, get: (r) => format.cell(r.unit, r.cells[column]) })
  const vs = (title, column) => ({ title, get: (r) => format.ratioText(format.advantage(r, ours(r), r.cells[column])) })
  const columns = [
    { title: 'case', left: true, get: (r) => r.label },
    col('web-locks', 'web-locks'),
    col('built-in', 'built-in'),
    vs('×built-in', 'built-in'),
    col('async-mutex', 'async-mutex'),
    vs('×mutex', 'async-mutex'),
    col('async-lock', 'async-lock'),
    vs('×lock', 'async-lock'),
    col('floor', 'floor'),
    vs('×floor', 'floor')
  ]
  if (opts.current) columns.push(col(`web-locks@${process.version}`, 'web-locks@current'))
  // The cross-process cases' own table (lib/scope.js): ours is web-locks
  // through a scope, against the process-wide manager and proper-lockfile.
  const tables = {
    scope: {
      intro: 'Across processes: web-locks through openLockManager(scope), each process its own agent; process-wide = ' +
        "require('web-locks').locks measured in the same run (between threads where the case has processes); " +
        'proper-lockfile = what users pick today for cross-process locks; ×X as above.',
      columns: [
        { title: 'case', left: true, get: (r) => r.label },
        col('web-locks scope', 'web-locks'),
        col('process-wide', 'process-wide'),
        vs('×process-wide', 'process-wide'),
        col('proper-lockfile', 'proper-lockfile'),
        vs('×lockfile', 'proper-lockfile'),
        col('floor', 'floor'),
        vs('×floor', 'floor')
      ]
    },
    // The PostgreSQL cases' (lib/postgres.js): ours, and the raw mechanism
    // of the same server each case compares with.
    postgres: {
      intro: 'PostgreSQL: web-locks through openLockManager(scope, { postgres }), each process its own agent (a session and a watcher ' +
        'connection); reference = the raw PostgreSQL mechanism of the same server, measured in the same run (named on each row); ' +
        `×X as above. Server: ${postgres && postgres.note ? postgres.note : 'none'}.` +
        (placements ? ` Each case in ${placements.list.length === 1 ? 'one placement' : 'two placements'}: ` +
          `${placements.list.map((p) => (p.short ? `[${p.short}] ${p.what}` : p.what)).join('; ')} (taskset).` : ''),
      columns: [
        { title: 'case', left: true, get: (r) => r.label },
        col('web-locks postgres', 'web-locks'),
        col('reference', 'reference'),
        vs('×reference', 'reference')
      ]
    }
  }
  if (wine) tables.scope = wineTable(wine, col)

  const cpus = os.cpus()
  console.log(`web-locks benchmark, ${opts.quick ? 'quick' : 'full'} run, ${new Date().toISOString().slice(0, 16)}Z`)
  console.log(`Machine: ${cpus.length} x ${cpus[0] ? cpus[0].model.trim() : '?'}, ${os.platform()} ${os.release()}, ${Math.round(os.totalmem() / 2 ** 30)} GB`)
  if (wine) {
    console.log(`Linux's figures are measured under Node ${benchVersion} (${node.how}), wine's under node.exe ${wine.version} (${wine.wine}),` +
      ' each implementation in its own fresh process per point;')
  } else {
    console.log(`Every figure, ours and the references', is measured under Node ${benchVersion} (${node.bin ? node.how : 'no Node >= 24 found'}),` +
      ' each implementation in its own fresh process per point;')
  }
  console.log(`figures are medians over up to ${opts.quick ? 3 : 5} rounds per process (fewer when rounds are slow)` +
    (passesNote(plan) ? `; ${passesNote(plan)}` : '.') +
    (opts.current ? ` The last column is web-locks under the running Node ${process.version}.` : ''))
  // A packed file's mtime is npm's fixed date, not its build's.
  console.log(`web-locks addon: ${addon.before.file}, sha256 ${addon.before.hash}${wine ? '' : `, built ${addon.before.mtime}Z`}` +
    (addon.after.hash !== addon.before.hash ? ` -- WARNING: rebuilt during the run (now ${addon.after.hash}, ${addon.after.mtime}Z): the figures mix two builds.` : '.'))
  if (wine) console.log(`Under wine: ${path.relative(path.join(__dirname, '..'), wine.addon.file)}, sha256 ${wine.addon.hash} (both from the package packed for this run).`)
  if (loads.length) {
    const sorted = [...loads].sort((a, b) => a - b)
    const med = sorted[sorted.length >> 1]
    const max = sorted[sorted.length - 1]
    const busy = med > cpus.length * 0.75 + 1
    console.log(`System load during the run (1-minute load average before each point; the benchmark itself adds about 1): ` +
      `median ${med.toFixed(1)}, max ${max.toFixed(1)}, on ${cpus.length} CPUs.${busy ? ' WARNING: other processes were using the CPUs; figures are noisier than on an idle machine.' : ''}`)
  }
  console.log('×X columns: how many times better web-locks is than X on that row (X\'s time ÷ ours, or our rate ÷ X\'s); above 1.00x web-locks is better.')
  console.log('Blank: not applicable. * measured before that run failed. Failures are detailed after the targets.')
  console.log('')
  const bodyOf = (list) => list.flatMap((s) => [{ section: s.title }, ...s.rows])
  const inProcess = sections.filter((s) => !s.table)
  if (inProcess.length) {
    console.log(format.table(columns, bodyOf(inProcess)))
    console.log('')
  }
  for (const [name, table] of Object.entries(tables)) {
    const own = sections.filter((s) => s.table === name)
    if (!own.length) continue
    console.log(table.intro)
    console.log(format.table(table.columns, bodyOf(own)))
    console.log('')
  }

  // --windows leaves out the targets its cases do not measure.
  const verdicts = evaluate(allRows, get, opts, placements).filter((v) => !wine || v.status !== 'not run')
  console.log('Targets (ratios from this run; PASS/MISS):')
  for (const v of verdicts) {
    console.log(`  ${v.status.padEnd(7)} ${v.title}: ${v.summary}`)
  }
  const missed = verdicts.filter((v) => v.status === 'MISS')
  console.log('')
  if (missed.length === 0) {
    console.log(verdicts.some((v) => v.status === 'PASS') ? 'Closing note: every target measured in this run is met.' : 'Closing note: no target was measured in this run.')
  } else {
    console.log(`Closing note: ${missed.length} target${missed.length > 1 ? 's' : ''} missed.`)
    for (const v of missed) console.log(`  - ${v.title}: ${v.why}`)
  }

  const failures = []
  for (const [k, o] of outcomes) {
    if (!o.fail || o.fail === 'n/a') continue
    const [key, impl] = k.split('\0')
    const point = plan.find((p) => p.point.key === key)
    failures.push(`  ${impl} / ${point ? point.point.label : key}: ${o.fail}${o.detail ? ` (${o.detail})` : ''}`)
  }
  if (failures.length) {
    console.log('')
    console.log('Failures (the implementation threw, crashed, hung or was too slow; its process was killed or skipped):')
    for (const f of failures) console.log(f)
  }
  console.log('')
  console.log(`Legend: ${Object.entries(IMPLS).map(([id, i]) => `${id} = ${i.label}`).join('; ')}; floor = ` +
    `${Object.values(FLOORS).join(', ')}.`)
  console.log(`Total time: ${((Date.now() - started) / 1000).toFixed(0)} s.`)
}

module.exports = { main, parseArgs }

// --baseline: each web-locks figure of this run beside the baseline's
// (rows with a better direction), and how much worse it is: the median of
// the passes' ratios, each of a pass's figure over the baseline's in the
// same pass (processes run side by side), which a figure that moves from
// run to run sways less than a ratio of the passes' medians; with how many
// passes saw it worse by more than 3%, and the range. Those whose median is
// worse by more than 3% are listed. Returns the lines (for --json).
function printBaseline (allRows, baselineRows, passRows, baseline) {
  const byId = (rows) => new Map(rows.map((r) => [r.id, r]))
  const theirs = byId(baselineRows)
  const passes = passRows.map(({ ours, theirs }) => ({ ours: byId(ours), theirs: byId(theirs) }))
  // A pass that failed may leave a partial figure (rows.js): fewer rounds,
  // in other conditions, which is not compared.
  const ours = (r) => {
    const cell = r && r.cells['web-locks']
    return cell && !cell.fail && !cell.partial ? cell.value : undefined
  }
  const worse = (row, a, b) => (row.better === 'lower' ? a / b : b / a)
  const median = (xs) => {
    const sorted = xs.slice().sort((x, y) => x - y)
    const mid = sorted.length >> 1
    return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
  }
  const lines = []
  for (const row of allRows) {
    const a = ours(row)
    const b = ours(theirs.get(row.id))
    if ((row.better !== 'lower' && row.better !== 'higher') || !(a > 0) || !(b > 0)) continue
    const ratios = []
    for (const pass of passes) {
      const pa = ours(pass.ours.get(row.id))
      const pb = ours(pass.theirs.get(row.id))
      if (pa > 0 && pb > 0) ratios.push(worse(row, pa, pb))
    }
    lines.push({ row, a, b, ratios, worse: ratios.length ? median(ratios) : worse(row, a, b) })
  }
  const change = (w) => `${w >= 1 ? '+' : ''}${((w - 1) * 100).toFixed(1)}%`
  console.log('')
  console.log(`Against the baseline, ${baseline.dir} (addon ${baseline.addon.file}, sha256 ${baseline.addon.hash}), ` +
    `measured in the same run in alternating processes, ${passRows.length} passes: each web-locks figure of this checkout ` +
    '(the median of the passes), the baseline\'s, and how much worse this checkout is (+: slower, fewer per second, or ' +
    'more memory; -: better): the median of the passes\' ratios (each pass\'s figure over the baseline\'s in the same pass, ' +
    'which can differ from the ratio of the two medians), how many passes saw it worse by more than 3%, and their range.')
  console.log(format.table([
    { title: 'case', left: true, get: (l) => l.row.label },
    { title: 'this checkout', get: (l) => format.value(l.row.unit, l.a) },
    { title: 'baseline', get: (l) => format.value(l.row.unit, l.b) },
    { title: 'worse by', get: (l) => change(l.worse) },
    { title: 'passes >3%', get: (l) => l.ratios.length ? `${l.ratios.filter((r) => r > 1.03).length}/${l.ratios.length}` : '' },
    { title: 'range', get: (l) => l.ratios.length > 1 ? `${change(Math.min(...l.ratios))} .. ${change(Math.max(...l.ratios))}` : '' }
  ], lines))
  const over = lines.filter((l) => l.worse > 1.03)
  console.log(over.length
    ? `${over.length} of ${lines.length} figures worse than the baseline's by more than 3% (median of the passes): ` +
      over.map((l) => `${l.row.label} (${change(l.worse)})`).join('; ')
    : `No figure of ${lines.length} worse than the baseline's by more than 3% (median of the passes).`)
  return lines.map((l) => ({ id: l.row.id, ours: l.a, baseline: l.b, worse: l.worse, passes: l.ratios }))
}
