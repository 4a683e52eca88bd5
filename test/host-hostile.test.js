'use strict';
// openLockManager(scope) where it is really used: cron jobs that open and
// close a scope in a loop, users of one group sharing a scope, a container's
// small /dev/shm, a file damaged or redirected while processes use it. Each
// case runs in real processes (a hang or a crash is the failure), and one
// that needs root, another user or a mount namespace makes them itself and
// is pending with the reason where it cannot.
const assert = require('node:assert/strict');
const childProcess = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { api, openToOthers, PKG } = require('./fixtures/util');

const linux = process.platform === 'linux';
const root = linux && process.getuid() === 0;
// The region's header starts a page into the file; its table of names'
// bucket count is 368 bytes in (wl__hdr_t, src/wl-internal.h). A count that
// is not a power of two is damage that the next lookup of a name finds.
const BUCKETS_AT = 4096 + 368;

// Runs `script` (with PKG and DIR defined) in a new Node process, through
// `prefix` (a command and its arguments) if given, as `user` ({ uid, gid })
// if given; resolves with { code, signal, out, err } once it ends, or kills
// it after `ms` and says so.
function runNode(script, { dir, prefix = [], user = {}, ms = 30000, stdin } = {}) {
  const code = `'use strict';\nconst PKG = ${JSON.stringify(PKG)};\nconst DIR = ${JSON.stringify(dir)};\n${script}`;
  const child = childProcess.spawn(prefix.length ? prefix[0] : process.execPath,
    [...prefix.slice(1), ...(prefix.length ? [process.execPath] : []), '-e', code],
    { stdio: ['pipe', 'pipe', 'pipe'], ...user });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (t) => { out += t; });
  child.stderr.setEncoding('utf8').on('data', (t) => { err += t; });
  const timer = setTimeout(() => child.kill('SIGKILL'), ms);
  const ended = new Promise((resolve) => child.on('close', (code, signal) => {
    clearTimeout(timer);
    resolve({ code, signal, out, err, timedOut: signal === 'SIGKILL' });
  }));
  if (stdin !== undefined) stdin(child);
  return { child, ended, said: (text) => untilSaid(child, () => out, text) };
}

// Resolves once the child's output holds `text`.
function untilSaid(child, output, text) {
  return new Promise((resolve, reject) => {
    const check = () => {
      if (output().includes(text)) {
        child.stdout.off('data', check);
        resolve();
      }
    };
    child.stdout.on('data', check);
    child.once('close', () => reject(new Error(`ended before saying ${text}: ${output()}`)));
    check();
  });
}

// Skips the running test, saying why in its title (mocha lists it as pending).
function pending(context, reason) {
  context.test.title += ` (pending: ${reason})`;
  context.skip();
}

(linux ? describe : describe.skip)('openLockManager (machine-wide) under hostile and unlucky conditions', function () {
  this.timeout(60000);
  let dir;

  beforeEach(function () {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-hostile-'));
    fs.chmodSync(dir, 0o777);
  });
  afterEach(function () {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('four processes that each open, lock and close in a loop for 8 s all finish, and leave nothing but the scope file', async function () {
    // (A leaving agent that removed its wake-up FIFO by a name that a new
    // agent already had wedged this within a few hundred rounds.)
    const script = `
      const { openLockManager } = require(PKG);
      const { performance } = require('node:perf_hooks');
      (async () => {
        let rounds = 0;
        for (const end = performance.now() + 8000; performance.now() < end; rounds++) {
          const m = await openLockManager('loop', { dir: DIR });
          await m.request('x', async () => {});
          await m.close();
        }
        console.log('done', rounds > 50);
      })();`;
    const runs = await Promise.all([0, 1, 2, 3].map(() => runNode(script, { dir, ms: 40000 }).ended));
    for (const r of runs) assert.deepEqual([r.code, r.out.trim(), r.timedOut], [0, 'done true', false], r.err);
    assert.deepEqual(fs.readdirSync(dir), ['web-locks.loop']);
  });

  it('a scope shared with a group: another user of the group wakes this process, and every file the scope makes has its mode exactly', async function () {
    if (!root) pending(this, 'only root can run a process as another user');
    if (!openToOthers(process.execPath) || !openToOthers(PKG)) pending(this, 'another user could not run Node or the package from here');
    const umask = process.umask(0o022);
    try {
      const { openLockManager } = api();
      // Another user, in this process's group (which the file gets).
      const other = runNode(`
        const { openLockManager } = require(PKG);
        (async () => {
          const m = await openLockManager('group', { dir: DIR, mode: 0o660 });
          let release;
          const done = m.request('x', () => { console.log('held'); return new Promise((r) => { release = r; }); });
          process.stdin.once('data', () => release());
          await done;
          await m.close();
          console.log('closed');
        })();`, { dir, user: { uid: 65534, gid: process.getgid() } });
      await other.said('held');
      const m = await openLockManager('group', { dir, mode: 0o660 });
      try {
        const granted = m.request('x', (lock) => lock.name);
        for (const name of fs.readdirSync(dir)) {
          assert.equal(fs.statSync(path.join(dir, name)).mode & 0o777, 0o660, name);
        }
        other.child.stdin.end('go\n');
        assert.equal(await granted, 'x');
      } finally {
        await m.close();
      }
      const r = await other.ended;
      assert.deepEqual([r.code, r.out], [0, 'held\nclosed\n'], r.err);
    } finally {
      process.umask(umask);
    }
  });

  it('a scope shared with a group by users whose own groups differ: each wakes the other (every FIFO gets the file\'s group)', async function () {
    if (!root) pending(this, 'only root can run processes as other users');
    if (!openToOthers(process.execPath) || !openToOthers(PKG)) pending(this, 'another user could not run Node or the package from here');
    // Two users: the first's group is the file's; the second's own group
    // is another, and the file's group is one of its supplementary groups.
    const group = process.getgid();
    const as = (uid, gid, groups) => `process.setgroups(${JSON.stringify(groups)}); process.setgid(${gid}); process.setuid(${uid});`;
    const holder = runNode(`${as(65533, group, [group])}
      const { openLockManager } = require(PKG);
      (async () => {
        const m = await openLockManager('groups', { dir: DIR, mode: 0o660 });
        let release;
        const done = m.request('x', () => { console.log('held'); return new Promise((r) => { release = r; }); });
        process.stdin.once('data', () => release());
        await done;
        await m.close();
      })();`, { dir });
    await holder.said('held');
    const waiter = runNode(`${as(65534, 65534, [65534, group])}
      const { openLockManager } = require(PKG);
      (async () => {
        const m = await openLockManager('groups', { dir: DIR, mode: 0o660 });
        const granted = m.request('x', (lock) => lock.name);
        console.log('queued');
        console.log(await granted);
        await m.close();
      })();`, { dir, ms: 15000 });
    await waiter.said('queued');
    for (const name of fs.readdirSync(dir)) assert.equal(fs.statSync(path.join(dir, name)).gid, group, name);
    holder.child.stdin.end('go\n');
    const [h, w] = await Promise.all([holder.ended, waiter.ended]);
    assert.deepEqual([h.code, h.err], [0, '']);
    assert.deepEqual([w.code, w.out, w.err], [0, 'queued\nx\n', '']);
  });

  it('a full tmpfs: a request that needs room rejects with a QuotaExceededError, nothing is lost, and the scope still opens', async function () {
    if (!root) pending(this, 'a tmpfs of its own needs root');
    const probe = childProcess.spawnSync('unshare', ['--mount', 'true']);
    if (probe.status !== 0) pending(this, 'no mount namespace can be made here (unshare --mount failed)');
    const shm = path.join(dir, 'shm');
    fs.mkdirSync(shm);
    const second = `
      const { openLockManager } = require(PKG);
      (async () => {
        const m = await openLockManager('full', { dir: DIR });
        console.log(await m.request('again', (lock) => lock.name));
        await m.close();
      })();`;
    const r = await runNode(`
      const { openLockManager } = require(PKG);
      const { execFileSync } = require('node:child_process');
      (async () => {
        const m = await openLockManager('full', { dir: DIR, size: 16 * 1024 * 1024 });
        const releases = [];
        const dones = [];
        let error;
        for (let i = 0; i < 100000 && error === undefined; i++) {
          let granted;
          const g = new Promise((resolve) => { granted = resolve; });
          const done = m.request('n'.repeat(1000) + i, () => { granted(); return new Promise((r) => releases.push(r)); });
          done.catch(() => {});
          error = await Promise.race([g.then(() => undefined), done.then(() => new Error('released'), (e) => e)]);
          if (error === undefined) dones.push(done);
        }
        console.log(error.name, releases.length > 10);
        const { held } = await m.query();
        console.log(held.length === releases.length);
        for (const release of releases) release();
        await Promise.all(dones);
        console.log(await m.request('after', (lock) => lock.name));
        console.log(execFileSync(process.execPath, ['-e', ${JSON.stringify(`const PKG = ${JSON.stringify(PKG)}; const DIR = ${JSON.stringify(shm)};\n${second}`)}], { encoding: 'utf8' }).trim());
        await m.close();
      })();`, {
      dir: shm,
      prefix: ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', 'mount -t tmpfs -o size=512k none "$0" && exec "$@"', shm],
    }).ended;
    assert.deepEqual([r.signal, r.code, r.out], [null, 0, 'QuotaExceededError true\ntrue\nafter\nagain\n'], r.err);
  });

  it('a file found damaged while locks are held and awaited: every request rejects with ECORRUPT, no error escapes, and the process ends by itself', async function () {
    const r = await runNode(`
      const fs = require('node:fs');
      const { openLockManager } = require(PKG);
      const outcome = (p) => p.then((v) => 'resolved ' + v, (e) => typeof e.code === 'string' ? e.code : e.name);
      (async () => {
        const m = await openLockManager('damaged', { dir: DIR });
        let releaseHeld;
        let granted;
        const ready = new Promise((resolve) => { granted = resolve; });
        const held = m.request('x', () => { granted(); return new Promise((r) => { releaseHeld = r; }); });
        await ready;
        const waiting = m.request('x', () => 'waiting ran');
        const controller = new AbortController();
        const aborted = m.request('x', { signal: controller.signal }, () => 'aborted ran');
        const fd = fs.openSync(DIR + '/web-locks.damaged', 'r+');
        const three = Buffer.alloc(8);
        three.writeBigUInt64LE(3n);
        fs.writeSync(fd, three, 0, 8, ${BUCKETS_AT});
        fs.closeSync(fd);
        // The next request looks the name up and finds the damage; then, in
        // the same task, the holder releases and the signal aborts.
        const found = m.request('y', () => 'y ran');
        releaseHeld('held ran');
        controller.abort();
        console.log(JSON.stringify(await Promise.all([found, held, waiting, aborted, m.query()].map(outcome))));
      })();`, { dir, ms: 15000 }).ended;
    assert.equal(r.timedOut, false, 'the process did not end by itself');
    assert.deepEqual([r.code, r.err], [0, '']);
    assert.deepEqual(JSON.parse(r.out), ['ECORRUPT', 'ECORRUPT', 'ECORRUPT', 'AbortError', 'ECORRUPT']);
  });

  it('a symbolic link to another scope\'s file is refused (ELOOP), even while that scope is open in this process', async function () {
    const { openLockManager } = api();
    const a = await openLockManager('target', { dir });
    try {
      fs.symlinkSync(path.join(dir, 'web-locks.target'), path.join(dir, 'web-locks.link'));
      await assert.rejects(openLockManager('link', { dir }), (err) => err.code === 'ELOOP');
    } finally {
      await a.close();
    }
  });

  it('a directory that does not exist: ENOENT, with a message that says so', async function () {
    const { openLockManager } = api();
    const missing = path.join(dir, 'missing');
    await assert.rejects(openLockManager('x', { dir: missing }), (err) => err.code === 'ENOENT' &&
      err.message.includes(`cannot create ${missing}`) && err.message.includes('No such file or directory') &&
      !err.message.includes('appearing'));
  });
});
