'use strict'

// web-locks/polyfill under the real test runners, as a user installs them:
// jest (node and jsdom environments, in band and with workers), vitest
// (node, jsdom and happy-dom environments; forks and threads pools),
// node:test (--require and --import) and mocha (serial and --parallel), in
// a project whose node_modules/web-locks is a copy of what the package
// ships (test/runners/harness.js). The fixture files (test/runners/fixture)
// check, in each test file's own globals:
//   1. navigator.locks works, also under happy-dom, with the environment's
//      AbortController;
//   2. navigator.locks instanceof LockManager, the lock instanceof Lock and
//      the promises are the file's realm's, in every file of a worker;
//   3. a run that leaks a held lock, and times out waiting for it, ends;
//   4. errors are the environment's DOMException;
//   5. web-locks/polyfill/force installs this package's navigator.locks
//      where Node has its own (24+), and web-locks/polyfill keeps Node's.
// Each runner writes its results as JSON; a failure shows the fixture tests
// that failed and the runner's output.
//
//   npx mocha --no-config --timeout 120000 test/runners.test.js
//   WEB_LOCKS_KEEP_RUNNERS=1 keeps the project in test/runners/work/.

const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { makeProject, removeProject, run, output, unsupported } = require('./runners/harness')

// How long a run that leaked a lock may take to end (item 3).
const HANG_LIMIT = 30000
const RUN_LIMIT = 100000

const JEST = path.join(path.dirname(require.resolve('jest/package.json')), 'bin', 'jest.js')
const VITEST = path.join(path.dirname(require.resolve('vitest/package.json')), 'vitest.mjs')

let project

// --- the runs -------------------------------------------------------------

function jest (key, { env = 'node', entry = 'polyfill', files, args = [], resetModules = false, workers = false, timeout = RUN_LIMIT }) {
  const out = path.join(project, `out-${key}.json`)
  const config = {
    rootDir: project,
    roots: ['<rootDir>/jest'],
    testEnvironment: env,
    setupFiles: [`web-locks/${entry}`],
    resetModules,
    // A cache of its own per run: jest runs in band whatever -w says when
    // the cache remembers the files as fast.
    cacheDirectory: path.join(project, '.jest-cache', key),
    watchman: false
  }
  return run([JEST, '--config', JSON.stringify(config), '--ci', '--json', '--outputFile', out,
    ...(workers ? ['-w', '2'] : ['--runInBand']), ...args, '--runTestsByPath', ...files.map((f) => `jest/${f}`)], {
    cwd: project,
    timeout,
    env: {
      WEB_LOCKS_FIXTURE_ENTRY: entry,
      WEB_LOCKS_FIXTURE_ENV: env,
      WEB_LOCKS_FIXTURE_DRIVER_PID: String(process.pid),
      WEB_LOCKS_FIXTURE_JEST_WORKERS: workers ? '1' : ''
    }
  }).then((r) => Object.assign(r, { results: jsonResults(out) }))
}

function vitest (key, { pool, entry = 'polyfill', filters, timeout = RUN_LIMIT }) {
  const out = path.join(project, `out-${key}.json`)
  return run([VITEST, 'run', '--config', 'vitest.config.mjs', '--pool', pool,
    '--reporter', 'default', '--reporter', 'json', '--outputFile.json', out, ...filters], {
    cwd: project,
    timeout,
    env: { WEB_LOCKS_FIXTURE_ENTRY: entry, WEB_LOCKS_FIXTURE_RUN: key }
  }).then((r) => Object.assign(r, { results: jsonResults(out) }))
}

function nodeTest (key, { preload, entry = 'polyfill', files, timeout = RUN_LIMIT }) {
  return run([preload, `web-locks/${entry}`, '--test', '--test-reporter', './node-test/reporter.mjs',
    ...files.map((f) => `node-test/${f}`)], {
    cwd: project,
    timeout,
    env: { WEB_LOCKS_FIXTURE_ENTRY: entry }
  }).then((r) => Object.assign(r, { results: nodeTestResults(r.stdout) }))
}

function mocha (key, { entry = 'polyfill', files, args = [], timeout = RUN_LIMIT }) {
  const out = path.join(project, `out-${key}.json`)
  // --no-config: the project is inside this repository, whose .mocharc.json
  // mocha would find.
  return run([path.join(project, 'node_modules', 'mocha', 'bin', 'mocha.js'), '--no-config', '--no-package',
    '--require', `web-locks/${entry}`, '--reporter', 'json', '--reporter-option', `output=${out}`, ...args,
    ...files.map((f) => `mocha/${f}`)], {
    cwd: project,
    timeout,
    env: { WEB_LOCKS_FIXTURE_ENTRY: entry }
  }).then((r) => Object.assign(r, { results: mochaResults(out) }))
}

// --- their results, as [{ file, name, status, message }] -------------------

function readJson (file) {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'))
  } catch {
    return null
  }
}

// jest's --json and vitest's json reporter (the same shape).
function jsonResults (file) {
  const json = readJson(file)
  if (!json) return null
  const results = []
  for (const suite of json.testResults) {
    const name = path.relative(project, suite.name)
    for (const a of suite.assertionResults) {
      results.push({ file: name, name: a.fullName, status: a.status, message: a.failureMessages.join('\n') })
    }
    // A file that failed outside its tests (did not load, say).
    if (suite.status === 'failed' && !suite.assertionResults.some((a) => a.status === 'failed')) {
      results.push({ file: name, name: '(the file)', status: 'failed', message: suite.message })
    }
  }
  return results
}

function mochaResults (file) {
  const json = readJson(file)
  if (!json) return null
  const entry = (t, status) => ({
    file: t.file ? path.relative(project, t.file) : '?',
    name: t.fullTitle,
    status,
    message: t.err && t.err.message ? `${t.err.message}\n${t.err.stack || ''}` : ''
  })
  return [
    ...json.passes.map((t) => entry(t, 'passed')),
    ...json.failures.map((t) => entry(t, 'failed')),
    ...json.pending.map((t) => entry(t, 'pending'))
  ]
}

// The JSON lines of test/runners/fixture/node-test/reporter.mjs.
function nodeTestResults (stdout) {
  const results = []
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('{')) continue
    try {
      const t = JSON.parse(line)
      results.push(Object.assign(t, { file: t.file ? path.relative(project, t.file) : '?' }))
    } catch {}
  }
  return results.length ? results : null
}

// --- what a run must have done --------------------------------------------

function describeResults (results) {
  return results.map((t) => `  ${t.status} ${t.file}: ${t.name}${t.status === 'failed' ? `\n      ${String(t.message).split('\n').slice(0, 6).join('\n      ')}` : ''}`).join('\n')
}

// Every test of every file passed, each file ran some, and the runner
// ended by itself, with status 0. A file is named by its path, or by the
// label its checks' titles start with (node:test gives the file where a
// test is defined: checks.cjs).
function assertPassed (r, files) {
  assert.ok(!r.timedOut, `the run did not end in time${output(r)}`)
  assert.ok(r.results, `the runner reported no results${output(r)}`)
  const failed = r.results.filter((t) => t.status !== 'passed')
  if (failed.length) assert.fail(`tests that did not pass:\n${describeResults(failed)}\n${output(r)}`)
  for (const file of files) {
    assert.ok(r.results.some((t) => t.file === file || t.name.startsWith(`${file}: `)), `no results from ${file}:\n${describeResults(r.results)}${output(r)}`)
  }
  assert.equal(r.code, 0, `the runner's exit status${output(r)}`)
}

// Item 3: the run's second test failed by its timeout, the first passed,
// and the runner ended by itself within HANG_LIMIT.
function assertHangEnded (r, timedOut) {
  assert.ok(!r.timedOut, `the run did not end within ${HANG_LIMIT} ms of its start: a lock leaked by a test keeps it alive${output(r)}`)
  assert.ok(r.results, `the runner reported no results${output(r)}`)
  const leak = r.results.find((t) => /leaks a held lock/.test(t.name))
  const wait = r.results.find((t) => /waits for the leaked lock/.test(t.name))
  assert.ok(leak && wait, `the fixture's tests are not in the results:\n${describeResults(r.results)}${output(r)}`)
  assert.equal(leak.status, 'passed', `the leaking test:\n${describeResults([leak])}${output(r)}`)
  assert.equal(wait.status, 'failed', `the waiting test:\n${describeResults([wait])}${output(r)}`)
  assert.ok(timedOut(wait, r), `the waiting test failed, but not by its timeout:\n${describeResults([wait])}${output(r)}`)
  assert.notEqual(r.code, 0, `the runner's exit status${output(r)}`)
}

// --- the configurations: one mocha test each --------------------------------

const REALM_JEST = ['realm-1.test.js', 'realm-2.test.js', 'realm-3.test.js', 'realm-4.test.js', 'fake-timers.test.js']
const REALM_VITEST = ['node-1', 'node-2', 'jsdom-1', 'jsdom-2', 'happy-dom-1', 'happy-dom-2', 'fake-timers'].map((f) => `vitest/realm/${f}.test.mjs`)
const REALM_NODE_TEST = ['realm-1.test.js', 'realm-2.test.js', 'realm-3.test.js']
const REALM_MOCHA = ['realm-1.test.js', 'realm-2.test.js', 'realm-3.test.js']

const jestSkip = () => unsupported('jest')
const jsdomSkip = () => unsupported('jest') || unsupported('jest-environment-jsdom') || unsupported('jsdom')
// vitest runs on vite, whose engines are narrower (20.19+); happy-dom needs 20.
const vitestSkip = () => unsupported('vitest') || unsupported('vite') || unsupported('happy-dom') || unsupported('jsdom')
const importSkip = () => (process.allowedNodeEnvironmentFlags.has('--import') ? null : `node ${process.version} has no --import`)

// Items checked by the realm files: 1, 2, 4 and (Node 24+) 5's keeping of
// Node's navigator.locks. Item 2 fails where each file does not get its own
// LockManager, Lock and Promise (jest on Node 22+: one navigator for all
// the files of a worker). Item 4 fails where errors are Node's DOMException
// rather than jsdom's or happy-dom's.
const CONFIGS = [
  {
    title: 'jest, node environment, in band, resetModules, fake timers (items 1, 2, 4)',
    skip: jestSkip,
    run: (key) => jest(key, { files: REALM_JEST, resetModules: true }),
    check: (r) => assertPassed(r, REALM_JEST.map((f) => `jest/${f}`))
  },
  {
    title: 'jest, node environment, 2 workers (items 1, 2, 4)',
    skip: jestSkip,
    run: (key) => jest(key, { files: REALM_JEST, workers: true }),
    check: (r) => assertPassed(r, REALM_JEST.map((f) => `jest/${f}`))
  },
  {
    title: 'jest, jsdom environment, in band, resetModules, fake timers (items 1, 2, 4)',
    skip: jsdomSkip,
    run: (key) => jest(key, { env: 'jsdom', files: REALM_JEST, resetModules: true }),
    check: (r) => assertPassed(r, REALM_JEST.map((f) => `jest/${f}`))
  },
  {
    title: 'jest, jsdom environment, 2 workers (items 1, 2, 4)',
    skip: jsdomSkip,
    run: (key) => jest(key, { env: 'jsdom', files: REALM_JEST, workers: true }),
    check: (r) => assertPassed(r, REALM_JEST.map((f) => `jest/${f}`))
  },
  {
    // Item 5: fails until the web-locks/polyfill/force entry exists.
    title: 'jest, node environment, setupFiles web-locks/polyfill/force (item 5)',
    skip: jestSkip,
    run: (key) => jest(key, { entry: 'polyfill/force', files: REALM_JEST.slice(0, 3), resetModules: true }),
    check: (r) => assertPassed(r, REALM_JEST.slice(0, 3).map((f) => `jest/${f}`))
  },
  {
    title: 'jest --detectOpenHandles reports no WebLocks handle after completed requests',
    skip: jestSkip,
    run: (key) => jest(key, { files: ['handles.test.js'], args: ['--detectOpenHandles'] }),
    check: (r) => {
      assertPassed(r, ['jest/handles.test.js'])
      assert.doesNotMatch(r.stdout + r.stderr, /WebLocks/, `an open handle of the package${output(r)}`)
    }
  },
  {
    // Item 3: hangs where the leaked lock keeps the process alive.
    title: 'jest, in band without --forceExit, ends after a test leaked a lock and timed out waiting for it (item 3)',
    skip: jestSkip,
    run: (key) => jest(key, { files: ['hang/hang.test.js'], timeout: HANG_LIMIT }),
    check: (r) => assertHangEnded(r, (t) => /Exceeded timeout of 200 ms/.test(t.message))
  },
  {
    title: 'vitest, pool forks: node, jsdom and happy-dom environments, fake timers (items 1, 2, 4)',
    skip: vitestSkip,
    run: (key) => vitest(key, { pool: 'forks', filters: ['vitest/realm/'] }),
    check: (r) => assertPassed(r, REALM_VITEST)
  },
  {
    title: 'vitest, pool threads: node, jsdom and happy-dom environments, fake timers (items 1, 2, 4)',
    skip: vitestSkip,
    run: (key) => vitest(key, { pool: 'threads', filters: ['vitest/realm/'] }),
    check: (r) => assertPassed(r, REALM_VITEST)
  },
  {
    // Item 5: fails until the web-locks/polyfill/force entry exists.
    title: 'vitest, node environment, setup file importing web-locks/polyfill/force (item 5)',
    skip: vitestSkip,
    run: (key) => vitest(key, { pool: 'forks', entry: 'polyfill/force', filters: ['vitest/realm/node-'] }),
    check: (r) => assertPassed(r, REALM_VITEST.filter((f) => /node-/.test(f)))
  },
  ...['forks', 'threads'].map((pool) => ({
    // Item 3.
    title: `vitest, pool ${pool}, ends after a test leaked a lock and timed out waiting for it (item 3)`,
    skip: vitestSkip,
    run: (key) => vitest(key, { pool, filters: ['vitest/hang/'], timeout: HANG_LIMIT }),
    // vitest 4's json reporter loses the message; its default reporter says.
    check: (r) => assertHangEnded(r, (t, r) => /timed out in 200ms/.test(t.message + r.stdout + r.stderr))
  })),
  ...['--require', '--import'].flatMap((preload) => [
    {
      title: `node ${preload} web-locks/polyfill --test (items 1, 2, 4)`,
      skip: preload === '--import' ? importSkip : () => null,
      run: (key) => nodeTest(key, { preload, files: REALM_NODE_TEST }),
      check: (r) => assertPassed(r, ['node-test-1', 'node-test-2', 'node-test-3'])
    },
    {
      // Item 5: fails until the web-locks/polyfill/force entry exists.
      title: `node ${preload} web-locks/polyfill/force --test (item 5)`,
      skip: preload === '--import' ? importSkip : () => null,
      run: (key) => nodeTest(key, { preload, entry: 'polyfill/force', files: REALM_NODE_TEST.slice(0, 2) }),
      check: (r) => assertPassed(r, ['node-test-1', 'node-test-2'])
    }
  ]),
  {
    // Item 3. Where node:test's timeout timer does not keep the loop alive
    // (Node 18 to 22; not 26), the waiting test is cancelled once nothing
    // else does ("Promise resolution is still pending but the event loop has
    // already resolved") rather than timed out; either is the failure wanted.
    title: 'node --require web-locks/polyfill --test ends after a test leaked a lock and timed out waiting for it (item 3)',
    run: (key) => nodeTest(key, { preload: '--require', files: ['hang/hang.test.js'], timeout: HANG_LIMIT }),
    check: (r) => assertHangEnded(r, (t) => t.failureType === 'testTimeoutFailure' ||
      (t.failureType === 'cancelledByParent' && /event loop has already resolved/.test(t.message)))
  },
  {
    title: 'mocha --require web-locks/polyfill (items 1, 2, 4)',
    run: (key) => mocha(key, { files: REALM_MOCHA }),
    check: (r) => assertPassed(r, REALM_MOCHA.map((f) => `mocha/${f}`))
  },
  {
    title: 'mocha --require web-locks/polyfill --parallel (items 1, 2, 4)',
    run: (key) => mocha(key, { files: REALM_MOCHA, args: ['--parallel', '--jobs', '2'] }),
    check: (r) => assertPassed(r, REALM_MOCHA.map((f) => `mocha/${f}`))
  },
  {
    // Item 5: fails until the web-locks/polyfill/force entry exists.
    title: 'mocha --require web-locks/polyfill/force (item 5)',
    run: (key) => mocha(key, { entry: 'polyfill/force', files: REALM_MOCHA.slice(0, 2) }),
    check: (r) => assertPassed(r, REALM_MOCHA.slice(0, 2).map((f) => `mocha/${f}`))
  },
  {
    // Item 3.
    title: 'mocha without --exit ends after a test leaked a lock and timed out waiting for it (item 3)',
    run: (key) => mocha(key, { files: ['hang/hang.test.js'], timeout: HANG_LIMIT }),
    check: (r) => assertHangEnded(r, (t) => /Timeout of 200ms exceeded/.test(t.message))
  },
  {
    // Item 3's positive control: what must keep a thread alive still does.
    title: 'a worker_thread waiting for a lock the main thread holds is kept alive until it is released',
    run: () => run(['control/worker-waits.js'], { cwd: project, timeout: 30000 }),
    check: (r) => {
      assert.ok(!r.timedOut, `did not end${output(r)}`)
      assert.equal(r.code, 0, output(r))
      assert.deepEqual(JSON.parse(r.stdout), { exitedWhileWaiting: false, messages: ['requested', 'granted'], exitCode: 0 })
    }
  }
]

describe('the polyfill under test runners', function () {
  this.timeout(RUN_LIMIT + 20000)

  before(function () {
    project = makeProject()
  })

  after(function () {
    removeProject(project)
  })

  // Two runs at a time: a test starts its own run and the next one's.
  const started = new Map()
  function start (i) {
    for (; i < CONFIGS.length && CONFIGS[i].skip && CONFIGS[i].skip(); i++);
    if (i >= CONFIGS.length) return null
    if (!started.has(i)) {
      const p = CONFIGS[i].run(`run${i}`)
      p.catch(() => {}) // awaited by its test, if that runs
      started.set(i, p)
    }
    return started.get(i)
  }

  CONFIGS.forEach((config, i) => {
    const why = config.skip && config.skip()
    it(why ? `${config.title} [pending: ${why}]` : config.title, async function () {
      if (why) this.skip()
      const p = start(i)
      start(i + 1)
      config.check(await p)
    })
  })
})
