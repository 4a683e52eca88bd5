'use strict';
// A full scope and a crash: a scope filled until requests reject with a
// QuotaExceededError, and a process looping on query() killed with SIGKILL
// again and again, each time while it holds the scope's mutex. The repair
// that follows needs no room (src/core/recover.c), so the scope stays a
// working full scope: every process still queries and requests without
// ECORRUPT, a release frees room and a request is granted again. The same
// on a file system that is full before the scope is (a tmpfs of 64 KiB,
// mounted here: root only).
const assert = require('node:assert/strict');
const childProcess = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { api, scopeName, holdOn, isDOMException, machineFamily, PKG } = require('./fixtures/util');
const { spawnProcessAgent, terminateAll } = require('./fixtures/agent');

const linux = process.platform === 'linux';
// The scope's mutex is at this offset of its file (src/core/scope.c,
// wl__file_t), and its first word names its holder's task: glibc's robust
// mutex (the Linux family's) keeps its holder's TID there, the POSIX
// family's its holder's pid (src/os/machine.h), which is its main thread's
// TID.
const glibc = linux && Boolean(process.report.getReport().header.glibcVersionRuntime);
const posix = linux && machineFamily() === 'posix';
const MUTEX_OFFSET = 40;
const KILLS = 8;
const quota = isDOMException('QuotaExceededError');

// A process that opens the scope, holds the lock 'looper' (so that its end
// is seen as the next in line being granted), says 'ready', and on 'go'
// queries in a loop, saying 'looping' after the first query.
const LOOPER = `
const { openLockManager } = require(process.env.PKG);
(async () => {
  const m = await openLockManager(process.env.SCOPE, { dir: process.env.DIR });
  await new Promise((resolve) => m.request('looper', () => {
    resolve();
    return new Promise(() => {});
  }));
  process.once('message', async () => {
    await m.query();
    process.send('looping');
    for (;;) await m.query();
  });
  process.send('ready');
})().catch((e) => { console.error(e); process.exit(1); });
`;

// Every looper started, killed after each test whatever happened.
const loopers = new Set();

function startLooper(scope, dir) {
  const child = childProcess.spawn(process.execPath, ['-e', LOOPER], {
    env: Object.assign({}, process.env, { PKG, SCOPE: scope, DIR: dir }),
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (text) => { stderr += text; });
  loopers.add(child);
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => {
    loopers.delete(child);
    resolve(signal || code);
  }));
  const said = (what) => new Promise((resolve, reject) => {
    child.on('message', (m) => { if (m === what) resolve(); });
    exited.then((how) => reject(new Error(`the looper ended (${how}) before '${what}': ${stderr}`)));
  });
  return { child, exited, ready: said('ready'), looping: said('looping') };
}

// Whether every thread of process pid is stopped (a group stop is not
// done when kill() returns).
function stopped(pid) {
  return fs.readdirSync(`/proc/${pid}/task`).every((tid) => {
    const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    return /^[tT]/.test(stat.slice(stat.lastIndexOf(')') + 2));
  });
}

// A process that reads the mutex's first word when asked. Not this one: it
// has the scope open, and in the POSIX family a process that closes any
// descriptor of the file drops its locks on it (src/os/posix/posix.h).
const READER = `
const fs = require('node:fs');
const fd = fs.openSync(process.env.FILE, 'r');
const word = Buffer.alloc(4);
process.on('message', () => {
  fs.readSync(fd, word, 0, 4, ${MUTEX_OFFSET});
  process.send(word.readUInt32LE(0));
});
process.send('ready');
`;

async function startReader(file) {
  const child = childProcess.spawn(process.execPath, ['-e', READER], {
    env: Object.assign({}, process.env, { FILE: file }),
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  await new Promise((resolve, reject) => {
    child.once('message', resolve);
    child.once('exit', (code) => reject(new Error(`the reader ended (${code})`)));
  });
  return {
    read: () => new Promise((resolve) => { child.once('message', resolve); child.send('read'); }),
    end: () => child.kill('SIGKILL'),
  };
}

// Whether process pid holds the POSIX family's mutex's byte of the file (a
// POSIX lock at 2^47: src/os/posix/posix.h), as /proc/locks says. The
// family takes the byte, then names itself in the mutex's word, and clears
// the word before it lets go of the byte: here a stop lands at the system
// calls around the word's few microseconds (the kernel acts on a signal as
// a system call returns, sooner than a slow interprocessor interrupt
// reaches a running thread) far more often than within them, so a looper
// is caught holding the byte, its word not yet set, instead. Its next taker
// has then nothing to repair; killed with its word set (a repair that needs
// no room) is test/c/test-posix.c's and test-recover-full.c's, at their
// fault points.
function holdsByte(pid, file) {
  const ino = String(fs.statSync(file).ino);
  return fs.readFileSync('/proc/locks', 'utf8').split('\n').some((line) => {
    const f = line.trim().split(/\s+/);
    return f[1] === 'POSIX' && f[3] === 'WRITE' && f[4] === String(pid) && f[5].split(':')[2] === ino && f[6] === String(2 ** 47);
  });
}

// Kills the looper while one of its threads holds the scope's mutex: stops
// it, looks at the mutex's word (and in the POSIX family its byte), and
// lets it go on until it holds it (at most `tries` times). Returns whether
// it held it when killed.
async function killHolding(looper, file, tries = 1000) {
  const reader = await startReader(file);
  try {
    for (let i = 0; i < tries; i++) {
      looper.child.kill('SIGSTOP');
      for (let spins = 0; !stopped(looper.child.pid); spins++) assert.ok(spins < 100000, 'the looper never stopped');
      // The TID, without the futex's waiters and owner-died bits.
      const tid = (await reader.read()) & 0x3fffffff;
      if ((tid !== 0 && fs.existsSync(`/proc/${looper.child.pid}/task/${tid}`)) || (posix && holdsByte(looper.child.pid, file))) {
        looper.child.kill('SIGKILL');
        return true;
      }
      looper.child.kill('SIGCONT');
      // Time for it to go on, at a random point of its loop: a busy machine
      // may not run it at all before an immediate callback.
      await new Promise((resolve) => setTimeout(resolve, 1 + Math.random() * 2));
    }
    looper.child.kill('SIGKILL');
    return false;
  } finally {
    reader.end();
  }
}

// Requests names until one rejects with a QuotaExceededError. Each name's
// record takes a block of 256 bytes, the size of the table of names' first
// block, which the table left behind when it grew: no such block is left.
let serial = 0;
async function fillUp(m, held) {
  for (;;) {
    // One unit that no other name has, then padding to 60.
    const name = String.fromCharCode(0x4e00 + serial++).padEnd(60, 'x');
    const h = holdOn(m, name);
    const granted = await Promise.race([h.granted.then(() => true), h.done.then(() => false, (e) => e)]);
    if (granted !== true) {
      assert.ok(quota(granted), String(granted));
      return;
    }
    held.push(Object.assign(h, { name }));
  }
}

// Waits for a held-on request's grant, or fails with its rejection (an
// ECORRUPT scope never grants it).
function granted(h) {
  return Promise.race([h.granted, h.done.then(() => assert.fail('settled before its grant'))]);
}

// Fails unless a request's outcome (agent.settled) is a grant or a full
// scope's answer, a QuotaExceededError.
function fullOnly(outcome) {
  if (outcome.type === 'rejected') assert.equal(outcome.error.name, 'QuotaExceededError', JSON.stringify(outcome.error));
}

(glibc || posix ? describe : describe.skip)('a full scope after a crash', function () {
  this.timeout(120000);
  let openLockManager;
  let dir;
  let mounted = false;
  const opened = [];

  before(function () {
    ({ openLockManager } = api());
  });
  afterEach(async function () {
    for (const child of loopers) child.kill('SIGKILL');
    await terminateAll();
    for (const m of opened.splice(0)) await m.close();
    if (mounted) childProcess.execFileSync('umount', ['-l', dir]);
    mounted = false;
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  async function killLoopers(size) {
    const scope = scopeName('full-crash');
    const m = await openLockManager(scope, { dir, size });
    opened.push(m);
    const other = await spawnProcessAgent({ scope, dir });
    const mine = holdOn(m, 'mine');
    await mine.granted;
    let looper = startLooper(scope, dir);
    await looper.ready;
    let next = holdOn(m, 'looper');
    const held = [];
    for (let i = 0; i < KILLS; i++) {
      // Full again: the room a dead looper's agents left is taken.
      await fillUp(m, held);
      await assert.rejects(m.request('one more', () => {}), quota);
      looper.child.send('go');
      await looper.looping;
      assert.ok(await killHolding(looper, path.join(dir, `web-locks.${scope}`)), 'never caught the looper holding the mutex');
      assert.equal(await looper.exited, 'SIGKILL');
      // Its agent ended, after the repair: the next in line is granted.
      await granted(next);
      // Every process queries and requests: a full scope's answers only.
      await m.query();
      const q = await other.query();
      assert.ok(q.held.some((info) => info.name === 'mine'));
      const id = await other.request('mine', { ifAvailable: true });
      fullOnly(await other.settled(id));
      next.release();
      await next.done;
      looper = startLooper(scope, dir);
      await looper.ready;
      next = holdOn(m, 'looper');
    }
    // A release frees room: a request for a name of the same length is
    // granted again.
    const last = held.pop();
    last.release();
    await last.done;
    const again = `\u9fff${last.name.slice(1)}`;
    assert.equal(await m.request(again, (lock) => lock.name), again);
    for (const h of held) h.release();
    mine.release();
    await Promise.all(held.map((h) => h.done));
    looper.child.kill('SIGKILL');
    await looper.exited;
    await granted(next);
    next.release();
    await next.done;
    assert.deepEqual(await m.query(), { held: [], pending: [] });
  }

  it('a scope filled until QuotaExceededError survives SIGKILLs of a process looping on query()', async function () {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-full-crash-'));
    await killLoopers(17 * 4096);
  });

  it('so does a scope on a file system that is full first (a tmpfs of 64 KiB)', async function () {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-full-fs-'));
    // Mounting a tmpfs needs root, in a mount namespace that allows it.
    try {
      childProcess.execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir], { stdio: 'pipe' });
    } catch (e) {
      this.test.title += ` (pending: cannot mount a tmpfs: ${String(e.stderr || e.message).trim()})`;
      this.skip();
    }
    mounted = true;
    await killLoopers(1 << 20);
  });
});
