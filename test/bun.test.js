'use strict';
// What differs under Bun (scripts/test-runtimes.js runs the suites that apply
// under it, this file among them; under Node it is pending). Bun aborts the
// process when an addon polls a descriptor (uv_poll_init), so the
// machine-wide manager's agents are woken by other processes through a
// thread of the binding's own, the waker (src/binding/waker-linux.c, named
// wl-wake), instead of their loop's uv_poll: these tests are about it.
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { PKG, api, scopeName, holdOn } = require('./fixtures/util');

// A child process (this runtime) running `code` with PKG, SCOPE and DIR in
// its environment, told lines on its stdin (a global next() resolves with
// the next one; end() sends the last) and heard through its stdout: line(text) resolves once it
// printed that line, and rejects if it exits first; exited resolves with its
// exit code (or signal). Killed (SIGKILL) by kill().
const children = new Set();
function startChild(code, env) {
  const prelude = `
    const lines = [];
    let wanted = null;
    process.stdin.setEncoding('utf8').on('data', (text) => {
      lines.push(...text.split('\\n').filter(Boolean));
      if (wanted !== null && lines.length > 0) { const w = wanted; wanted = null; w(lines.shift()); }
    });
    globalThis.next = () => new Promise((resolve) => {
      if (lines.length > 0) resolve(lines.shift()); else wanted = resolve;
    });
  `;
  const child = spawn(process.execPath, ['-e', prelude + code], { env: Object.assign({}, process.env, { PKG }, env), stdio: ['pipe', 'pipe', 'pipe'] });
  const seen = [];
  let waiters = [];
  let buffer = '';
  let stderr = '';
  let exitCode;
  const wake = () => {
    waiters = waiters.filter((w) => {
      if (seen.includes(w.text)) w.resolve();
      else if (exitCode !== undefined) w.reject(new Error(`the child exited (${exitCode}) before printing ${w.text}; it printed ${JSON.stringify(seen)}\n${stderr}`));
      else return true;
      return false;
    });
  };
  child.stdout.setEncoding('utf8').on('data', (text) => {
    buffer += text;
    const parts = buffer.split('\n');
    buffer = parts.pop();
    seen.push(...parts);
    wake();
  });
  child.stderr.setEncoding('utf8').on('data', (text) => { stderr += text; });
  const exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      exitCode = code === null ? signal : code;
      children.delete(handle);
      setImmediate(() => {
        wake();
        resolve(exitCode);
      });
    });
  });
  const handle = {
    seen,
    exited,
    get stderr() { return stderr; },
    line: (text) => new Promise((resolve, reject) => {
      waiters.push({ text, resolve, reject });
      wake();
    }),
    send: (text) => child.stdin.write(text + '\n'),
    // The last line: the child's stdin no longer keeps it alive.
    end: (text) => child.stdin.end(text + '\n'),
    kill: () => { if (exitCode === undefined) child.kill('SIGKILL'); },
  };
  children.add(handle);
  return handle;
}

// How many waker threads this process runs (Linux names threads in
// /proc/self/task/*/comm).
function wakers() {
  const tasks = fs.readdirSync('/proc/self/task');
  return tasks.filter((tid) => {
    try {
      return fs.readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim() === 'wl-wake';
    } catch {
      return false; // the thread ended meanwhile
    }
  }).length;
}

function startWorker(code, workerData) {
  const worker = new Worker(`'use strict';
    const { parentPort, workerData } = require('node:worker_threads');
    const { openLockManager } = require(workerData.PKG);
    ${code}`, { eval: true, workerData: Object.assign({ PKG }, workerData) });
  const messages = [];
  let waiters = [];
  worker.on('message', (m) => {
    messages.push(m);
    waiters = waiters.filter((w) => !(messages.includes(w.m) && (w.resolve(), true)));
  });
  worker.on('error', () => {});
  return {
    worker,
    message: (m) => new Promise((resolve) => {
      if (messages.includes(m)) resolve();
      else waiters.push({ m, resolve });
    }),
  };
}

describe('under Bun', function () {
  this.timeout(20000);
  let dir;
  let scope;
  const opened = [];

  before(function () {
    if (process.versions.bun === undefined) this.skip();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-bun-'));
  });
  beforeEach(function () {
    scope = scopeName('bun');
  });
  afterEach(async function () {
    for (const child of children) child.kill();
    for (const m of opened.splice(0)) await m.close();
  });
  after(function () {
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  async function open(name = scope) {
    const m = await api().openLockManager(name, { dir });
    opened.push(m);
    return m;
  }

  it('a lock goes back and forth between two Bun processes, each woken by the other, and the child ends on its own', async function () {
    const m = await open();
    const child = startChild(`
      require(process.env.PKG).openLockManager(process.env.SCOPE, { dir: process.env.DIR }).then(async (m) => {
        await m.request('x', async () => {
          console.log('held');
          await next();
        });
        console.log('released');
        await m.request('x', () => console.log('held again'));
      });
    `, { SCOPE: scope, DIR: dir });
    await child.line('held');
    const mine = holdOn(m, 'x');
    child.end('drop');
    await mine.granted; // woken by the child's release
    await child.line('released');
    assert.deepEqual((await m.query()).pending.map((i) => i.name), ['x']);
    mine.release();
    await child.line('held again'); // woken by this process's release
    // Its waker's handle does not keep its loop alive: it ends by itself.
    assert.equal(await child.exited, 0, child.stderr);
  });

  it('a holder killed with SIGKILL: its waiter in another Bun process is granted', async function () {
    const m = await open();
    const code = `
      require(process.env.PKG).openLockManager(process.env.SCOPE, { dir: process.env.DIR }).then((m) => {
        m.request('x', () => {
          console.log('granted');
          return next();
        });
        console.log('requested');
      });
    `;
    const holder = startChild(code, { SCOPE: scope, DIR: dir });
    await holder.line('granted');
    const waiter = startChild(code, { SCOPE: scope, DIR: dir });
    await waiter.line('requested');
    assert.equal((await m.query()).pending.length, 1);
    holder.kill();
    assert.equal(await holder.exited, 'SIGKILL');
    await waiter.line('granted');
    waiter.end('done');
    assert.equal(await waiter.exited, 0, waiter.stderr);
  });

  it('the waker thread runs while an agent needs it, one for the process, and ends with the last agent', async function () {
    assert.equal(wakers(), 0);
    const a = await open();
    assert.equal(wakers(), 1);
    const b = await open(scopeName('bun-other'));
    assert.equal(wakers(), 1);
    // Alive until terminated: an open scope does not keep a thread alive.
    const w = startWorker(`
      setInterval(() => {}, 60000);
      openLockManager(workerData.scope, { dir: workerData.dir }).then(() => parentPort.postMessage('open'));
    `, { scope, dir });
    await w.message('open');
    await a.close();
    await b.close();
    assert.equal(wakers(), 1); // the worker's agent
    await w.worker.terminate();
    assert.equal(wakers(), 0);
    const c = await open();
    assert.equal(wakers(), 1);
    await c.close();
    assert.equal(wakers(), 0);
  });

  it('workers ended (terminate()) while another process wakes them again and again: each leaves the scope, and the process goes on', async function () {
    const m = await open();
    // Takes and releases y as fast as it can: each release wakes the
    // workers waiting for y, through the waker.
    const child = startChild(`
      require(process.env.PKG).openLockManager(process.env.SCOPE, { dir: process.env.DIR }).then(async (m) => {
        console.log('open');
        let stop = false;
        next().then(() => { stop = true; });
        while (!stop) await m.request('y', () => {});
        await m.close();
        console.log('stopped');
      });
    `, { SCOPE: scope, DIR: dir });
    await child.line('open');
    for (let round = 0; round < 20; round++) {
      const workers = [0, 1, 2].map(() => startWorker(`
        openLockManager(workerData.scope, { dir: workerData.dir }).then((m) => {
          const again = () => m.request('y', () => {}).then(again);
          again();
          parentPort.postMessage('open');
        });
      `, { scope, dir }));
      await Promise.all(workers.map((w) => w.message('open')));
      await Promise.all(workers.map((w) => w.worker.terminate()));
    }
    child.end('stop');
    await child.line('stopped');
    assert.equal(await child.exited, 0, child.stderr);
    assert.deepEqual(await m.query(), { held: [], pending: [] });
    assert.equal(await m.request('y', (lock) => lock.name), 'y');
  });
});
