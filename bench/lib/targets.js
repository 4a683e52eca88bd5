'use strict'

// The issue's targets, judged on the rows of this run: PASS, MISS, or
// 'not run' (no figure: the case was filtered out or failed). For a MISS,
// by how much, and why as far as this run's own figures tell.

const format = require('./format')
const { COLUMNS } = require('./scope')

function byId (rows) {
  const map = new Map()
  for (const r of rows) map.set(r.id, r)
  return map
}

const value = (row, column) => row && row.cells[column] && row.cells[column].value

// Ratio targets: for each row, how many times better web-locks is than
// `column` (see format.advantage); all must reach `min`.
function ratioTarget (rows, ids, column, min) {
  const found = []
  const refFailed = []
  for (const id of ids) {
    const row = rows.get(id)
    if (!row || value(row, 'web-locks') === undefined) continue
    const ref = row.cells[column]
    if (!ref) continue
    if (ref.fail) {
      refFailed.push(`${row.label} (${ref.fail})`)
      continue
    }
    found.push({ row, x: format.advantage(row, row.cells['web-locks'], ref) })
  }
  return { found, refFailed, worst: found.length ? found.reduce((a, b) => (b.x < a.x ? b : a)) : null, min }
}

function ratioVerdict (r, describe) {
  if (!r.found.length) {
    if (r.refFailed.length) return { status: 'PASS', summary: `the reference failed on every row: ${r.refFailed.join('; ')}` }
    return { status: 'not run', summary: 'no figures in this run' }
  }
  const all = r.found.map((f) => `${format.ratioText(f.x)} ${describe(f.row)}`).join(', ')
  const failedNote = r.refFailed.length ? `; the reference failed on ${r.refFailed.length} row(s)` : ''
  const pass = r.found.every((f) => f.x >= r.min)
  const summary = `worst ${format.ratioText(r.worst.x)} (needs >= ${r.min.toFixed(2)}x): ${all}${failedNote}`
  return { status: pass ? 'PASS' : 'MISS', summary, short: r.min / r.worst.x, worst: r.worst }
}

// Limit targets: web-locks' figure on each row must be at most `max`
// (or below, for strict).
function limitVerdict (rows, ids, max, unit, strict) {
  const found = ids.map((id) => rows.get(id)).filter((row) => row && value(row, 'web-locks') !== undefined)
  if (!found.length) return { status: 'not run', summary: 'no figures in this run' }
  const worst = found.reduce((a, b) => (value(b, 'web-locks') > value(a, 'web-locks') ? b : a))
  const ok = (v) => (strict ? v < max : v <= max)
  const pass = found.every((row) => ok(value(row, 'web-locks')))
  const all = found.map((row) => `${format.value(unit, value(row, 'web-locks'))} ${row.label}`).join(', ')
  return { status: pass ? 'PASS' : 'MISS', summary: `worst ${format.value(unit, value(worst, 'web-locks'))} (limit ${strict ? '<' : '<='} ${format.value(unit, max)}): ${all}`, worst }
}

// Cost targets: on each row, web-locks' figure over `column`'s (a time:
// lower is better) must be at most `max`. `needs` says what must be in the
// run for the reference figure, when it is another case's.
function costVerdict (rows, ids, column, max, { describe, needs }) {
  const found = ids.map((id) => rows.get(id))
    .filter((row) => row && value(row, 'web-locks') !== undefined && value(row, column) > 0)
  if (!found.length) {
    const ours = ids.some((id) => value(rows.get(id), 'web-locks') !== undefined)
    return { status: 'not run', summary: ours && needs ? `no ${column} figure: needs ${needs} in the same run` : 'no figures in this run' }
  }
  const x = (row) => value(row, 'web-locks') / value(row, column)
  const worst = found.reduce((a, b) => (x(b) > x(a) ? b : a))
  const all = found.map((row) => `${x(row).toFixed(2)}x ${describe(row)} (${format.time(value(row, 'web-locks'))} against ${format.time(value(row, column))})`).join(', ')
  return { status: found.every((row) => x(row) <= max) ? 'PASS' : 'MISS', summary: `worst ${x(worst).toFixed(2)}x (limit <= ${max.toFixed(2)}x): ${all}`, worst, x: x(worst) }
}

const WEB_LOCKS_COST = 'A web-locks request crosses into native code to request and again to release, and, as the spec has the callback ' +
  'run in a task, its grant is delivered on a later turn of the event loop (a native callback into JS), before the ' +
  'promise jobs that run the callback and settle the request.'
const UNCONTENDED_WHY = `runExclusive is microtasks only: it runs the callback as soon as its promise settles. ${WEB_LOCKS_COST}`

// "Every round completes", from each point's web-locks cell: [{ label,
// cell, rounds, extra (after the rounds count) }].
function roundsVerdict (points) {
  if (!points.length) return { status: 'not run', summary: 'no figures in this run' }
  return {
    status: points.every((p) => !p.cell.fail && !p.cell.partial) ? 'PASS' : 'MISS',
    summary: points.map((p) => `${p.label}: ${p.cell.fail ||
      (p.cell.partial ? 'failed after some rounds' : `${p.rounds || '?'} rounds completed${p.extra || ''}`)}`).join('; ')
  }
}

function roundsWhy (points) {
  return points.filter((p) => p.cell.fail || p.cell.partial)
    .map((p) => `${p.label}: ${p.cell.fail}${p.cell.detail ? ` (${p.cell.detail})` : ''}`).join('; ') +
    '. A round that does not end has a process waiting with no one holding the lock, or a holder that was never told.'
}

function pct (x) {
  return `${Math.round(x * 100)}%`
}

function evaluate (rowList, get, opts, placements) {
  const rows = byId(rowList)
  const result = (key, impl) => {
    const o = get(key, impl)
    return (o && (o.result || o.partial)) || {}
  }
  const verdicts = []
  const add = (title, verdict, why) => {
    let text
    if (verdict.status === 'MISS') {
      try {
        text = why(verdict)
      } catch (error) {
        text = `(no explanation: ${error.message})`
      }
    }
    verdicts.push({ title, ...verdict, why: text })
  }
  const uncontended = ['uncontended.sync.1', 'uncontended.async.1', 'uncontended.sync.1000', 'uncontended.async.1000']
  const shortLabel = (row) => row.label.replace(/^request\+release, /, '')

  add('Uncontended, 1 thread: >= 5x faster than the built-in',
    ratioVerdict(ratioTarget(rows, uncontended, 'built-in', 5), shortLabel),
    (v) => {
      const row = rows.get('uncontended.sync.1')
      return `web-locks is ${format.ratioText(v.worst.x)} faster on '${shortLabel(v.worst.row)}' and would have to be ` +
        `${pct(v.short - 1)} faster still (${format.time(value(v.worst.row, 'built-in') / 5)} per request+release, against ` +
        `${format.time(value(v.worst.row, 'web-locks'))}). ${WEB_LOCKS_COST}`
    })

  add('Uncontended, 1 thread: no slower than async-mutex runExclusive',
    ratioVerdict(ratioTarget(rows, uncontended, 'async-mutex', 1), shortLabel),
    (v) => {
      const worst = uncontended.map((id) => rows.get(id)).filter(Boolean)
        .reduce((a, b) => (format.advantage(b, b.cells['web-locks'], b.cells['async-mutex']) < format.advantage(a, a.cells['web-locks'], a.cells['async-mutex']) ? b : a))
      const ours = value(worst, 'web-locks')
      const mutex = value(worst, 'async-mutex')
      const floor = value(worst, 'floor')
      return `web-locks is ${pct(ours / mutex - 1)} slower on '${shortLabel(worst)}' (${format.time(ours)} against ${format.time(mutex)}` +
        `${floor ? `; ${(ours / floor).toFixed(0)} and ${(mutex / floor).toFixed(0)} times an await Promise.resolve()` : ''}). ` +
        UNCONTENDED_WHY
    })

  add('Handoff between 2 threads: p50 no slower than the MessagePort ping-pong',
    ratioVerdict(ratioTarget(rows, ['handoff.p50'], 'floor', 1), () => 'p50'),
    () => {
      const row = rows.get('handoff.p50')
      return `p50 ${format.time(value(row, 'web-locks'))} against ${format.time(value(row, 'floor'))} for a MessagePort message ` +
        `(${pct(value(row, 'web-locks') / value(row, 'floor') - 1)} slower). Both wake the other thread's event loop ` +
        'the same way (uv_async); a handoff adds, on the releasing thread, the step from the callback\'s end to the ' +
        'release and the manager\'s mutex, and on the woken thread the mailbox drain and the promise jobs that run the ' +
        'callback, where a MessagePort delivers its message straight to the listener.'
    })

  add('Handoff between 2 threads: p50 >= 1.3x faster than the built-in',
    ratioVerdict(ratioTarget(rows, ['handoff.p50'], 'built-in', 1.3), () => 'p50'),
    (v) => {
      const row = rows.get('handoff.p50')
      return `web-locks would have to be ${pct(v.short - 1)} faster: p50 ${format.time(value(row, 'web-locks'))} against ${format.time(value(row, 'built-in'))}; ` +
        'both are bounded below by the thread wake-up (the floors), see the line above for what web-locks adds to it.'
    })

  const growthIds = ['burst.growth.enqueue', 'burst.growth.drain', 'held.growth.acquire', 'held.growth.release']
  add('Growth: per-operation cost flat from 1k to 1M queued requests and held names (exponent < 0.1)',
    limitVerdict(rows, growthIds, 0.1, 'exponent', true),
    () => {
      const parts = []
      for (const id of growthIds) {
        const row = rows.get(id)
        if (!row || !(value(row, 'web-locks') >= 0.1)) continue
        const [series, , metric] = id.split('.')
        const sizes = [1e3, 1e4, 1e5, 1e6].filter((n) => result(`${series}/${n}`, 'web-locks')[metric] !== undefined)
        const lo = result(`${series}/${sizes[0]}`, 'web-locks')
        const hi = result(`${series}/${sizes[sizes.length - 1]}`, 'web-locks')
        const gc = (r) => r[`${metric}Gc`]
        parts.push(`${series} ${metric}: exponent ${value(row, 'web-locks').toFixed(2)} (limit 0.10), ${format.time(lo[metric])} at ` +
          `${sizes[0].toLocaleString('en-US')} to ${format.time(hi[metric])} at ${sizes[sizes.length - 1].toLocaleString('en-US')}` +
          (gc(hi) !== undefined ? `, of which GC ${pct(gc(lo) || 0)} and ${pct(gc(hi))}` : ''))
      }
      return `${parts.join('; ')}. The C core's operations are O(1) (per-name queues, a hash table of names), but ` +
        'each request keeps JS objects alive while it waits or holds (see memory). Where GC\'s share grows with N, young-' +
        'generation GCs copy and promote all of them; where it does not, the rest is memory traffic: N requests\' objects ' +
        'and N names no longer fit in the CPU caches, so each operation misses them.'
    })

  const unrelatedIds = []
  const unrelatedRows = []
  for (const series of ['burst', 'held']) {
    const sizes = [1e6, 1e5, 1e4, 1e3]
    const n = sizes.find((s) => rows.get(`${series}.${s}.unrelated`) && value(rows.get(`${series}.${s}.unrelated`), 'web-locks') !== undefined)
    const none = rows.get(`${series}.none.unrelated`)
    if (!n || !none) continue
    const r = result(`${series}/${n}`, 'web-locks')
    const x = r.unrelated / r.unrelated0
    unrelatedIds.push({ series, n, x, with: r.unrelated, without: r.unrelated0, gc: r.unrelatedGc, gc0: r.unrelated0Gc })
    unrelatedRows.push(`${x.toFixed(2)}x with ${n.toLocaleString('en-US')} ${series === 'burst' ? 'queued' : 'held'} (${format.time(r.unrelated)} vs ${format.time(r.unrelated0)} with none yet` +
      `${r.unrelatedAfter !== undefined ? `, ${format.time(r.unrelatedAfter)} once all are gone again` : ''})`)
  }
  const UNRELATED_TOLERANCE = 1.25
  add(`Growth: an unrelated request costs the same with 1M others queued/held as with none (within ${UNRELATED_TOLERANCE}x)`,
    unrelatedIds.length
      ? { status: unrelatedIds.every((u) => u.x <= UNRELATED_TOLERANCE) ? 'PASS' : 'MISS', summary: unrelatedRows.join('; ') }
      : { status: 'not run', summary: 'no figures in this run' },
    () => unrelatedIds.filter((u) => u.x > UNRELATED_TOLERANCE).map((u) =>
      `with ${u.n.toLocaleString('en-US')} ${u.series === 'burst' ? 'queued' : 'held'} an unrelated request costs ${pct(u.x - 1)} more ` +
      `(GC ${pct(u.gc || 0)} of that time against ${pct(u.gc0 || 0)} with none)`).join('; ') +
      '. The C core looks a name up in a hash table and touches no other entry; what grows is the JS heap the waiting ' +
      'requests keep alive (each GC has more to scan) and cache misses in a larger heap and table.')

  const contentionRates = [...rows.keys()].filter((id) => /^contention\..*\.rate$/.test(id))
  add('Contention, 2-8 threads: >= 2x the built-in\'s throughput',
    ratioVerdict(ratioTarget(rows, contentionRates, 'built-in', 2), (row) => row.label.replace(/: locks per second$/, '')),
    (v) => {
      const row = v.worst.row
      const ours = value(row, 'web-locks')
      const handoff = rows.get('handoff.p50')
      return `web-locks needs ${pct(v.short - 1)} more throughput on ${row.label.replace(/: locks per second$/, '')}: ${format.rate(ours)} against ` +
        `${format.rate(value(row, 'built-in'))}, a lock every ${format.time(1e9 / ours)}` +
        (handoff && value(handoff, 'web-locks') ? `, while one handoff between threads alone takes ${format.time(value(handoff, 'web-locks'))} (p50)` : '') +
        '. When consecutive locks go to different threads, each costs a thread wake-up; the built-in, which lets ' +
        'threads overlap (see violations), does not always pay it.'
    })

  const fairnessIds = [...rows.keys()].filter((id) => /^contention\..*\.fairness$/.test(id))
  add('Contention, 2-8 threads: no thread starved (min/max per-thread locks >= 0.5)',
    (() => {
      const found = fairnessIds.map((id) => rows.get(id)).filter((row) => value(row, 'web-locks') !== undefined)
      if (!found.length) return { status: 'not run', summary: 'no figures in this run' }
      const worst = found.reduce((a, b) => (value(b, 'web-locks') < value(a, 'web-locks') ? b : a))
      return {
        status: found.every((row) => value(row, 'web-locks') >= 0.5) ? 'PASS' : 'MISS',
        summary: `worst ${value(worst, 'web-locks').toFixed(2)} (${worst.label.replace(/: fairness min\/max$/, '')}); ` +
          `built-in worst ${Math.min(...found.map((row) => value(row, 'built-in') ?? Infinity)).toFixed(2)}`,
        worst
      }
    })(),
    (v) => `on ${v.worst.label.replace(/: fairness min\/max$/, '')} the least served thread got ${pct(value(v.worst, 'web-locks'))} ` +
      'of what the most served got: a thread that releases and asks again before another thread\'s wake-up completes ' +
      'takes the lock again (FIFO is per request, and the other thread\'s request was not yet queued).')

  // Judged at the largest N measured, where fixed costs weigh least.
  const largest = (kind) => {
    const ids = [...rows.keys()].filter((id) => new RegExp(`^memory\\.${kind}\\.\\d+\\.rss$`).test(id) && value(rows.get(id), 'web-locks') !== undefined)
    ids.sort((a, b) => Number(b.split('.')[2]) - Number(a.split('.')[2]))
    return ids.slice(0, 1)
  }
  const memHeld = largest('held')
  const memQueued = largest('queued')
  const memWhy = (kind) => (v) => {
    const [, , n] = v.worst.id.split('.')
    const r = result(`memory/${kind}/${n}`, 'web-locks')
    const limit = kind === 'held' ? 1024 : 600
    const what = kind === 'held' ? 'held lock' : 'queued request'
    return `${format.bytes(r.rss)} per ${what} at N = ${Number(n).toLocaleString('en-US')}, ${pct(r.rss / limit - 1)} over. ` +
      `Of it, ${format.bytes(r.heap)} is live JS heap (what the shim keeps per request while it ${kind === 'held' ? 'holds' : 'waits'}: ` +
      'its record, promises, resolving functions and closures), ' +
      `V8 keeps ${format.bytes(r.heapTotal - r.heap)} more heap reserved after the burst, and ${format.bytes(r.rss - r.heapTotal)} ` +
      `is native (RSS beyond the V8 heap: the C request and its slot${kind === 'held' ? ', the name\'s hash entry and copy' : ''}, malloc overhead).`
  }
  add('Memory: at most 1 KB (1,024 B) per held lock, all counted (RSS, fresh process, largest N)',
    limitVerdict(rows, memHeld, 1024, 'B'), memWhy('held'))
  add('Memory: at most 600 B per queued request, all counted (RSS, fresh process, largest N)',
    limitVerdict(rows, memQueued, 600, 'B'), memWhy('queued'))

  scopeTargets(rows, add, result)
  // The PostgreSQL targets hold in each placement of client and server
  // (lib/placement.js): judged on each one's rows.
  for (const pl of placements ? placements.list : [{ id: null }]) {
    const suffix = pl.id === null ? '' : `@${pl.id}`
    postgresTargets({ get: (id) => rows.get(id + suffix) },
      (title, ...rest) => add(pl.id === null ? title : `${title} [${pl.short}]`, ...rest),
      (key, impl) => result(key + suffix, impl))
  }

  const violationIds = [...rows.keys()].filter((id) => /\.violations$/.test(id))
  add('Zero mutual-exclusion violations in every multi-thread and multi-process case',
    (() => {
      const found = violationIds.map((id) => rows.get(id)).filter((row) => value(row, 'web-locks') !== undefined)
      if (!found.length) return { status: 'not run', summary: 'no figures in this run' }
      const total = (column) => found.reduce((a, row) => a + (value(row, column) || 0), 0)
      // --windows: web-locks under wine too.
      const wine = found.filter((row) => value(row, 'web-locks@wine') !== undefined)
      const bad = found.filter((row) => value(row, 'web-locks') !== 0 || (value(row, 'web-locks@wine') || 0) !== 0)
      return {
        status: bad.length ? 'MISS' : 'PASS',
        summary: `web-locks ${total('web-locks')} in ${found.length} cases; ` +
          (wine.length
            ? `under wine ${total('web-locks@wine')} in ${wine.length}`
            : `built-in ${total('built-in')} (${found.filter((row) => value(row, 'built-in') > 0).length} of its cases with some)`),
        bad
      }
    })(),
    (v) => `violations in ${v.bad.map((row) => `${row.label} (${value(row, 'web-locks')}${value(row, 'web-locks@wine') ? `; under wine ${value(row, 'web-locks@wine')}` : ''})`).join(', ')}: a bug.`)

  return verdicts
}

// The cross-process cases' targets (cases/scope-*.js): the 'web-locks'
// column is web-locks through a scope, 'process-wide' require('web-locks').locks.
function scopeTargets (rows, add, result) {
  const uncontended = ['scope.uncontended.sync', 'scope.uncontended.async']
  add('Across processes, uncontended: request+release through a scope at most 2x the process-wide manager\'s',
    costVerdict(rows, uncontended, 'process-wide', 2, { describe: (row) => row.label.replace(/^request\+release, /, '') }),
    (v) => `request+release through a scope takes ${format.time(value(v.worst, 'web-locks'))} against ${format.time(value(v.worst, 'process-wide'))} ` +
      `(${v.worst.label.replace(/^request\+release, /, '')}), ${pct(v.x / 2 - 1)} over the limit. Both run the same core and the ` +
      'same JS; a scope\'s request and release take the process-shared (robust) mutex of the mapped file instead of the ' +
      'process\'s own, and its grant comes back through the agent\'s mailbox the same way.')

  add('Across processes, handoff between 2 processes: p50 at most 1.2x the handoff between 2 threads',
    costVerdict(rows, ['scope.handoff.p50'], 'process-wide', 1.2, { describe: () => 'p50', needs: "the 'handoff' case (--filter 'scope|handoff')" }),
    (v) => {
      const floor = value(v.worst, 'floor')
      return `p50 ${format.time(value(v.worst, 'web-locks'))} between processes against ${format.time(value(v.worst, 'process-wide'))} between threads, ` +
        `${pct(v.x / 1.2 - 1)} over the limit` +
        (floor ? `; an 8-byte Unix-socket message takes ${format.time(floor)} one way on this machine` : '') +
        '. The releasing process wakes the waiter by opening its agent\'s FIFO by path, writing a byte and closing it; the ' +
        'waiter\'s event loop polls the FIFO (a thread is woken with uv_async instead), drains its mailbox and runs the callback.'
    })

  const scopeRounds = [2, 4, 8].filter((n) => rows.get(`scope.contention.${n}.rate`) && rows.get(`scope.contention.${n}.rate`).cells['web-locks'])
    .map((n) => ({ label: `${n} processes`, cell: rows.get(`scope.contention.${n}.rate`).cells['web-locks'], rounds: result(`scope/contention/${n}`, 'web-locks-scope').rounds }))
  add('Across processes, 2/4/8 processes contending on 1 name: every round completes (no lost wake-up)',
    roundsVerdict(scopeRounds), () => roundsWhy(scopeRounds))

  const fairness = [2, 4, 8].map((n) => rows.get(`scope.contention.${n}.fairness`)).filter((row) => row && value(row, 'web-locks') !== undefined)
  add('Across processes, 2/4/8 processes contending: no process starved (min/max grants per process >= 0.5)',
    fairness.length
      ? (() => {
          const worst = fairness.reduce((a, b) => (value(b, 'web-locks') < value(a, 'web-locks') ? b : a))
          return {
            status: fairness.every((row) => value(row, 'web-locks') >= 0.5) ? 'PASS' : 'MISS',
            summary: `worst ${value(worst, 'web-locks').toFixed(2)} (${worst.label.replace(/: fairness min\/max$/, '')}); ` +
              `proper-lockfile worst ${Math.min(...fairness.map((row) => value(row, 'proper-lockfile') ?? Infinity)).toFixed(2)}`,
            worst
          }
        })()
      : { status: 'not run', summary: 'no figures in this run' },
    (v) => `on ${v.worst.label.replace(/: fairness min\/max$/, '')} the least served process got ${pct(value(v.worst, 'web-locks'))} ` +
      'of what the most served got. Requests are granted in queue order, so a process falls behind when it is not queued ' +
      'when the lock is released: its wake-up, or its CPU, came late.')

  const rates = [2, 4, 8].map((n) => `scope.contention.${n}.rate`)
  add('Across processes, 2/4/8 processes contending: at least proper-lockfile\'s grants per second',
    ratioVerdict(ratioTarget(rows, rates, 'proper-lockfile', 1), (row) => row.label.replace(/: locks per second.*$/, '')),
    (v) => `${format.rate(value(v.worst.row, 'web-locks'))} against ${format.rate(value(v.worst.row, 'proper-lockfile'))} on ` +
      `${v.worst.row.label.replace(/: locks per second.*$/, '')}.`)

  killTarget(rows, add, result, 'web-locks', 'Across processes, SIGKILL of the holder')
  // --windows: the same under wine (lib/wine.js), where the kill is TerminateProcess.
  if (rows.get('scope.kill.p50') && rows.get('scope.kill.p50').cells['web-locks@wine']) {
    killTarget(rows, add, result, 'web-locks@wine', 'Under wine (node.exe), TerminateProcess of the holder')
  }
}

// The next waiter granted within 2 s of every kill of the holder, in
// `column` ('web-locks' or 'web-locks@wine').
function killTarget (rows, add, result, column, what) {
  const kill = rows.get('scope.kill.p50')
  const killOutcome = result('scope/kill', COLUMNS[column])
  const cell = kill && kill.cells[column]
  add(`${what}: the next waiter (another process) is granted within 2 s of every kill (p50, p99)`,
    !cell
      ? { status: 'not run', summary: 'no figures in this run' }
      : cell.fail
        ? { status: 'MISS', summary: `${cell.fail}: ${cell.detail || ''}`, cell }
        : {
            status: 'PASS',
            summary: `p50 ${format.time(value(kill, column))}, p99 ${format.time(value(rows.get('scope.kill.p99'), column))} over ${killOutcome.kills} kills` +
              (column === 'web-locks' && value(kill, 'proper-lockfile') ? `; proper-lockfile (stale 2 s) p50 ${format.time(value(kill, 'proper-lockfile'))}` : '')
          },
    (v) => v.cell.fail === 'no prompt release'
      ? 'no prompt release (needs the death watcher): a killed process runs no exit code, and today its agents are only ' +
        'ended when another process opens the scope (opening sweeps dead owners), which the case then did.'
      : `${v.cell.fail}${v.cell.detail ? ` (${v.cell.detail})` : ''}.`)
}

// The PostgreSQL cases' targets (cases/postgres-*.js): the 'web-locks'
// column is web-locks through openLockManager(scope, { postgres }),
// 'reference' the raw mechanism of the same server in the same run.
function postgresTargets (rows, add, result) {

  const uncontended = rows.get('postgres.uncontended')
  add('PostgreSQL, uncontended: request+release through a PostgreSQL scope at most 1.2x a raw pg_advisory_lock + pg_advisory_unlock pair (one pg.Client, same server)',
    costVerdict(rows, ['postgres.uncontended'], 'reference', 1.2, { describe: () => 'sync callback, 1 name' }),
    (v) => {
      const calls = value(rows.get('postgres.uncontended.calls'), 'web-locks')
      return `request+release takes ${format.time(value(uncontended, 'web-locks'))} against ${format.time(value(uncontended, 'reference'))} for the ` +
        `advisory pair, ${pct(v.x / 1.2 - 1)} over the limit` +
        (calls ? `; both send 2 statements (web-locks: ${calls.toFixed(2)} per request+release: its request and release calls), so the ` +
          'difference is not round trips but what each statement does in the server: a request or release is one write ' +
          'transaction, an update of the name\'s row (the lock, its counts and, for a request, a token drawn), where an ' +
          'advisory lock touches no table. Neither commit waits for the WAL flush (the tables and the token counter are ' +
          'unlogged).' : '.') + floorWhy(rows, uncontended)
    })

  const handoff = rows.get('postgres.handoff.p50.rtt')
  add('PostgreSQL, handoff between 2 processes: p50 at most 1.2x a raw LISTEN/NOTIFY round trip between 2 processes',
    costVerdict(rows, ['postgres.handoff.p50.rtt'], 'reference', 1.2, { describe: () => 'p50' }),
    (v) => {
      const oneWay = value(rows.get('postgres.handoff.p50'), 'reference')
      return `p50 ${format.time(value(handoff, 'web-locks'))} from the holder's callback returning to the waiter's callback, against ` +
        `${format.time(value(handoff, 'reference'))} for a NOTIFY round trip` +
        (oneWay ? ` (one way: ${format.time(oneWay)})` : '') + `, ${pct(v.x / 1.2 - 1)} over the limit. A handoff carries one ` +
        'notification from one process to another, after the release statement has run and committed (which frees the lock ' +
        'and grants the waiter, whose notification leaves at the commit).' +
        ' Each grant and release leaves dead row versions that the next lookups of the name may step over until vacuum\'s ' +
        'horizon passes them, which a watcher\'s wait for its neighbour\'s life lock holds back for its slice (250 ms).'
    })

  const pgRounds = [1, 100].map((names) => ({ names, row: rows.get(`postgres.contention.${names}.rate`) }))
    .filter((c) => c.row && c.row.cells['web-locks'])
    .map((c) => ({
      label: `${c.names} name${c.names > 1 ? 's' : ''}`,
      cell: c.row.cells['web-locks'],
      rounds: result(`postgres/contention/${c.names}`, 'web-locks-postgres').rounds,
      // A point that failed has no rate.
      extra: (value(c.row, 'web-locks') !== undefined ? `, ${format.rate(value(c.row, 'web-locks'))}` : '') +
        (value(c.row, 'reference') ? ` (advisory locks ${format.rate(value(c.row, 'reference'))})` : '')
    }))
  add('PostgreSQL, 50 processes on 1 name and on 100 names: every process finishes (no lost wake-up); grants per second',
    roundsVerdict(pgRounds), () => roundsWhy(pgRounds))
  add('PostgreSQL, 50 processes on 1 name and on 100 names: at least 0.8x the grants per second of advisory locks (same processes, same server)',
    ratioVerdict(ratioTarget(rows, ['postgres.contention.1.rate', 'postgres.contention.100.rate'], 'reference', 0.8),
      (row) => row.label.replace(/: locks per second.*$/, '')),
    (v) => `${format.rate(value(v.worst.row, 'web-locks'))} against ${format.rate(value(v.worst.row, 'reference'))} for advisory ` +
      `locks on ${v.worst.row.label}. A waiter on an advisory lock is woken inside the server by the unlock; here a release is ` +
      'a transaction whose commit sends the next holder a notification, which its process reads before its callback runs.')

  // Judged on 1 name, where the order of service is the manager's; on 100
  // names each process draws its names at random, and a few dozen grants
  // per process make min/max noisy whatever the lock (see the reference).
  const fair = rows.get('postgres.contention.1.fairness')
  const fair100 = rows.get('postgres.contention.100.fairness')
  add('PostgreSQL, 50 processes on 1 name: fair (min/max grants per process >= 0.9)',
    fair && value(fair, 'web-locks') !== undefined
      ? {
          status: value(fair, 'web-locks') >= 0.9 ? 'PASS' : 'MISS',
          summary: `${value(fair, 'web-locks').toFixed(2)}` + (value(fair, 'reference') !== undefined ? ` (advisory locks ${value(fair, 'reference').toFixed(2)})` : '') +
            (fair100 && value(fair100, 'web-locks') !== undefined
              ? `; on 100 names, names drawn at random, not judged: ${value(fair100, 'web-locks').toFixed(2)}` +
                (value(fair100, 'reference') !== undefined ? ` (advisory locks ${value(fair100, 'reference').toFixed(2)})` : '')
              : '')
        }
      : { status: 'not run', summary: 'no figures in this run' },
    () => `the least served process got ${pct(value(fair, 'web-locks'))} of what the most served got. Requests are granted in ` +
      'queue order, so a process falls behind when it is not queued when the lock is released: its notification, or its CPU, came late.')

  add('PostgreSQL, 50 processes: at most 2 connections per process (most seen at once in pg_stat_activity, over the processes)',
    limitVerdict(rows, ['postgres.contention.1.perProcess', 'postgres.contention.100.perProcess'], 2, 'ratio'),
    (v) => `${value(v.worst, 'web-locks').toFixed(2)} per process on ${v.worst.label.replace(/: connections per process$/, '')}: ` +
      'each agent has its session and its watcher; more means connections were opened again (a lost session) or left behind.')

  const growthIds = ['postgres.queue.growth.enqueue', 'postgres.queue.growth.drain']
  add('PostgreSQL, up to 100,000 requests queued on one name: per-request cost flat (growth exponent < 0.1), enqueue and grant+release',
    limitVerdict(rows, growthIds, 0.1, 'exponent', true),
    () => {
      const parts = []
      for (const id of growthIds) {
        const row = rows.get(id)
        if (!row || !(value(row, 'web-locks') >= 0.1)) continue
        const metric = id.split('.')[3]
        const sizes = [1e3, 1e4, 1e5].filter((n) => result(`postgres/queue/${n}`, 'web-locks-postgres')[metric] !== undefined)
        const at = (n) => result(`postgres/queue/${n}`, 'web-locks-postgres')[metric]
        parts.push(`${metric === 'drain' ? 'grant+release' : 'enqueue'}: exponent ${value(row, 'web-locks').toFixed(2)} (limit 0.10), ` +
          sizes.map((n) => `${format.time(at(n))} at ${n.toLocaleString('en-US')}`).join(', '))
      }
      return `${parts.join('; ')}. A request and a release decide from the name's row, and the queue's processing ` +
        '(process() in lib/postgres/schema.sql) reads the name\'s requests in id order from a bound and stops at its first ' +
        'row, so none should read the whole queue: a plan that does (a bitmap scan and a sort, in auto_explain) is the ' +
        'first suspect; a growth this small may also come from the indexes\' depth and the machine\'s load (see the load line).'
    })
}

// What the least a lock kept in a table costs says of an uncontended miss:
// two single-row UPDATEs of an unlogged table on the same server, and the
// CPU time of the server and the client for each.
function floorWhy (rows, uncontended) {
  const floor = value(rows.get('postgres.uncontended.update'), 'reference')
  const advisory = value(uncontended, 'reference')
  if (!(floor > 0) || !(advisory > 0)) return ''
  const cpu = (id, column) => value(rows.get(id), column)
  const server = cpu('postgres.uncontended.server', 'web-locks')
  const client = cpu('postgres.uncontended.client', 'web-locks')
  return ` Two single-row UPDATEs of an unlogged table alone take ${format.time(floor)} (${(floor / advisory).toFixed(2)}x the ` +
    `advisory pair): the least a lock whose state is a row costs, ${floor / advisory > 1.2 ? 'already beyond' : 'within'} the limit.` +
    (server > 0 && client > 0
      ? ` Of web-locks' time, ${format.time(server)} is the server's CPU (advisory pair ` +
        `${format.time(cpu('postgres.uncontended.server', 'reference'))}, the UPDATEs ${format.time(cpu('postgres.uncontended.update.server', 'reference'))}) ` +
        `and ${format.time(client)} the client's (advisory pair ${format.time(cpu('postgres.uncontended.client', 'reference'))}).`
      : '')
}

module.exports = { evaluate }
