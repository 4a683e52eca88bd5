'use strict'

// Where the PostgreSQL cases run: their client processes and the server,
// each pinned to CPUs with taskset (util-linux), in two placements that
// the ratios move with: the client and the server sharing one CPU (each
// waits for the other's time slice), and each on a CPU of its own. A
// server of WEB_LOCKS_BENCH_POSTGRES, a machine with one CPU or without
// taskset gets one placement, unpinned, and the run says so.

const fs = require('fs')
const os = require('os')
const { execFileSync } = require('child_process')

const PINNED = [
  { id: '1cpu', short: '1 CPU', what: 'client processes and server on CPU 0', client: '0', server: '0' },
  { id: '2cpu', short: '2 CPUs', what: 'client processes on CPU 1, server on CPU 0', client: '1', server: '0' }
]

function hasTaskset () {
  try {
    execFileSync('taskset', ['-V'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

// The placements of this run, and why there is only one if so.
function placements (server) {
  const why = server.pid === undefined
    ? 'the server is not this run\'s (WEB_LOCKS_BENCH_POSTGRES)'
    : os.availableParallelism() < 2 ? 'this process may use one CPU only' : !hasTaskset() ? 'no taskset (util-linux)' : null
  if (why !== null) return { list: [{ id: null, short: null, what: `unpinned: ${why}` }], why }
  return { list: PINNED, why: null }
}

// The pids of a process and its descendants (the postmaster forks one
// backend per connection; they inherit its CPUs).
function tree (root) {
  const children = new Map()
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (!children.has(ppid)) children.set(ppid, [])
      children.get(ppid).push(Number(entry))
    } catch {
      // ended meanwhile
    }
  }
  const out = []
  const walk = (pid) => {
    out.push(pid)
    for (const child of children.get(pid) || []) walk(child)
  }
  walk(root)
  return out
}

// Pins the server (every thread of its processes) to the placement's CPUs.
function pinServer (placement, server) {
  if (placement.id === null) return
  for (const pid of tree(server.pid)) {
    try {
      execFileSync('taskset', ['-a', '-p', '-c', placement.server, String(pid)], { stdio: 'ignore' })
    } catch (error) {
      // A backend that ended meanwhile; else (a CPU this process may not
      // use) the placement would be a lie.
      if (fs.existsSync(`/proc/${pid}`)) throw new Error(`taskset could not pin the server's process ${pid} to CPU ${placement.server}: ${error.message}`)
    }
  }
}

// The command that runs bin with args in the placement.
function command (placement, bin, args) {
  if (placement === undefined || placement.id === null) return [bin, args]
  return ['taskset', ['-c', placement.client, bin, ...args]]
}

module.exports = { placements, pinServer, command }
