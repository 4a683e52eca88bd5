'use strict'

// Runs one measurement in a fresh child process and survives whatever the
// implementation under test does to it: a throw ('fails: RangeError'), a
// crash ('crashes: SIGABRT'), a hang (no CPU used and nothing printed for
// idleMs, or a HangError from the child's own time limits: 'hangs') or a
// run past timeoutMs while still busy ('too slow'). Metrics the child
// printed before it failed ('@@partial') are kept. A child whose work is
// done by processes it forked (the cross-process cases) uses little CPU
// itself: it prints '@@progress' when they report.

const fs = require('fs')
const { spawn } = require('child_process')

// Exit codes 128 + n of a process that a signal killed (Node's abort()).
const SIGNALS = { 4: 'SIGILL', 5: 'SIGTRAP', 6: 'SIGABRT', 7: 'SIGBUS', 8: 'SIGFPE', 9: 'SIGKILL', 11: 'SIGSEGV' }

// CPU time used so far by the process and all its threads, or null.
function cpuTicks (pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return Number(fields[11]) + Number(fields[12]) // utime, stime
  } catch {
    return null
  }
}

function parse (stdout) {
  let result = null
  let partial = null
  let error = null
  for (const line of stdout.split('\n')) {
    try {
      if (line.startsWith('@@result ')) result = JSON.parse(line.slice(9))
      else if (line.startsWith('@@partial ')) partial = JSON.parse(line.slice(10))
      else if (line.startsWith('@@error ')) error = JSON.parse(line.slice(8))
    } catch {
      // a line cut short by a crash
    }
  }
  return { result, partial, error }
}

function runChild (bin, args, { timeoutMs, idleMs = 5000, env }) {
  return new Promise((resolve) => {
    const started = Date.now()
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], env })
    let stdout = ''
    let stderr = ''
    let killedFor = null
    let lastCpu = null
    let lastProgress = started
    child.stdout.on('data', (d) => {
      stdout += d
      lastProgress = Date.now()
    })
    child.stderr.on('data', (d) => { stderr = (stderr + d).slice(-20000) })

    const watchdog = setInterval(() => {
      const now = Date.now()
      const cpu = cpuTicks(child.pid)
      if (cpu !== null && cpu !== lastCpu) {
        lastCpu = cpu
        lastProgress = now
      }
      if (cpu !== null && now - lastProgress > idleMs) kill('hangs')
      else if (now - started > timeoutMs) kill('too slow')
    }, 250)

    function kill (why) {
      if (killedFor) return
      killedFor = why
      child.kill('SIGKILL')
    }

    let done = false
    function finish (outcome) {
      if (done) return
      done = true
      clearInterval(watchdog)
      outcome.wallMs = Date.now() - started
      resolve(outcome)
    }

    child.on('error', (error) => finish({ fail: 'fails: spawn', detail: error.message }))
    child.on('close', (code, signal) => {
      const { partial } = parse(stdout)
      if (killedFor === 'hangs') {
        return finish({ fail: 'hangs', detail: `no CPU used for ${idleMs / 1000} s, killed`, partial })
      }
      if (killedFor === 'too slow') {
        return finish({ fail: 'too slow', detail: `still busy after ${Math.round(timeoutMs / 1000)} s, killed`, partial })
      }
      finish(outcomeOf(stdout, stderr, code, signal))
    })
  })
}

// The outcome of a child that ended by itself: its result, or how it failed.
function outcomeOf (stdout, stderr, code, signal) {
  const { result, partial, error } = parse(stdout)
  if (result && code === 0) return { result }
  if (error && error.name === 'HangError') return { fail: 'hangs', detail: error.message, partial }
  if (error) {
    return { fail: `fails: ${error.name}`, detail: `${error.name}: ${error.message}${error.where ? ` (${error.where})` : ''}`, partial }
  }
  const fatal = /(FATAL ERROR[^\n]*|Assertion failed[^\n]*|Check failed[^\n]*|Segmentation fault[^\n]*|[^\n]*Assertion `[^\n]*)/.exec(stderr)
  const lastLine = stderr.trim().split('\n').filter(Boolean).slice(-1)[0] || ''
  const detail = (fatal ? fatal[1] : lastLine).trim().slice(0, 200)
  const crashSignal = signal || SIGNALS[code - 128]
  if (crashSignal) return { fail: `crashes: ${crashSignal}`, detail, partial }
  return { fail: `fails: exit ${code}`, detail, partial }
}

module.exports = { runChild, parse, outcomeOf }
