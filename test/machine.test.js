'use strict';
// openLockManager(scope): one lock manager for every process on the host
// that opens the scope. Its agents here are this thread, worker threads and
// child processes (test/fixtures/agent.js), all on one scope per test.
const assert = require('node:assert/strict');
const childProcess = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { once } = require('node:events');
const { Worker } = require('node:worker_threads');
const { api, uniq, scopeName, holdOn, only, isDOMException, openToOthers, PKG } = require('./fixtures/util');
const { spawnAgent, spawnProcessAgent, terminateAll } = require('./fixtures/agent');
const { defaultDir } = require(path.join(PKG, 'lib', 'manager-machine.js'));

// Where the package has the machine-wide manager (macOS: only on hosted
// runners, .github/workflows/hosted.yml; Windows: under wine here).
const linux = process.platform === 'linux';
const windows = process.platform === 'win32';
const machine = linux || windows || process.platform === 'darwin';

// Skips a test of what Windows does not have.
function notOnWindows(test, what) {
  if (!windows) return;
  test.test.title += ` (pending: Windows has no ${what})`;
  test.skip();
}

// Skips a test of what only Linux has.
function linuxOnly(test, what) {
  if (linux) return;
  test.test.title += ` (pending: only Linux has ${what})`;
  test.skip();
}

(machine ? describe : describe.skip)('openLockManager (machine-wide)', function () {
  this.timeout(20000);
  let openLockManager;
  let LockManager;
  let dir;
  const opened = [];

  before(function () {
    ({ openLockManager, LockManager } = api());
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-host-'));
  });
  afterEach(async function () {
    await terminateAll();
    for (const m of opened.splice(0)) await m.close();
  });
  after(function () {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function open(scope, options = {}) {
    const m = await openLockManager(scope, Object.assign({ dir }, options));
    opened.push(m);
    return m;
  }

  describe('opening', function () {
    it('gives a LockManager, the same one while it is open in this thread, a new one after close()', async function () {
      const scope = scopeName('open');
      const a = await open(scope);
      assert.ok(a instanceof LockManager);
      assert.equal(Object.getPrototypeOf(a), LockManager.prototype);
      assert.equal(await open(scope), a);
      assert.notEqual(a, api().locks);
      await a.close();
      const b = await open(scope);
      assert.notEqual(b, a);
      assert.equal(await b.request('x', (lock) => lock.name), 'x');
    });

    it('rejects (never throws) a scope that is not 1 to 100 letters, digits, ".", "_" or "-"', async function () {
      const empty = fs.mkdtempSync(path.join(dir, 'scopes-'));
      for (const scope of ['', 'a/b', '../x', '/etc', 'a b', 'é', 'a\0b', 'x'.repeat(101), 42, undefined, null, { toString: () => 'a' }]) {
        let p;
        assert.doesNotThrow(() => { p = openLockManager(scope, { dir: empty }); });
        await assert.rejects(p, TypeError, `scope ${JSON.stringify(scope)}`);
      }
      assert.deepEqual(fs.readdirSync(empty), []);
    });

    it('keeps every valid scope inside its directory, even "." and ".."', async function () {
      const sub = fs.mkdtempSync(path.join(dir, 'sub-'));
      await (await open('..', { dir: sub })).close();
      await (await open('.', { dir: sub })).close();
      await (await open('x'.repeat(100), { dir: sub })).close();
      assert.deepEqual(fs.readdirSync(sub).sort(), ['web-locks...', 'web-locks..', `web-locks.${'x'.repeat(100)}`].sort());
    });

    it('rejects bad options with a TypeError or a RangeError', async function () {
      const cases = [
        [5, TypeError], ['x', TypeError], [{ dir: 5 }, TypeError], [{ dir: '' }, TypeError],
        [{ size: 1000 }, RangeError], [{ size: 4096 }, RangeError], [{ size: 8192.5 }, RangeError],
        [{ size: '8192' }, RangeError], [{ size: 2 ** 41 }, RangeError],
        [{ mode: 0o777 }, RangeError], [{ mode: 0o1600 }, RangeError], [{ mode: -1 }, RangeError], [{ mode: '600' }, RangeError], [{ mode: 2 ** 32 + 0o600 }, RangeError],
        // A user who may only read the file, or only write it, could hold its locks.
        [{ mode: 0o644 }, RangeError], [{ mode: 0o640 }, RangeError], [{ mode: 0o620 }, RangeError], [{ mode: 0o662 }, RangeError],
        [{ mode: 0o400 }, RangeError], [{ mode: 0o060 }, RangeError],
      ];
      for (const [options, type] of cases) {
        await assert.rejects(openLockManager('opts', options), type, JSON.stringify(options));
      }
    });

    it('creates the file for its owner only by default, and with the mode option otherwise', async function () {
      notOnWindows(this, 'permission bits');
      await open('mode-default');
      assert.equal(fs.statSync(path.join(dir, 'web-locks.mode-default')).mode & 0o777, 0o600);
      await open('mode-group', { mode: 0o660 });
      assert.equal(fs.statSync(path.join(dir, 'web-locks.mode-group')).mode & 0o777, 0o660);
    });

    it('refuses a file whose bits let some user only read it or only write it: that user could hold its locks', async function () {
      notOnWindows(this, 'permission bits');
      const file = path.join(dir, 'web-locks.mode-read');
      await (await openLockManager('mode-read', { dir })).close();
      fs.chmodSync(file, 0o640);
      await assert.rejects(openLockManager('mode-read', { dir }), (err) => err.code === 'EACCES' && err.message.includes(file) && /0640/.test(err.message));
      fs.chmodSync(file, 0o600);
      await (await openLockManager('mode-read', { dir })).close();
    });

    it('chooses /dev/shm by default on Linux and /var/tmp on macOS: a directory every user shares, which no clean-up empties under a live scope; on Windows the user\'s own %LOCALAPPDATA%', function () {
      assert.equal(defaultDir('linux'), '/dev/shm');
      assert.equal(defaultDir('darwin'), '/var/tmp');
      if (windows) assert.equal(defaultDir(), process.env.LOCALAPPDATA);
      else assert.equal(defaultDir(), process.platform === 'darwin' ? '/var/tmp' : '/dev/shm');
    });

    it('has no default directory on Windows without %LOCALAPPDATA% (no other is known to be the user\'s own): openLockManager then needs the dir option, and rejects with a TypeError that says so', async function () {
      assert.equal(defaultDir('win32', {}), null);
      assert.equal(defaultDir('win32', { LOCALAPPDATA: 'C:\\Users\\u\\AppData\\Local' }), 'C:\\Users\\u\\AppData\\Local');
      if (!windows) return;
      const saved = process.env.LOCALAPPDATA;
      const scope = `no-home-${process.pid}`;
      delete process.env.LOCALAPPDATA;
      try {
        await assert.rejects(async () => openLockManager(scope), (err) => err.name === 'TypeError' && err.message.includes('%LOCALAPPDATA%') && err.message.includes('dir option'));
        await (await openLockManager(scope, { dir })).close();
      } finally {
        process.env.LOCALAPPDATA = saved;
      }
    });

    it('puts the file in that directory by default', async function () {
      const scope = `default-dir-${process.pid}`;
      const file = path.join(defaultDir(), `web-locks.${scope}`);
      const m = await openLockManager(scope);
      try {
        assert.ok(fs.statSync(file).isFile());
      } finally {
        await m.close();
        fs.rmSync(file);
      }
    });

    it('refuses a garbage file, a truncated one and a symbolic link, with an error that names the file', async function () {
      const garbage = path.join(dir, 'web-locks.garbage');
      fs.writeFileSync(garbage, Buffer.alloc(65536, 0x5a), { mode: 0o600 });
      await assert.rejects(openLockManager('garbage', { dir }), (err) => err.code === 'ECORRUPT' && err.message.includes(garbage));

      await (await open('truncated')).close();
      const truncated = path.join(dir, 'web-locks.truncated');
      fs.truncateSync(truncated, 8192);
      await assert.rejects(openLockManager('truncated', { dir }), (err) => /^E[A-Z]+$/.test(err.code) && err.message.includes(truncated));

      fs.symlinkSync(garbage, path.join(dir, 'web-locks.link'));
      // wine 8 makes a link that lstat cannot find: the part left out there.
      if (windows && !fs.existsSync(path.join(dir, 'web-locks.link'))) {
        this.test.title += ' (the symbolic link: pending, this system made none)';
        return;
      }
      await assert.rejects(openLockManager('link', { dir }), (err) => err.code === 'ELOOP' && err.message.includes('web-locks.link'));
    });

    it('refuses a file of another layout with an error that names both layouts', async function () {
      await (await open('layout')).close();
      const file = path.join(dir, 'web-locks.layout');
      const fd = fs.openSync(file, 'r+');
      const layout = Buffer.alloc(4);
      fs.readSync(fd, layout, 0, 4, 8);
      const ours = layout.readUInt32LE(0);
      layout.writeUInt32LE(ours + 7, 0);
      fs.writeSync(fd, layout, 0, 4, 8);
      fs.closeSync(fd);
      await assert.rejects(openLockManager('layout', { dir }), (err) => err.code === 'ELAYOUT' &&
        err.message.includes(file) && err.message.includes(`layout ${ours + 7}`) && err.message.includes(`layout ${ours}`));
    });

    it("refuses a file of another user unless both its mode and the opener's open it on purpose", async function () {
      notOnWindows(this, 'permission bits');
      // As root, with a Node and a package that another user can run.
      if (process.getuid() !== 0 || !openToOthers(process.execPath) || !openToOthers(PKG)) this.skip();
      const shared = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-users-'));
      fs.chmodSync(shared, 0o777);
      after(() => fs.rmSync(shared, { recursive: true, force: true }));
      const script = `
        const { openLockManager } = require(${JSON.stringify(PKG)});
        (async () => {
          await (await openLockManager('private', { dir: ${JSON.stringify(shared)} })).close();
          await (await openLockManager('open', { dir: ${JSON.stringify(shared)}, mode: 0o666 })).close();
        })();`;
      childProcess.execFileSync(process.execPath, ['-e', script], { uid: 65534, gid: 65534, stdio: 'pipe' });
      assert.equal(fs.statSync(path.join(shared, 'web-locks.private')).uid, 65534);
      await assert.rejects(openLockManager('private', { dir: shared, mode: 0o666 }), (err) => err.code === 'EACCES' && err.message.includes('web-locks.private'));
      // A private scope (the default mode) trusts no other user's file.
      await assert.rejects(openLockManager('open', { dir: shared }), (err) => err.code === 'EACCES' && err.message.includes('opened as private'));
      const m = await open('open', { dir: shared, mode: 0o666 });
      assert.equal(await m.request('x', (lock) => lock.mode), 'exclusive');
      // Open in this process already, shared: a private open is still
      // refused, on this thread (its agent) and on another (the mapping).
      await assert.rejects(openLockManager('open', { dir: shared }), (err) => err.code === 'EACCES' && err.message.includes('opened as private'));
      const worker = new Worker(`
        const { parentPort, workerData } = require('node:worker_threads');
        require(workerData.PKG).openLockManager('open', { dir: workerData.shared })
          .then(() => parentPort.postMessage('opened'), (err) => parentPort.postMessage(err.code));`, { eval: true, workerData: { PKG, shared } });
      const [said] = await once(worker, 'message');
      await once(worker, 'exit');
      assert.equal(said, 'EACCES');
    });

    it('a process that gives up root opens again the scopes it opened as root (root\'s files are trusted as its own)', function () {
      notOnWindows(this, 'users and setuid');
      if (process.getuid() !== 0 || !openToOthers(process.execPath) || !openToOthers(PKG)) this.skip();
      const script = `
        const { openLockManager } = require(${JSON.stringify(PKG)});
        (async () => {
          const m = await openLockManager('setuid', { dir: ${JSON.stringify(dir)} });
          process.setgid(65534);
          process.setuid(65534);
          const again = await openLockManager('setuid', { dir: ${JSON.stringify(dir)} });
          console.log(again === m, await again.request('x', (lock) => lock.name));
          await m.close();
        })().catch((e) => console.log(e.code, e.message));`;
      const out = childProcess.execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 30000 });
      assert.equal(out.trim(), 'true x');
    });

    it("a private open by another user refuses root's file that root opened to every user (any user could write it)", async function () {
      notOnWindows(this, 'permission bits');
      if (process.getuid() !== 0 || !openToOthers(process.execPath) || !openToOthers(PKG)) this.skip();
      const shared = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-rootfile-'));
      fs.chmodSync(shared, 0o1777);
      after(() => fs.rmSync(shared, { recursive: true, force: true }));
      await (await openLockManager('everyone', { dir: shared, mode: 0o666 })).close();
      assert.equal(fs.statSync(path.join(shared, 'web-locks.everyone')).uid, 0);
      const script = `
        require(${JSON.stringify(PKG)}).openLockManager('everyone', { dir: ${JSON.stringify(shared)} })
          .then(async (m) => { console.log('opened'); await m.close(); }, (e) => console.log(e.code, e.message.includes('opened as private')));`;
      const out = childProcess.execFileSync(process.execPath, ['-e', script], { uid: 65534, gid: 65534, encoding: 'utf8', timeout: 30000 });
      assert.equal(out.trim(), 'EACCES true');
    });

    it('a full manager rejects a request with a QuotaExceededError and changes nothing', async function () {
      const m = await open('full', { size: 8192 });
      const held = [];
      let error;
      for (let i = 0; i < 10000 && error === undefined; i++) {
        const h = holdOn(m, `n${i}`);
        held.push(h);
        h.done.catch((e) => { error = e; });
        await Promise.race([h.granted, h.done.catch(() => {})]);
      }
      assert.ok(isDOMException('QuotaExceededError')(error), String(error));
      const before = await m.query();
      await assert.rejects(m.request('one-more', () => {}), isDOMException('QuotaExceededError'));
      assert.deepEqual(await m.query(), before);
      for (const h of held) h.release();
      await Promise.allSettled(held.map((h) => h.done));
      assert.equal(await m.request('again', (lock) => lock.name), 'again');
    });
  });

  describe('close()', function () {
    it('ends this thread\'s requests: pending and held ones reject with an AbortError, others are granted', async function () {
      const scope = 'close-ends';
      const m = await open(scope);
      const other = await spawnProcessAgent({ scope, dir });
      const name = uniq('close');
      const h = holdOn(m, name);
      await h.granted;
      const queued = holdOn(m, name);
      const id = await other.request(name);
      let ran = false;
      const p = m.request(name, () => { ran = true; });
      await m.close();
      await assert.rejects(h.done, isDOMException('AbortError'));
      await assert.rejects(queued.done, isDOMException('AbortError'));
      await assert.rejects(p, isDOMException('AbortError'));
      await other.granted(id);
      assert.equal(ran, false);
      h.release();
      other.release(id);
      await other.settled(id);
    });

    it('after close(), request() and query() reject with an InvalidStateError; closing again is harmless', async function () {
      const m = await open('close-twice');
      await m.close();
      await m.close();
      await assert.rejects(m.request('x', () => {}), isDOMException('InvalidStateError'));
      await assert.rejects(m.query(), isDOMException('InvalidStateError'));
    });

    it('the process-wide manager cannot be closed', async function () {
      await assert.rejects(api().locks.close(), isDOMException('NotSupportedError'));
      assert.equal(await api().locks.request(uniq('still'), () => 1), 1);
    });
  });

  describe('across processes', function () {
    let scope;
    let m;
    beforeEach(async function () {
      scope = scopeName('xp');
      m = await open(scope);
    });

    // A process of its own, that ends when it has nothing left to do.
    function runScript(code, onLine) {
      return new Promise((resolve) => {
        const child = childProcess.execFile(process.execPath, ['-e', code], {
          timeout: 10000,
          env: Object.assign({}, process.env, { PKG, SCOPE: scope, DIR: dir }),
        }, (error, stdout, stderr) => resolve({ code: error ? error.code : 0, killed: Boolean(error && error.killed), stdout, stderr }));
        if (onLine) child.stdout.on('data', (text) => onLine(String(text)));
      });
    }

    it('a process whose request waits behind its own lock ends on its own; one waiting behind another process\'s lock stays until it is granted', async function () {
      // Under Bun such a process stays: the check that lets it end is off
      // there (README).
      if (process.versions.bun === undefined) {
        const mine = await runScript(`
          require(process.env.PKG).openLockManager(process.env.SCOPE, { dir: process.env.DIR }).then((m) => {
            m.request('self', () => new Promise(() => {}));
            m.request('self', () => console.log('granted'));
          });
          process.on('exit', () => console.log('exit'));
        `);
        assert.equal(mine.killed, false, 'the process had to be killed: a request only its own lock blocked kept it alive');
        assert.deepEqual([mine.code, mine.stdout.trim()], [0, 'exit'], mine.stderr);
      }

      const name = uniq('other');
      const h = holdOn(m, name);
      await h.granted;
      const theirs = runScript(`
        require(process.env.PKG).openLockManager(process.env.SCOPE, { dir: process.env.DIR }).then((m) => {
          m.request(${JSON.stringify(name)}, () => console.log('granted'));
          console.log('requested');
        });
      `, (text) => { if (text.includes('requested')) h.release(); });
      const r = await theirs;
      assert.deepEqual([r.killed, r.code, r.stdout.trim()], [false, 0, 'requested\ngranted'], r.stderr);
    });

    it('process.exit() with a request waiting leaves the scope quietly: exit code 0, no unhandled rejection', async function () {
      const name = uniq('exit');
      const h = holdOn(m, name);
      await h.granted;
      const r = await runScript(`
        require(process.env.PKG).openLockManager(process.env.SCOPE, { dir: process.env.DIR }).then((m) => {
          m.request(${JSON.stringify(name)}, () => {});
          process.exit(0);
        });
      `);
      assert.deepEqual([r.killed, r.code, r.stderr], [false, 0, '']);
      assert.equal(only(await m.query(), name).pending.length, 0);
      h.release();
    });

    it('a lock held in another process is not available here until it is released, and the other way round', async function () {
      const name = uniq('x');
      const child = await spawnProcessAgent({ scope, dir });
      const id = await child.request(name);
      assert.deepEqual((await child.granted(id)).lock, { name, mode: 'exclusive' });
      assert.equal(await m.request(name, { ifAvailable: true }, (l) => l), null);
      let granted = false;
      const p = m.request(name, () => { granted = true; return 'here'; });
      assert.equal(only(await m.query(), name).pending.length, 1);
      assert.equal(granted, false);
      child.release(id, 'there');
      assert.equal(await p, 'here');
      assert.deepEqual(await child.settled(id), { type: 'resolved', id, value: 'there' });

      const h = holdOn(m, name);
      await h.granted;
      const probe = await child.request(name, { ifAvailable: true }, { hold: false });
      assert.equal((await child.granted(probe)).lock, null);
      const id2 = await child.request(name);
      assert.equal(child.isGranted(id2), false);
      h.release();
      await child.granted(id2);
      child.release(id2);
      await child.settled(id2);
    });

    it('shared locks are held by several processes at once; an exclusive request waits for all of them', async function () {
      const name = uniq('sh');
      const a = await spawnProcessAgent({ scope, dir });
      const b = await spawnProcessAgent({ scope, dir });
      const ia = await a.request(name, { mode: 'shared' });
      const ib = await b.request(name, { mode: 'shared' });
      await a.granted(ia);
      await b.granted(ib);
      const h = holdOn(m, name, { mode: 'shared' });
      await h.granted;
      const x = holdOn(m, name);
      const state = only(await m.query(), name);
      assert.equal(state.held.length, 3);
      assert.deepEqual(state.pending.map((i) => i.mode), ['exclusive']);
      a.release(ia);
      await a.settled(ia);
      h.release();
      await h.done;
      b.release(ib);
      await x.granted;
      x.release();
      await x.done;
    });

    it('grants in request order across processes, and every side sees the same queue', async function () {
      const name = uniq('fifo');
      const agents = [await spawnProcessAgent({ scope, dir }), await spawnProcessAgent({ scope, dir })];
      const h = holdOn(m, name);
      await h.granted;
      const order = [];
      const ids = [];
      for (const [i, agent] of agents.entries()) {
        ids.push(await agent.request(name, i === 1 ? { mode: 'shared' } : {}));
      }
      const mine = m.request(name, { mode: 'shared' }, () => { order.push('main'); });
      const here = only(await m.query(), name);
      for (const agent of agents) assert.deepEqual(only(await agent.query(), name), here);
      const clientIds = here.pending.map((i) => i.clientId);
      assert.equal(new Set([...clientIds, here.held[0].clientId]).size, 3);
      assert.deepEqual(here.pending.map((i) => i.mode), ['exclusive', 'shared', 'shared']);
      h.release();
      await agents[0].granted(ids[0]);
      assert.equal(agents[1].isGranted(ids[1]), false);
      assert.deepEqual(order, []);
      agents[0].release(ids[0]);
      await agents[1].granted(ids[1]);
      await mine;
      assert.deepEqual(order, ['main']);
      agents[1].release(ids[1]);
      await agents[1].settled(ids[1]);
    });

    it('steals a lock held in another process: its request() rejects there with an AbortError, the thief runs first', async function () {
      const name = uniq('steal');
      const child = await spawnProcessAgent({ scope, dir });
      const id = await child.request(name);
      await child.granted(id);
      const waiting = holdOn(m, name);
      assert.equal(await m.request(name, { steal: true }, (lock) => lock.name), name);
      const settled = await child.settled(id);
      assert.equal(settled.type, 'rejected');
      assert.equal(settled.error.name, 'AbortError');
      assert.equal(settled.error.isDOMException, true);
      await waiting.granted;
      waiting.release();
      await waiting.done;
    });

    it('gives each grant a fencing token greater than every earlier one, across processes and after they all left', async function () {
      const name = uniq('token');
      const a = await spawnProcessAgent({ scope, dir });
      const b = await spawnProcessAgent({ scope, dir });
      const h = holdOn(m, name);
      const tokens = [(await h.granted).token];
      const ia = await a.request(name);
      const ib = await b.request(name, { mode: 'shared' });
      h.release();
      tokens.push(BigInt((await a.granted(ia)).token));
      a.release(ia);
      tokens.push(BigInt((await b.granted(ib)).token));
      // Granted here beside b's shared lock, by this process.
      tokens.push(await m.request(name, { mode: 'shared' }, (l) => l.token));
      b.release(ib);
      await b.settled(ib);
      const ic = await a.request(name);
      tokens.push(BigInt((await a.granted(ic)).token));
      tokens.push(await m.request(name, { steal: true }, (l) => l.token));
      assert.equal((await a.settled(ic)).type, 'rejected');
      for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `tokens ${tokens.join(', ')}`);
      // The counter is in the file: it goes on once every process has left.
      await terminateAll();
      await m.close();
      const again = await open(scope);
      assert.notEqual(again, m);
      const next = await again.request(uniq('token-other'), (l) => l.token);
      assert.ok(next > tokens[tokens.length - 1], `${next} after ${tokens.join(', ')}`);
    });

    it('passes tokens past 2 ** 32 and 2 ** 53 to JS exactly', async function () {
      // The grant counter: a uint64 in the region's header (wl__hdr_t's
      // grants), the region starting at the file's second page.
      const GRANTS = 4096 + 352;
      const file = path.join(dir, `web-locks.${scope}`);
      assert.equal(await m.request(uniq('wide'), (l) => l.token), 1n);
      await m.close();
      const fd = fs.openSync(file, 'r+');
      const word = Buffer.alloc(8);
      fs.readSync(fd, word, 0, 8, GRANTS);
      assert.equal(word.readBigUInt64LE(0), 1n, 'the counter is where this test looks');
      for (const start of [2n ** 32n - 2n, 2n ** 53n - 2n]) {
        word.writeBigUInt64LE(start, 0);
        fs.writeSync(fd, word, 0, 8, GRANTS);
        const again = await open(scope);
        const tokens = [];
        for (let i = 0; i < 3; i++) tokens.push(await again.request(uniq('wide'), (l) => l.token));
        assert.deepEqual(tokens, [start + 1n, start + 2n, start + 3n]);
        await again.close();
      }
      fs.closeSync(fd);
    });

    it('a request aborted in another process leaves the queue that every side sees', async function () {
      const name = uniq('abort');
      const h = holdOn(m, name);
      await h.granted;
      const child = await spawnProcessAgent({ scope, dir });
      const id = await child.request(name, {}, { abortable: true });
      assert.equal(only(await m.query(), name).pending.length, 1);
      child.abort(id, 'gone');
      const settled = await child.settled(id);
      assert.equal(settled.type, 'rejected');
      assert.deepEqual(only(await m.query(), name).pending, []);
      h.release();
      await h.done;
    });

    it('a process killed with SIGKILL releases its locks and leaves its queues; the next in line is granted', async function () {
      const name = uniq('kill');
      const holder = await spawnProcessAgent({ scope, dir });
      const waiter = await spawnProcessAgent({ scope, dir });
      const id = await holder.request(name);
      await holder.granted(id);
      const queued = await holder.request(name, { mode: 'shared' });
      const w = await waiter.request(name, { mode: 'shared' });
      const p = m.request(name, { mode: 'shared' }, (lock) => lock.mode);
      assert.deepEqual(only(await m.query(), name).pending.map((i) => i.mode), ['shared', 'shared', 'shared']);
      assert.equal(holder.isGranted(queued), false);
      await holder.terminate();
      assert.equal(await p, 'shared');
      await waiter.granted(w);
      assert.deepEqual(only(await m.query(), name).pending, []);
      waiter.release(w);
      await waiter.settled(w);
    });

    it('a process that dies of an uncaught exception releases its locks', async function () {
      const name = uniq('throw');
      const child = await spawnProcessAgent({ scope, dir });
      const id = await child.request(name);
      await child.granted(id);
      const p = m.request(name, (lock) => lock.name);
      child.post({ cmd: 'throw', message: 'boom' });
      assert.equal(await child.exited, 1);
      assert.equal(await p, name);
    });

    it('a process that exits releases its locks and leaves its queues', async function () {
      const name = uniq('exit');
      const child = await spawnProcessAgent({ scope, dir });
      const id = await child.request(name);
      await child.granted(id);
      const h = holdOn(m, `${name}-2`);
      await h.granted;
      await child.request(`${name}-2`);
      const p = m.request(name, (lock) => lock.name);
      child.post({ cmd: 'exit', code: 0 });
      assert.equal(await child.exited, 0);
      assert.equal(await p, name);
      assert.deepEqual(only(await m.query(), `${name}-2`).pending, []);
      h.release();
      await h.done;
    });

    it('an agent in another pid namespace shares the scope', async function () {
      notOnWindows(this, 'pid namespaces');
      if (process.getuid() !== 0) this.skip();
      // util-linux's unshare; busybox's (the arm64 VM's, scripts/arm64-vm.sh) has no --kill-child.
      if (!/--kill-child/.test(childProcess.spawnSync('unshare', ['--help'], { encoding: 'utf8' }).stdout || '')) {
        this.test.title += ' (pending: unshare has no --kill-child)';
        this.skip();
      }
      const name = uniq('pidns');
      const child = await spawnProcessAgent({ scope, dir }, ['unshare', '--pid', '--fork', '--kill-child']);
      const id = await child.request(name);
      await child.granted(id);
      const p = m.request(name, () => 'here');
      assert.equal(only(await m.query(), name).pending.length, 1);
      child.release(id);
      assert.equal(await p, 'here');
      const id2 = await child.request(name);
      await child.granted(id2);
      const q = m.request(name, () => 'after the kill');
      await child.terminate();
      assert.equal(await q, 'after the kill');
    });

    it('a process waiting for a lock held elsewhere uses no CPU', async function () {
      linuxOnly(this, '/proc to read a process\'s CPU time from');
      const name = uniq('idle');
      const h = holdOn(m, name);
      await h.granted;
      const child = await spawnProcessAgent({ scope, dir });
      const id = await child.request(name);
      // utime + stime of the child, in clock ticks (/proc/<pid>/stat).
      const ticks = () => {
        const stat = fs.readFileSync(`/proc/${child.child.pid}/stat`, 'utf8');
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        return Number(fields[11]) + Number(fields[12]);
      };
      const before = ticks();
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.ok(ticks() - before <= 2, `${ticks() - before} ticks in 500 ms`);
      h.release();
      await child.granted(id);
      child.release(id);
      await child.settled(id);
    });

    it('worker threads that open the scope are agents of it, each with its own clientId', async function () {
      const name = uniq('thread');
      const worker = await spawnAgent({ scope, dir });
      const child = await spawnProcessAgent({ scope, dir });
      const iw = await worker.request(name);
      await worker.granted(iw);
      const ic = await child.request(name);
      const p = m.request(name, () => 'main');
      const { held, pending } = only(await m.query(), name);
      assert.equal(new Set([held[0].clientId, ...pending.map((i) => i.clientId)]).size, 3);
      worker.release(iw);
      await child.granted(ic);
      child.release(ic);
      assert.equal(await p, 'main');
      await worker.settled(iw);
    });

    it('each thread\'s loop polls its agents\' FIFOs itself: no thread of the binding\'s own wakes them (as under Bun: test/bun.test.js)', async function () {
      notOnWindows(this, 'FIFOs: the system\'s thread pool waits for its agents\' events');
      if (process.versions.bun !== undefined) this.skip();
      linuxOnly(this, '/proc to list a process\'s threads from');
      const names = () => fs.readdirSync('/proc/self/task').map((tid) => {
        try {
          return fs.readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim();
        } catch {
          return null; // the thread ended meanwhile
        }
      });
      const worker = await spawnAgent({ scope, dir });
      const child = await spawnProcessAgent({ scope, dir });
      const name = uniq('poll');
      const id = await child.request(name);
      await child.granted(id);
      const w = await worker.request(name);
      const p = m.request(name, () => 'main');
      child.release(id);
      await worker.granted(w); // woken by the other process
      worker.release(w);
      assert.equal(await p, 'main');
      assert.ok(names().includes('wl-watch'));
      assert.ok(!names().includes('wl-wake'));
    });
  });
});
