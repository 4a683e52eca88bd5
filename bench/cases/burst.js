'use strict'

// A burst of N requests queued on one name behind a held lock, for N = 1k
// ... 1M: the cost to enqueue, the cost per request to grant and release
// them all, the cost of an unrelated request (another name) while they wait
// against the same with nothing queued, and query() per entry.

const { load } = require('../lib/references')
const { measure, nowMs, trackGc, Phases, settle, hold } = require('../lib/measure')
const { shortSize, sizedRows } = require('../lib/rows')

const IMPLS = ['web-locks', 'built-in', 'async-mutex', 'async-lock']
const COLUMNS = { 'web-locks': 'web-locks', 'built-in': 'built-in', 'async-mutex': 'async-mutex', 'async-lock': 'async-lock' }

// Sizes smaller than this are repeated within a round (time allowing), so
// that each round times at least this many requests.
const PER_ROUND = 100000

function sizes (opts) {
  return opts.quick ? [1e3, 1e4, 1e5] : [1e3, 1e4, 1e5, 1e6]
}

function points (opts) {
  return sizes(opts).map((n) => ({
    key: `burst/${n}`,
    label: `burst of ${shortSize(n)} queued on one name`,
    series: 'burst',
    size: n,
    params: { n, unrelated: opts.quick ? 1000 : 5000 },
    rounds: n >= 1e6 ? 3 : undefined,
    work: Math.max(n, opts.quick ? PER_ROUND / 4 : PER_ROUND),
    scale: ['enqueue', 'drain'],
    nodeArgs: ['--expose-gc'],
    // Quick runs: the references up to 10k only.
    impls: opts.quick && n > 1e4 ? ['web-locks'] : IMPLS
  }))
}

// Time per request of `count` uncontended requests on another name.
async function unrelated (locks, count, phases, name) {
  const callback = () => {}
  for (let i = 0; i < 200; i++) await locks.request('unrelated', callback)
  settle()
  const end = phases.start(name)
  for (let i = 0; i < count; i++) await locks.request('unrelated', callback)
  return end() * 1e6 / count
}

async function run ({ n, unrelated: count }, implId, ctx) {
  const locks = load(implId)
  trackGc()
  const callback = () => {}
  async function round (m, n, reps) {
    const phases = new Phases()
    // With nothing queued yet (warm: after the warm-up).
    m.unrelated0 = await unrelated(locks, count, phases, 'unrelated0')
    let entries = 0
    const repsEnd = nowMs() + repBudgetMs
    for (let rep = 0; rep < reps && (rep === 0 || nowMs() < repsEnd); rep++) {
      const holder = await hold(locks, 'q')
      let last
      if (rep === 0 || n >= 1e4) settle()
      const endEnqueue = phases.start('enqueue')
      for (let i = 0; i < n; i++) last = locks.request('q', callback)
      endEnqueue()
      m.enqueue = phases.ms('enqueue') * 1e6 / (n * (rep + 1))
      // Requests may join their queue after request() returns (the
      // built-in queues them from a task): let them settle first.
      await new Promise((resolve) => setImmediate(resolve))
      if (rep === 0) m.unrelated = await unrelated(locks, count, phases, 'unrelated')
      if (typeof locks.query === 'function') {
        if (rep === 0 || n >= 1e4) settle()
        const endQuery = phases.start('query')
        const snapshot = await locks.query()
        endQuery()
        entries += snapshot.held.length + snapshot.pending.length
        m.query = phases.ms('query') * 1e6 / entries
      }
      if (rep === 0 || n >= 1e4) settle()
      const endDrain = phases.start('drain')
      holder.release()
      await holder.done
      await last
      endDrain()
      m.drain = phases.ms('drain') * 1e6 / (n * (rep + 1))
    }
    // And once they are all gone again.
    m.unrelatedAfter = await unrelated(locks, count, phases, 'unrelatedAfter')
    for (const name of ['enqueue', 'drain', 'unrelated0', 'unrelated', 'unrelatedAfter']) m[`${name}Gc`] = await phases.gcShare(name)
  }
  const reps = Math.max(1, Math.round((ctx.quick ? PER_ROUND / 4 : PER_ROUND) / n))
  const repBudgetMs = ctx.budgetMs / ctx.rounds
  // Warm up on bursts of 200: the built-in overflows its stack near 1,000.
  return measure((m) => round(m, n, reps), { ...ctx, warmup: () => round({}, 200, 10) })
}

function rows (get, opts) {
  return sizedRows(get, sizes(opts), {
    prefix: 'burst',
    sizeLabel: (n) => `${shortSize(n)} queued on 1 name`,
    metrics: [['enqueue', 'request() each', 'request()'], ['drain', 'grant+release each', 'grant+release'], ['unrelated', 'unrelated request', 'unrelated request'], ['query', 'query() per entry', 'query() per entry']],
    noneLabel: 'nothing queued yet: unrelated request',
    afterLabel: 'all drained again: unrelated request',
    columns: COLUMNS
  })
}

module.exports = {
  section: 'burst of N requests queued on one name behind a held lock (time per request; growth exponent: 0 = flat, 1 = linear in N)',
  points,
  run,
  rows
}
