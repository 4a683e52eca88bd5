'use strict'

// N distinct names held at once, for N = 1k ... 1M: the cost to acquire
// each, to release each, of an unrelated request while they are held
// against the same with none held, and query() per entry.

const { load } = require('../lib/references')
const { measure, nowMs, trackGc, Phases, settle } = require('../lib/measure')
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
    key: `held/${n}`,
    label: `${shortSize(n)} distinct names held at once`,
    series: 'held',
    size: n,
    params: { n, unrelated: opts.quick ? 1000 : 5000 },
    rounds: n >= 1e6 ? 3 : undefined,
    work: Math.max(n, opts.quick ? PER_ROUND / 4 : PER_ROUND),
    scale: ['acquire', 'release'],
    nodeArgs: ['--expose-gc'],
    // Quick runs: the references up to 10k only.
    impls: opts.quick && n > 1e4 ? ['web-locks'] : IMPLS
  }))
}

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
  const names = Array.from({ length: n }, (_, i) => `held-${i}`)
  async function round (m, n, reps) {
    const phases = new Phases()
    // With nothing held yet (warm: after the warm-up).
    m.unrelated0 = await unrelated(locks, count, phases, 'unrelated0')
    let entries = 0
    const repsEnd = nowMs() + repBudgetMs
    for (let rep = 0; rep < reps && (rep === 0 || nowMs() < repsEnd); rep++) {
      let release
      const gate = new Promise((resolve) => { release = resolve })
      let granted = 0
      let allGranted
      const all = new Promise((resolve) => { allGranted = resolve })
      const callback = () => {
        if (++granted === n) allGranted()
        return gate
      }
      let last
      if (rep === 0 || n >= 1e4) settle()
      const endAcquire = phases.start('acquire')
      for (let i = 0; i < n; i++) last = locks.request(names[i], callback)
      await all
      endAcquire()
      m.acquire = phases.ms('acquire') * 1e6 / (n * (rep + 1))
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
      const endRelease = phases.start('release')
      release()
      await last
      endRelease()
      m.release = phases.ms('release') * 1e6 / (n * (rep + 1))
    }
    // And once they are all released again.
    m.unrelatedAfter = await unrelated(locks, count, phases, 'unrelatedAfter')
    for (const name of ['acquire', 'release', 'unrelated0', 'unrelated', 'unrelatedAfter']) m[`${name}Gc`] = await phases.gcShare(name)
  }
  const reps = Math.max(1, Math.round((ctx.quick ? PER_ROUND / 4 : PER_ROUND) / n))
  const repBudgetMs = ctx.budgetMs / ctx.rounds
  return measure((m) => round(m, n, reps), { ...ctx, warmup: () => round({}, Math.min(n, 200), 10) })
}

function rows (get, opts) {
  return sizedRows(get, sizes(opts), {
    prefix: 'held',
    sizeLabel: (n) => `${shortSize(n)} names held`,
    metrics: [['acquire', 'acquire each', 'acquire'], ['release', 'release each', 'release'], ['unrelated', 'unrelated request', 'unrelated request'], ['query', 'query() per entry', 'query() per entry']],
    noneLabel: 'nothing held yet: unrelated request',
    afterLabel: 'all released again: unrelated request',
    columns: COLUMNS
  })
}

module.exports = {
  section: 'N distinct names held at once (time per lock; growth exponent: 0 = flat, 1 = linear in N)',
  points,
  run,
  rows
}
