'use strict';
// `web-locks inspect <scope>` (bin/web-locks.js, lib/inspect.js): a look
// inside a machine-wide scope, from a process of its own, that changes
// nothing. Its holders and waiters are real child processes, each its own
// agent of the scope.
const assert = require('node:assert/strict');
const childProcess = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { once } = require('node:events');
const { scopeName, PKG } = require('./fixtures/util');

const CLI = path.join(PKG, 'bin', 'web-locks.js');
// Where the package has the machine-wide manager (Windows: under wine here).
const machine = ['linux', 'darwin', 'win32'].includes(process.platform);

// A child process with the scope open, told what to do line by line on its
// stdin ("hold <name> <mode>", "wait <name> <mode>", either with the name
// of a lock it holds after them: the request is made inside that lock's
// callback), which answers each line once the request is in the manager;
// it ends when killed. It watches for deadlocks (WEB_LOCKS_DEADLOCKS).
const AGENT = `
const { openLockManager } = require(process.argv[1]);
const { AsyncResource } = require('node:async_hooks');
const readline = require('node:readline');
(async () => {
  const m = await openLockManager(process.argv[2], { dir: process.argv[3] });
  setInterval(() => {}, 1 << 30);
  const insides = new Map();
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const [what, name, mode, inside] = line.split(' ');
    let granted;
    const got = new Promise((resolve) => { granted = resolve; });
    const make = () => m.request(name, { mode }, () => {
      insides.set(name, AsyncResource.bind((fn) => fn()));
      granted();
      return new Promise(() => {});
    });
    if (inside === undefined) make(); else insides.get(inside)(make);
    if (what === 'hold') await got;
    await m.query();
    process.stdout.write('ok ' + line + '\\n');
  }
})();
`;

// Resolves with the child's next line on stdout, or rejects after 10 s.
function nextLine(child) {
  return new Promise((resolve, reject) => {
    let buffered = child.buffered || '';
    const timer = setTimeout(() => done(new Error(`no line from pid ${child.pid} in 10 s`)), 10000);
    function onData(chunk) {
      buffered += chunk;
      const at = buffered.indexOf('\n');
      if (at >= 0) {
        child.buffered = buffered.slice(at + 1);
        done(null, buffered.slice(0, at));
      }
    }
    function onExit(code, signal) {
      done(new Error(`pid ${child.pid} ended (${code}, ${signal}) before its line`));
    }
    function done(error, line) {
      clearTimeout(timer);
      child.stdout.off('data', onData);
      child.off('exit', onExit);
      if (error) reject(error); else resolve(line);
    }
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', onData);
    child.once('exit', onExit);
    if (buffered.includes('\n')) onData('');
  });
}

(machine ? describe : describe.skip)('web-locks inspect (machine-wide)', function () {
  this.timeout(30000);
  let dir;
  const children = [];

  before(function () {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-inspect-'));
  });
  afterEach(async function () {
    for (const child of children.splice(0)) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await once(child, 'exit');
      }
    }
  });
  after(function () {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  function agent(scope) {
    const env = Object.assign({}, process.env, { WEB_LOCKS_DEADLOCKS: 'watch' });
    const child = childProcess.spawn(process.execPath, ['-e', AGENT, PKG, scope, dir], { stdio: ['pipe', 'pipe', 'inherit'], env });
    children.push(child);
    return child;
  }

  async function tell(child, line) {
    child.stdin.write(line + '\n');
    assert.equal(await nextLine(child), 'ok ' + line);
  }

  async function kill(child) {
    child.kill('SIGKILL');
    await once(child, 'exit');
  }

  // The command's stdout, stderr and exit code.
  function inspect(...args) {
    return new Promise((resolve) => {
      childProcess.execFile(process.execPath, [CLI, 'inspect', ...args], { timeout: 20000 }, (error, stdout, stderr) => {
        resolve({ stdout, stderr, code: error ? (error.code ?? error.signal) : 0 });
      });
    });
  }

  async function inspectJson(scope) {
    const { stdout, stderr, code } = await inspect(scope, '--dir', dir, '--json');
    assert.equal(code, 0, stderr);
    return JSON.parse(stdout);
  }

  const file = (scope) => path.join(dir, `web-locks.${scope}`);

  it('shows a holder and its waiters in two processes, in queue order, alive; --json has the documented shape', async function () {
    const scope = scopeName('inspect-live');
    const a = agent(scope);
    const b = agent(scope);
    await tell(a, 'hold x exclusive');
    await tell(b, 'wait x exclusive');
    await tell(a, 'wait x shared');
    const doc = await inspectJson(scope);
    assert.deepEqual(Object.keys(doc), ['scope', 'file', 'host', 'at', 'held', 'pending', 'cycles']);
    assert.equal(doc.scope, scope);
    assert.equal(doc.file, file(scope));
    assert.equal(doc.host, os.hostname());
    assert.ok(!Number.isNaN(Date.parse(doc.at)));
    assert.deepEqual(doc.cycles, []);
    const x = (entries) => entries.filter((e) => e.name === 'x');
    assert.deepEqual(x(doc.held).map((e) => [e.pid, e.mode, e.alive]), [[a.pid, 'exclusive', true]]);
    assert.deepEqual(x(doc.pending).map((e) => [e.pid, e.mode, e.alive]), [[b.pid, 'exclusive', true], [a.pid, 'shared', true]]);
    for (const e of [...doc.held, ...doc.pending]) {
      assert.deepEqual(Object.keys(e).sort(), ['alive', 'clientId', 'elapsed', 'host', 'mode', 'name', 'parent', 'pid', 'serial'].sort());
      assert.equal(typeof e.clientId, 'string');
      assert.ok(Number.isInteger(e.serial) && e.serial > 0);
      assert.equal(e.parent, 0);
      assert.ok(e.elapsed >= 0 && e.elapsed < 60000, `elapsed ${e.elapsed}`);
      assert.equal(e.host, os.hostname());
    }
    assert.ok(doc.pending[0].serial < doc.pending[1].serial);

    const { stdout, code } = await inspect(scope, '--dir', dir);
    assert.equal(code, 0);
    const lines = stdout.split('\n');
    const at = lines.indexOf('"x"');
    assert.ok(at > 0, stdout);
    assert.match(lines[at + 1], new RegExp(`^  held by   exclusive  client \\S+  pid ${a.pid}  on \\S+  for \\d`));
    assert.match(lines[at + 2], new RegExp(`^  waiting 1 exclusive  client \\S+  pid ${b.pid}  on `));
    assert.match(lines[at + 3], new RegExp(`^  waiting 2 shared     client \\S+  pid ${a.pid}  on `));
    assert.doesNotMatch(stdout, /dead/);
  });

  it('shows a SIGKILLed holder dead (not yet swept), and changes no byte of the file', async function () {
    const scope = scopeName('inspect-dead');
    const a = agent(scope);
    await tell(a, 'hold x exclusive');
    await tell(a, 'wait x shared');
    // The only process of the scope: no one sweeps after it.
    await kill(a);
    const before = fs.readFileSync(file(scope));
    const doc = await inspectJson(scope);
    assert.deepEqual(doc.held.filter((e) => e.name === 'x').map((e) => [e.pid, e.alive]), [[a.pid, false]]);
    assert.deepEqual(doc.pending.map((e) => [e.pid, e.alive]), [[a.pid, false]]);
    const { stdout, code } = await inspect(scope, '--dir', dir);
    assert.equal(code, 0);
    assert.match(stdout, new RegExp(`held by   exclusive  client \\S+  pid ${a.pid}  on \\S+  for [^\\n]*  dead \\(not yet swept\\)\\n`));
    assert.ok(fs.readFileSync(file(scope)).equals(before), 'the file is as it was');
    // And still unswept: the next look sees the same.
    assert.deepEqual((await inspectJson(scope)).held.map((e) => e.alive), doc.held.map(() => false));
  });

  it('names a deadlock of two processes, each waiting inside its lock for the other\'s', async function () {
    const scope = scopeName('inspect-cycle');
    const a = agent(scope);
    const b = agent(scope);
    await tell(a, 'hold x exclusive');
    await tell(b, 'hold y exclusive');
    await tell(a, 'wait y exclusive x');
    await tell(b, 'wait x shared y');
    const doc = await inspectJson(scope);
    const [ca, cb] = [doc.held.find((e) => e.name === 'x').clientId, doc.held.find((e) => e.name === 'y').clientId];
    assert.equal(doc.cycles.length, 1);
    const steps = [...doc.cycles[0]].sort((p, q) => (p.name < q.name ? -1 : 1));
    assert.deepEqual(steps.map(({ name, mode, clientId, waitsFor, pid }) => ({ name, mode, clientId, waitsFor, pid })), [
      { name: 'x', mode: 'shared', clientId: cb, waitsFor: ca, pid: b.pid },
      { name: 'y', mode: 'exclusive', clientId: ca, waitsFor: cb, pid: a.pid },
    ]);
    const { stdout } = await inspect(scope, '--dir', dir);
    assert.match(stdout, new RegExp(`\\ndeadlock: .*"y" \\(exclusive\\) by client ${ca} \\(pid ${a.pid}\\) waits for ${cb}`));
    // Two requests waiting on each other's locks, made outside them: none.
    const scope2 = scopeName('inspect-nocycle');
    const c = agent(scope2);
    const d = agent(scope2);
    await tell(c, 'hold x exclusive');
    await tell(d, 'hold y exclusive');
    await tell(c, 'wait y exclusive');
    await tell(d, 'wait x exclusive');
    assert.deepEqual((await inspectJson(scope2)).cycles, []);
  });

  it('--watch looks again until it is ended', async function () {
    const scope = scopeName('inspect-watch');
    const a = agent(scope);
    await tell(a, 'hold x exclusive');
    const watch = childProcess.spawn(process.execPath, [CLI, 'inspect', scope, '--dir', dir, '--json', '--watch', '100'], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(watch);
    const first = JSON.parse(await nextLine(watch));
    const second = JSON.parse(await nextLine(watch));
    assert.equal(first.held[0].pid, a.pid);
    assert.equal(second.held[0].pid, a.pid);
    assert.ok(Date.parse(second.at) > Date.parse(first.at));
    watch.kill('SIGINT');
    const [code, signal] = await once(watch, 'exit');
    // Windows has no SIGINT to send: kill() ends the process.
    if (process.platform === 'win32') assert.equal(signal, 'SIGINT');
    else assert.equal(code, 0);
  });

  it('says there is no such scope (exit 1), and refuses a bad command line (exit 2)', async function () {
    const scope = scopeName('inspect-none');
    const none = await inspect(scope, '--dir', dir);
    assert.equal(none.code, 1);
    assert.equal(none.stderr, `web-locks inspect: no scope "${scope}" at ${file(scope)} (no process has opened it there; another directory is given with --dir)\n`);
    assert.ok(!fs.existsSync(file(scope)), 'nothing created');
    for (const args of [[], ['a/b'], [scope, '--bogus'], [scope, '--watch', '5'], [scope, '--dir'], [scope, '--schema', 's']]) {
      const r = await inspect(...args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /^web-locks inspect: /);
    }
  });

  it('reads a scope whose file is corrupt as such (exit 3), writing nothing', async function () {
    const scope = scopeName('inspect-corrupt');
    fs.writeFileSync(file(scope), Buffer.alloc(8192, 0x5a), { mode: 0o600 });
    const r = await inspect(scope, '--dir', dir);
    assert.equal(r.code, 3);
    assert.match(r.stderr, /is not a web-locks manager file/);
    assert.ok(fs.readFileSync(file(scope)).equals(Buffer.alloc(8192, 0x5a)));
  });
});

describe('web-locks inspect --postgres', function () {
  this.timeout(30000);
  const schema = `wl_inspect_${process.pid}`;
  let url;
  let admin;
  const opened = [];

  before(async function () {
    const { postgres } = require('./fixtures/postgres');
    const pg = require('pg');
    ({ url } = await postgres());
    admin = new pg.Client(url);
    await admin.connect();
  });
  after(async function () {
    for (const m of opened.splice(0)) await m.close();
    if (admin) {
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    }
  });

  function inspect(...args) {
    return new Promise((resolve) => {
      childProcess.execFile(process.execPath, [CLI, 'inspect', ...args], { timeout: 20000 }, (error, stdout, stderr) => {
        resolve({ stdout, stderr, code: error ? (error.code ?? error.signal) : 0 });
      });
    });
  }

  it('shows a PostgreSQL scope\'s holder and waiter, each with its host, alive', async function () {
    const { openLockManager } = require(PKG);
    const scope = scopeName('inspect-pg');
    const a = await openLockManager(scope, { postgres: url, schema });
    const b = await openLockManager(scope, { postgres: url, schema });
    opened.push(a, b);
    let release;
    const granted = new Promise((resolve) => {
      a.request('x', () => { resolve(); return new Promise((r) => { release = r; }); });
    });
    await granted;
    const waiting = b.request('x', () => {});
    await b.query();
    const { stdout, stderr, code } = await inspect(scope, '--postgres', url, '--schema', schema, '--json');
    assert.equal(code, 0, stderr);
    const doc = JSON.parse(stdout);
    assert.deepEqual(Object.keys(doc), ['scope', 'schema', 'host', 'at', 'held', 'pending', 'cycles']);
    assert.equal(doc.schema, schema);
    const shown = (e) => [e.name, e.pid, e.host, e.alive];
    assert.deepEqual(doc.held.map(shown), [['x', process.pid, os.hostname(), true]]);
    assert.deepEqual(doc.pending.map(shown), [['x', process.pid, os.hostname(), true]]);
    const text = await inspect(scope, '--postgres', url, '--schema', schema);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, new RegExp(`schema ${schema}`));
    assert.match(text.stdout, /\n {2}held by {3}exclusive {2}client \S+ {2}pid \d+ {2}on \S+ {2}for /);
    release();
    await waiting;
    const none = await inspect(scope, '--postgres', url, '--schema', `wl_none_${process.pid}`);
    assert.equal(none.code, 1);
    assert.match(none.stderr, /no lock manager in the schema/);
  });
});

describe('web-locks inspect: the text form', function () {
  // Whoever can write a scope writes its clientIds (a PostgreSQL client its
  // host): escape sequences and bidirectional marks reach the terminal
  // escaped, not as they are.
  it('escapes control characters and bidirectional marks from the file', function () {
    const { formatText } = require(path.join(PKG, 'lib', 'inspect.js'));
    const text = formatText({
      scope: 's', file: '/x', host: 'h', at: 'now', pending: [], cycles: [],
      held: [{ name: 'a\u009b2J', mode: 'exclusive', clientId: '\u001b]0;title\u0007', pid: 1, host: 'h\u202e', elapsed: 5, alive: true }],
    });
    assert.doesNotMatch(text, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e]/);
    assert.match(text, /client \\u001b\]0;title\\u0007  pid 1  on h\\u202e/);
    assert.match(text, /"a\\u009b2J"/);
  });
});

