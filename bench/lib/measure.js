'use strict'

// What a case uses inside its child process: clocks, rounds with medians,
// time spent in GC, and reporting of metrics gathered before a failure.

const { PerformanceObserver, performance } = require('perf_hooks')
const { medians } = require('./stats')

// Nanoseconds on the monotonic clock that every thread of the process
// shares (uv_hrtime), so timestamps taken on two threads can be subtracted.
function nowNs () {
  const [s, ns] = process.hrtime()
  return s * 1e9 + ns
}

// Wall time in ms, for durations within a thread.
const nowMs = () => performance.now()

const gcEntries = []
let gcObserver = null
function trackGc () {
  if (gcObserver) return
  gcObserver = new PerformanceObserver((list) => { for (const e of list.getEntries()) gcEntries.push([e.startTime, e.duration]) })
  gcObserver.observe({ entryTypes: ['gc'] })
}

// Phases of a round, timed: const end = phases.start('enqueue'); ...; end()
// returns the phase's ms. After the round, gcShare(name) is the fraction
// of the phase's time spent in GC pauses (GC entries arrive a task later).
class Phases {
  constructor () { this.windows = {} }
  start (name) {
    const t0 = nowMs()
    return () => {
      const t1 = nowMs()
      ;(this.windows[name] = this.windows[name] || []).push([t0, t1])
      return t1 - t0
    }
  }

  ms (name) {
    return (this.windows[name] || []).reduce((a, [t0, t1]) => a + t1 - t0, 0)
  }

  async gcShare (name) {
    await new Promise((resolve) => setImmediate(resolve))
    if (gcObserver) for (const e of gcObserver.takeRecords()) gcEntries.push([e.startTime, e.duration])
    let gc = 0
    for (const [t0, t1] of this.windows[name] || []) {
      for (const [start, duration] of gcEntries) if (start >= t0 && start < t1) gc += duration
    }
    const ms = this.ms(name)
    return ms > 0 ? gc / ms : 0
  }
}

// A full GC before a timed phase, when the child runs with --expose-gc, so
// that garbage left by the previous phase is not charged to this one.
function settle () {
  if (typeof globalThis.gc === 'function') globalThis.gc()
}

const state = { done: [], current: null }

// Metrics so far: medians of finished rounds, or the unfinished round's
// values for metrics no finished round has.
function sofar () {
  const out = state.done.length ? summarize(state.done) : {}
  if (state.current) {
    for (const [k, v] of Object.entries(state.current)) if (!(k in out)) out[k] = v
  }
  return out
}

// Violations and sample counts add up over rounds; everything else is the
// median over rounds.
function summarize (rounds) {
  const out = medians(rounds)
  for (const key of Object.keys(out)) {
    if (/^violations|^samples/.test(key)) out[key] = rounds.reduce((a, r) => a + (r[key] || 0), 0)
  }
  out.rounds = rounds.length
  return out
}

// Calls loop(n) with growing n until ms have passed, so that the code
// under test is optimised before it is timed.
async function warmup (loop, ms) {
  const end = nowMs() + ms
  for (let n = 256; nowMs() < end; n = Math.min(n * 2, 16384)) await loop(n)
}

// Runs warmup() once, then round(m) up to `rounds` times (at least once,
// fewer when budgetMs is used up); each round writes its metrics into m.
async function measure (round, { rounds, budgetMs, warmup }) {
  if (warmup) await warmup()
  const started = nowMs()
  for (let r = 0; r < rounds; r++) {
    state.current = {}
    const t0 = nowMs()
    await round(state.current, r)
    state.current.roundMs = nowMs() - t0
    state.done.push(state.current)
    state.current = null
    process.stdout.write(`@@partial ${JSON.stringify(sofar())}\n`)
    if (nowMs() - started > budgetMs) break
  }
  return summarize(state.done)
}

// Resolves once `name` is held; the lock is kept until release() is called.
async function hold (locks, name) {
  let release, granted
  const acquired = new Promise((resolve) => { granted = resolve })
  const done = locks.request(name, () => new Promise((resolve) => {
    release = resolve
    granted()
  }))
  await acquired
  return { release: () => release(), done }
}

module.exports = { nowNs, nowMs, trackGc, Phases, settle, measure, warmup, sofar, hold }
