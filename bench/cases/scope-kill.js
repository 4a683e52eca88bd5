'use strict'

// Release after SIGKILL: a process holds a lock of the scope, another
// process waits for it, the holder is killed with SIGKILL; the time from
// the kill to the waiter's callback, p50 and p99 over 20+ kills (a fresh
// holder process each time). A killed process runs no exit code: only the
// manager can tell that it died. A kill whose lock is not granted within
// 2 s is 'no prompt release'; the case then opens the scope itself (opening
// a scope ends the agents of dead processes), so that it goes on, and stops
// after two such kills.
//
// proper-lockfile (full runs only: each kill costs its stale time) frees a
// dead holder's lock when a waiter finds it stale: its mtime, refreshed
// every stale/2 by a live holder, older than `stale`. Here stale is 2 s, the
// least it allows (10 s by default).

const { open } = require('../lib/references')
const { measure } = require('../lib/measure')
const { percentile, median } = require('../lib/stats')
const { HangError, hostNs, startProcesses, stopProcesses } = require('../lib/processes')
const { COLUMNS } = require('../lib/scope')
const { withWine } = require('../lib/wine')

const BOUND_MS = 2000 // a kill not released by then is not prompt
const LATE_STOP = 2 // such kills before the case stops
const SWEEP_MS = 10000 // once the scope is opened again, the grant comes by then
const LOCKFILE_STALE = 2000

function points (opts) {
  return [{
    key: 'scope/kill',
    label: 'scope: SIGKILL of the holder, next grant elsewhere',
    params: { kills: opts.quick ? 20 : 50, lockfileKills: 4 },
    rounds: 1,
    scratch: true,
    timeoutMs: opts.quick ? 45000 : 90000,
    // --windows: under wine too, where SIGKILL is TerminateProcess.
    impls: opts.windows ? withWine(['web-locks-scope']) : opts.quick ? ['web-locks-scope'] : ['web-locks-scope', 'proper-lockfile']
  }]
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function run ({ kills, lockfileKills }, implId, ctx) {
  const lockfile = implId === 'proper-lockfile'
  const where = { impl: implId, dir: ctx.dir, scope: `kill-${process.pid}`, stale: lockfile ? LOCKFILE_STALE : undefined }
  const [waiter] = await startProcesses('scope-kill', [{ ...where, me: 0, role: 'waiter' }])
  // proper-lockfile's waiter takes the lock once its mtime is `stale` old:
  // a live holder sets it to now every stale / 2, but a process's first
  // lock sets it up to 1 s ahead (its mtime precision probe), so a holder
  // killed within a second of locking leaves it taken 2 to 3 s.
  const bound = lockfile ? LOCKFILE_STALE + 3000 : BOUND_MS

  // One kill: a holder process takes `name`, the waiter queues for it, the
  // holder is killed. Resolves with the kill-to-grant time, or null when
  // not granted within the bound (the scope then opened here to sweep).
  let killNo = 0
  async function kill (sweeps) {
    const k = ++killNo
    const name = `victim-${k}`
    // It says 'ready' from inside its callback: it holds the lock.
    const [holder] = await startProcesses('scope-kill', [{ ...where, me: k, role: 'holder', name }])
    waiter.send({ name })
    await waiter.next(10000, `kill ${k}: the waiter queueing`)
    // Let the waiter go idle, as a waiter usually is.
    await sleep(5)
    const killed = hostNs()
    holder.child.kill('SIGKILL')
    let granted = null
    try {
      granted = (await waiter.next(bound, `kill ${k}`)).granted - killed
    } catch (error) {
      if (lockfile || !(error instanceof HangError)) throw error
      const opened = hostNs()
      await (await open(implId, where)).close()
      const { granted: at } = await waiter.next(SWEEP_MS, `kill ${k}: the waiter, after the scope was opened again to sweep the dead holder`)
      sweeps.push(at - opened)
    }
    await holder.exit
    return granted
  }

  // The warm-up kill is not timed, but a late one counts: two late kills
  // in all are enough to tell.
  const sweeps = []
  let late = 0
  try {
    return await measure(async (m) => {
      const samples = []
      const n = lockfile ? lockfileKills : kills
      for (let i = 0; i < n && late < LATE_STOP; i++) {
        const t = await kill(sweeps)
        if (t === null) late++
        else samples.push(t)
      }
      m.kills = samples.length + late
      m.late = late
      m.samples = samples.length
      if (samples.length) {
        m.p50 = percentile(samples, 50)
        m.p99 = percentile(samples, 99)
      }
      if (sweeps.length) m.sweep = median(sweeps)
    }, {
      ...ctx,
      rounds: 1,
      warmup: async () => { if (await kill(sweeps) === null) late++ }
    })
  } finally {
    await stopProcesses([waiter])
  }
}

// In each process: the waiter, or a holder (which never lets go).
async function proc ({ role, impl, dir, scope, stale, name }) {
  if (role === 'holder') {
    const locks = await open(impl, { dir, scope, stale })
    return locks.request(name, () => {
      process.send('ready')
      return new Promise(() => {})
    })
  }
  // proper-lockfile: waiting once an attempt found the lock taken.
  let waiting = null
  const onBusy = () => {
    if (waiting === null) return
    process.send({ queued: waiting })
    waiting = null
  }
  const locks = await open(impl, { dir, scope, stale, onBusy })
  process.on('message', ({ name }) => {
    locks.request(name, () => {
      process.send({ granted: hostNs() })
    })
    if (impl === 'proper-lockfile') waiting = name
    else process.send({ queued: name })
  })
  process.send('ready')
}

// The kill-to-grant rows: a figure when every kill was released within
// the bound, else 'no prompt release'.
function killCell (outcome, metric) {
  if (!outcome) return undefined
  if (outcome.fail) return { fail: outcome.fail, detail: outcome.detail }
  const r = outcome.result
  if (r.late > 0) {
    return {
      fail: 'no prompt release',
      detail: `${r.late} of ${r.kills} kills: no grant within ${BOUND_MS / 1000} s (needs the death watcher); ` +
        `opening the scope in another process released it${r.sweep ? ` ${(r.sweep / 1e6).toFixed(1)} ms after the open` : ''}`
    }
  }
  return typeof r[metric] === 'number' ? { value: r[metric] } : undefined
}

function rows (get, opts) {
  const out = []
  const kill = opts.windows ? 'kill' : 'SIGKILL'
  for (const [metric, what] of [['p50', 'p50'], ['p99', 'p99']]) {
    const cells = {}
    for (const column of ['web-locks', 'proper-lockfile', 'web-locks@wine']) {
      const cell = killCell(get('scope/kill', COLUMNS[column]), metric)
      if (cell) cells[column] = cell
    }
    out.push({ id: `scope.kill.${metric}`, label: `${kill} of the holder -> next grant in another process, ${what}`, unit: 'ns', better: 'lower', cells })
  }
  const cells = {}
  for (const column of ['web-locks', 'web-locks@wine']) {
    const o = get('scope/kill', COLUMNS[column])
    if (o && o.result && o.result.sweep) cells[column] = { value: o.result.sweep }
  }
  if (Object.keys(cells).length) {
    out.push({ id: 'scope.kill.sweep', label: 'not released: another process opens the scope -> next grant', unit: 'ns', better: 'lower', cells })
  }
  return out
}

module.exports = {
  section: `release after SIGKILL of the holder (kill -> the waiting process's callback; proper-lockfile: stale ${LOCKFILE_STALE / 1000} s, full runs)`,
  windowsSection: 'release after the kill of the holder (SIGKILL on Linux, TerminateProcess under wine; kill -> the waiting process\'s callback)',
  table: 'scope',
  points,
  run,
  proc,
  rows
}
