'use strict'

// For test/runners.test.js: a user's project with the package installed as
// npm installs it, and the runners run in it as child processes.

const { spawn } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..', '..')
const FIXTURE = path.join(__dirname, 'fixture')
const WORK = path.join(__dirname, 'work') // gitignored

// A copy of test/runners/fixture in test/runners/work/, whose
// node_modules/web-locks is a copy of what the package ships (package.json
// "files", and the addon node-gyp-build finds here, built or prebuilt, at
// the same place). A copy, not a symlink: vitest
// would inline a package whose real path is outside node_modules. Being
// under the repository, the project finds the runners and their
// environments (jest-environment-jsdom, jsdom, happy-dom) in the
// repository's node_modules, as a user's project finds them in its own.
//
// WEB_LOCKS_RUNNERS_PACKAGE names another checkout to copy the package from
// (built there), e.g. an older commit, to see what these tests catch.
function makeProject () {
  const from = process.env.WEB_LOCKS_RUNNERS_PACKAGE ? path.resolve(process.env.WEB_LOCKS_RUNNERS_PACKAGE) : ROOT
  // The addon node-gyp-build loads there: a build, or a prebuild.
  let addon
  try {
    addon = require('node-gyp-build').resolve(from)
  } catch {
    throw new Error(`no addon in ${from}: npm run build`)
  }
  fs.mkdirSync(WORK, { recursive: true })
  const dir = fs.mkdtempSync(path.join(WORK, 'project-'))
  fs.cpSync(FIXTURE, dir, { recursive: true })
  const pkg = path.join(dir, 'node_modules', 'web-locks')
  const manifest = JSON.parse(fs.readFileSync(path.join(from, 'package.json'), 'utf8'))
  for (const entry of ['package.json', 'README.md', 'LICENSE', ...manifest.files]) {
    if (fs.existsSync(path.join(from, entry))) fs.cpSync(path.join(from, entry), path.join(pkg, entry), { recursive: true })
  }
  fs.cpSync(addon, path.join(pkg, path.relative(from, addon)))
  // mocha imports --require modules from where it is installed: next to
  // the package, as in a user's project (its dependencies are found in the
  // repository's node_modules, above).
  fs.cpSync(path.dirname(require.resolve('mocha/package.json')), path.join(dir, 'node_modules', 'mocha'), { recursive: true })
  return dir
}

function removeProject (dir) {
  if (dir && !process.env.WEB_LOCKS_KEEP_RUNNERS) fs.rmSync(dir, { recursive: true, force: true })
}

// The environment of a runner: this one's, without what would make a child
// think it is part of this run.
function childEnv (extra) {
  const env = Object.assign({}, process.env, { FORCE_COLOR: '0' }, extra)
  delete env.NODE_TEST_CONTEXT
  delete env.NODE_OPTIONS
  delete env.NO_COLOR
  delete env.JEST_WORKER_ID
  delete env.VITEST
  return env
}

// Runs `node args...` (the node running this test) in a process group of its
// own. Resolves when it exits, or when `timeout` ms have passed: then it is
// killed, with everything it started, and `timedOut` is set. Whatever of the
// group remains after the child exited (a runner's worker) is killed too.
function run (args, { cwd, env, timeout = 60000 }) {
  return new Promise((resolve, reject) => {
    const started = Date.now()
    const child = spawn(process.execPath, args, { cwd, env: childEnv(env), detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (s) => { stdout += s })
    child.stderr.setEncoding('utf8').on('data', (s) => { stderr += s })
    let timedOut = false
    let exit
    const killGroup = () => {
      try {
        process.kill(-child.pid, 'SIGKILL')
      } catch {}
    }
    const timer = setTimeout(() => {
      timedOut = true
      killGroup()
    }, timeout)
    child.on('error', (error) => {
      clearTimeout(timer)
      reject(error)
    })
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      exit = { code, signal, ms: Date.now() - started }
      killGroup()
    })
    child.on('close', () => {
      resolve(Object.assign({ args, stdout, stderr, timedOut }, exit))
    })
  })
}

// The tail of a run's output, for a failure message.
function output (r, max = 6000) {
  const tail = (s) => (s.length > max ? `...${s.slice(-max)}` : s)
  return `\n$ node ${r.args.join(' ')}\nexit ${r.code}${r.signal ? ` (${r.signal})` : ''}${r.timedOut ? ' KILLED on timeout' : ''} after ${r.ms} ms\n--- stdout\n${tail(r.stdout)}\n--- stderr\n${tail(r.stderr)}`
}

// Whether version (x.y.z) satisfies an engines range of the forms npm
// packages use: ">=a.b.c", "^a.b.c", joined by "||".
function satisfies (version, range) {
  const v = version.split('.').map(Number)
  const cmp = (a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2]
  return range.split('||').some((part) => part.trim().split(/\s+/).every((c) => {
    const m = /^(>=|\^|>|<|<=)?v?(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(c)
    if (!m) return true
    const w = [Number(m[2]), Number(m[3] || 0), Number(m[4] || 0)]
    switch (m[1]) {
      case '>=': return cmp(v, w) >= 0
      case '>': return cmp(v, w) > 0
      case '<': return cmp(v, w) < 0
      case '<=': return cmp(v, w) <= 0
      case '^': return v[0] === w[0] && cmp(v, w) >= 0
      default: return cmp(v, w) === 0
    }
  }))
}

// Why the package `name` (from the repository's node_modules) does not run
// on this node, or null if it does.
function unsupported (name) {
  let manifest
  try {
    manifest = require(`${name}/package.json`)
  } catch {
    return `${name} is not installed`
  }
  const range = manifest.engines && manifest.engines.node
  if (range && !satisfies(process.versions.node, range)) return `${name}@${manifest.version} needs node ${range}`
  return null
}

module.exports = { ROOT, makeProject, removeProject, run, output, unsupported }
