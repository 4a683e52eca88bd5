'use strict';
// openLockManager(scope) where it is really used: cron jobs that open and
// close a scope in a loop, users of one group sharing a scope, a container's
// small /dev/shm, a file corrupt or redirected while processes use it. Each
// case runs in real processes (a hang or a crash is the failure), and one
// that needs root, another user or a mount namespace makes them itself and
// is pending with the reason where it cannot.
const assert = require('node:assert/strict');
const childProcess = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { api, machineFamily, openToOthers, PKG } = require('./fixtures/util');

const linux = process.platform === 'linux';
const root = linux && process.getuid() === 0;
// The region's header starts a page into the file; its table of names'
// bucket count is 368 bytes in (wl__hdr_t, src/core/internal.h). A count that
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

  it('a scope shared with a group: another user of the group wakes this process, and every file the scope makes has its mode exactly (its FIFOs, write only)', async function () {
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
        // The FIFOs only need to be written to by the others (a reader
        // could take wake-ups).
        for (const name of fs.readdirSync(dir)) {
          assert.equal(fs.statSync(path.join(dir, name)).mode & 0o777, name === 'web-locks.group' ? 0o660 : 0o620, name);
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

  // Opens a scope in a directory of a bindfs mount (a FUSE file system
  // that can fix the bits or the owner it shows) with `how` as its options,
  // in a mount and pid namespace that ends bindfs with the test's process:
  // resolves with the outcome and what is left in the directory under it.
  async function openOnBindfs(context, how, expected) {
    if (!root) pending(context, 'a FUSE mount of its own needs root');
    if (childProcess.spawnSync('bindfs', ['--version']).status !== 0) pending(context, 'bindfs is not installed');
    const probe = childProcess.spawnSync('unshare', ['--mount', '--pid', '--fork', 'true']);
    if (probe.status !== 0) pending(context, 'no mount and pid namespace can be made here (unshare failed)');
    const src = fs.mkdtempSync(path.join(dir, 'bindfs-src-'));
    const mnt = fs.mkdtempSync(path.join(dir, 'bindfs-'));
    const r = await runNode(`
      const { openLockManager } = require(PKG);
      openLockManager('fixed', { dir: DIR }).then(
        () => console.log('opened'),
        (e) => console.log(e.code, e.message.includes(${JSON.stringify(expected)}), e.message.includes('file system')));`, {
      dir: mnt,
      prefix: ['unshare', '--mount', '--propagation', 'private', '--pid', '--fork', 'sh', '-c',
        `bindfs ${how} "$0" "$1" && shift && exec "$@"`, src, mnt],
    }).ended;
    return { r, left: fs.readdirSync(src) };
  }

  it('a file system that keeps no permission bits (vfat, WSL drvfs): the creator refuses with the reason and leaves no file', async function () {
    // Every file shows 0755 and chmod does nothing, as on vfat mounted "quiet".
    const { r, left } = await openOnBindfs(this, '-p 0755 --chmod-ignore', '0755');
    assert.deepEqual([r.signal, r.code, r.out], [null, 0, 'EACCES true true\n'], r.err);
    assert.deepEqual(left, []);
  });

  it('a file system that gives files another owner (NFS root squash, an id mapping): the creator refuses with the reason and leaves no file', async function () {
    const { r, left } = await openOnBindfs(this, '-u 65534', 'owner uid 65534');
    assert.deepEqual([r.signal, r.code, r.out], [null, 0, 'EACCES true true\n'], r.err);
    assert.deepEqual(left, []);
  });

  it('a file found corrupt while locks are held and awaited: every request rejects with ECORRUPT, no error escapes, and the process ends by itself', async function () {
    const r = await runNode(`
      const fs = require('node:fs');
      const { openLockManager } = require(PKG);
      const outcome = (p) => p.then((v) => 'resolved ' + v, (e) => typeof e.code === 'string' ? e.code : e.name);
      (async () => {
        const m = await openLockManager('corrupt', { dir: DIR });
        let releaseHeld;
        let granted;
        const ready = new Promise((resolve) => { granted = resolve; });
        const held = m.request('x', () => { granted(); return new Promise((r) => { releaseHeld = r; }); });
        await ready;
        const waiting = m.request('x', () => 'waiting ran');
        const controller = new AbortController();
        const aborted = m.request('x', { signal: controller.signal }, () => 'aborted ran');
        const fd = fs.openSync(DIR + '/web-locks.corrupt', 'r+');
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

  // A directory like /dev/shm: anyone may create files in it, and only a
  // file's owner (or root) may remove or rename it.
  function sticky() {
    fs.chmodSync(dir, 0o1777);
  }
  // The names in the directory other than the scope's own file, and the
  // owner of each.
  const beside = (scope) => fs.readdirSync(dir).filter((n) => n.startsWith(`web-locks.${scope}.`)).sort()
    .map((n) => [n, fs.lstatSync(path.join(dir, n)).uid]);
  const userScript = (body) => `
    const { openLockManager } = require(PKG);
    const fs = require('node:fs');
    // The next line on stdin (read only once asked for: a process that
    // never asks may end while its stdin is open).
    const lines = [];
    let reading = false;
    const next = async () => {
      if (!reading) {
        reading = true;
        process.stdin.setEncoding('utf8').on('data', (t) => { for (const l of t.split('\\n')) if (l) lines.push(l); });
      }
      while (lines.length === 0) await new Promise((r) => process.stdin.once('data', r));
      return lines.shift();
    };
    const code = (e) => typeof e.code === 'string' ? e.code : e.name;
    (async () => { ${body} })().catch((e) => { console.log('failed', code(e), e.message); process.exitCode = 1; });`;

  it('another user who makes files at the names the next FIFOs would have cannot keep the owner out of a private scope', async function () {
    if (!root) pending(this, 'only root can run processes as other users');
    if (!openToOthers(process.execPath) || !openToOthers(PKG)) pending(this, 'another user could not run Node or the package from here');
    sticky();
    // The owner opens the private scope, then again and again, each time a
    // new agent (the old FIFO names came from the record's offset and
    // generation, so the next agent at a freed record had the next name).
    const owner = runNode(userScript(`
      let m = await openLockManager('private', { dir: DIR });
      console.log('opened');
      await next();
      await m.close();
      const results = [];
      for (let i = 0; i < 6; i++) {
        try {
          m = await openLockManager('private', { dir: DIR });
          results.push(await m.request('x', (lock) => lock.name));
          await m.close();
        } catch (e) { results.push(code(e)); }
      }
      console.log(results.join(' '));`), { dir, user: { uid: 65533, gid: 65533 } });
    await owner.said('opened');
    // Another user lists the directory and takes the next names of every
    // FIFO it sees: each dot-separated number in its name plus 1 to 8.
    const squatter = runNode(`
      const fs = require('node:fs');
      let made = 0;
      for (const name of fs.readdirSync(DIR)) {
        const parts = name.split('.');
        if (name === 'web-locks.private' || !name.startsWith('web-locks.private.')) continue;
        for (let at = 2; at < parts.length; at++) {
          for (let k = 1n; k <= 8n; k++) {
            const next = parts.slice();
            next[at] = (BigInt('0x' + parts[at]) + k).toString(16).padStart(parts[at].length, '0');
            try { fs.writeFileSync(DIR + '/' + next.join('.'), 'mine', { flag: 'wx' }); made++; } catch {}
          }
        }
      }
      console.log('made', made > 0);`, { dir, user: { uid: 65534, gid: 65534 } });
    const s = await squatter.ended;
    assert.deepEqual([s.code, s.out], [0, 'made true\n'], s.err);
    owner.child.stdin.end('go\n');
    const r = await owner.ended;
    assert.deepEqual([r.code, r.out], [0, 'opened\nx x x x x x\n'], r.err);
  });

  it('a scope opened to others (0o666) is joined by a user outside the file\'s group, and a lock goes back and forth between the two users', async function () {
    if (!root) pending(this, 'only root can run processes as other users');
    if (!openToOthers(process.execPath) || !openToOthers(PKG)) pending(this, 'another user could not run Node or the package from here');
    sticky();
    // Each user in a group of its own (spawn drops root's other groups).
    const first = runNode(userScript(`
      const m = await openLockManager('open', { dir: DIR, mode: 0o666 });
      let release;
      const held = m.request('x', () => { console.log('held'); return new Promise((r) => { release = r; }); });
      await next();
      const again = m.request('x', (lock) => lock.name);
      release();
      await held;
      console.log('back', await again);
      await m.close();`), { dir, user: { uid: 65533, gid: 65533 } });
    await first.said('held');
    const second = runNode(userScript(`
      const m = await openLockManager('open', { dir: DIR, mode: 0o666 });
      const got = m.request('x', async (lock) => { console.log('granted'); await next(); return lock.name; });
      console.log('queued');
      console.log(await got);
      await m.close();`), { dir, user: { uid: 65534, gid: 65534 } });
    await second.said('queued');
    // Each process's agent's FIFO, and in the POSIX family its watcher's.
    const each = machineFamily() === 'posix' ? 2 : 1;
    const fifos = beside('open').map(([n]) => fs.lstatSync(path.join(dir, n)));
    assert.deepEqual(fifos.map((st) => [st.isFIFO(), st.mode & 0o777]).sort(), Array(2 * each).fill([true, 0o622]));
    assert.deepEqual(fifos.map((st) => st.gid).sort(), [...Array(each).fill(65533), ...Array(each).fill(65534)]);
    first.child.stdin.write('release\n');
    await second.said('granted');
    second.child.stdin.end('release\n');
    first.child.stdin.end();
    const [a, b] = await Promise.all([first.ended, second.ended]);
    assert.deepEqual([a.code, a.out], [0, 'held\nback x\n'], a.err);
    assert.deepEqual([b.code, b.out], [0, 'queued\ngranted\nx\n'], b.err);
    assert.deepEqual(beside('open'), []);
  });

  for (const signal of ['SIGKILL', 'SIGTERM']) {
    it(`after ${signal} of a scope's last process, its FIFOs stay beside the file until a process of the same user opens the scope (as the README says)`, async function () {
      if (!root) pending(this, 'only root can run processes as other users');
      if (!openToOthers(process.execPath) || !openToOthers(PKG)) pending(this, 'another user could not run Node or the package from here');
      sticky();
      // Two users of one group share the scope.
      const open = `await (await openLockManager('kill', { dir: DIR, mode: 0o660 })).close(); console.log('done');`;
      const asFirst = { uid: 65533, gid: 65533 };
      const asSecond = { uid: 65534, gid: 65533 };
      let r = await runNode(userScript(open), { dir, user: asFirst }).ended;
      assert.equal(r.out, 'done\n', r.err);
      // The second user's process, with a worker thread that opened the
      // scope too (one agent, and one FIFO, per thread), is killed while
      // both threads have it open (each kept alive by a timer).
      const victim = runNode(userScript(`
        const { Worker } = require('node:worker_threads');
        const m = await openLockManager('kill', { dir: DIR, mode: 0o660 });
        const w = new Worker(\`const { openLockManager } = require(\${JSON.stringify(PKG)});
          setInterval(() => {}, 1000);
          openLockManager('kill', { dir: \${JSON.stringify(DIR)}, mode: 0o660 }).then(() => require('node:worker_threads').parentPort.postMessage('open'));\`, { eval: true });
        await new Promise((r) => w.once('message', r));
        setInterval(() => {}, 1000);
        await m.request('x', () => { console.log('open'); return new Promise(() => {}); });`), { dir, user: asSecond });
      await victim.said('open');
      victim.child.kill(signal);
      r = await victim.ended;
      assert.equal(r.signal, signal);
      const left = beside('kill');
      // One per thread that had the scope open, and in the POSIX family
      // its watcher's.
      assert.equal(left.length, machineFamily() === 'posix' ? 3 : 2);
      for (const [name, uid] of left) {
        assert.match(name, /^web-locks\.kill\.[0-9a-f]{16}$/);
        assert.equal(uid, 65534);
      }
      // Another user's process cannot remove them (the directory is sticky)...
      r = await runNode(userScript(open), { dir, user: asFirst }).ended;
      assert.equal(r.out, 'done\n', r.err);
      assert.deepEqual(beside('kill'), left);
      // ...a process of their user does, and then only the scope's file is left.
      r = await runNode(userScript(open), { dir, user: asSecond }).ended;
      assert.equal(r.out, 'done\n', r.err);
      assert.deepEqual(fs.readdirSync(dir), ['web-locks.kill']);
    });
  }

  it('a dir with a NUL byte rejects with a TypeError, and the file it would have been cut to is left byte for byte', async function () {
    const { openLockManager } = api();
    const image = path.join(dir, 'disk.img');
    const bytes = Buffer.alloc(3 * 4096);
    for (let i = 512; i < bytes.length; i++) bytes[i] = (i * 7 + 3) & 0xff;
    fs.writeFileSync(image, bytes);
    await assert.rejects(openLockManager('s', { dir: `${image}\0` }), (err) => err instanceof TypeError && /null bytes/.test(err.message));
    await assert.rejects(openLockManager('s', { dir: `${dir}/\uD800` }), (err) => err instanceof TypeError && /lone surrogate/.test(err.message));
    assert.deepEqual(fs.readFileSync(image), bytes);
    // The binding refuses such a path too, whoever calls it.
    const m = await openLockManager('other', { dir });
    try {
      const binding = require(path.join(PKG, 'lib', 'binding.js'));
      assert.throws(() => binding.open(`${image}\0/web-locks.s`, 8192, 0o600, 'id', true), (err) => err instanceof TypeError && /null bytes/.test(err.message));
    } finally {
      await m.close();
    }
    assert.deepEqual(fs.readFileSync(image), bytes);
  });

  it('a file at the scope\'s path that web-locks did not make (one that begins with zeros) is refused, never written', async function () {
    const { openLockManager } = api();
    const file = path.join(dir, 'web-locks.img');
    const bytes = Buffer.alloc(4 * 4096);
    for (let i = 4096; i < bytes.length; i++) bytes[i] = (i * 13 + 1) & 0xff;
    fs.writeFileSync(file, bytes, { mode: 0o600 });
    await assert.rejects(openLockManager('img', { dir }), (err) => err.code === 'ECORRUPT' && err.message.includes(file));
    assert.deepEqual(fs.readFileSync(file), bytes);
  });

  it('a scope\'s file with a second name (a hard link) is refused by both names, in this process and in another', async function () {
    const { openLockManager } = api();
    const a = await openLockManager('first', { dir });
    try {
      fs.linkSync(path.join(dir, 'web-locks.first'), path.join(dir, 'web-locks.second'));
      await assert.rejects(openLockManager('second', { dir }), (err) => err.code === 'EMLINK' && err.message.includes('web-locks.second'));
      const r = await runNode(userScript(`
        for (const scope of ['second', 'first']) {
          try { await openLockManager(scope, { dir: DIR }); console.log('opened', scope); } catch (e) { console.log(scope, code(e)); }
        }`), { dir, ms: 15000 }).ended;
      assert.deepEqual([r.code, r.out], [0, 'second EMLINK\nfirst EMLINK\n'], r.err);
      fs.unlinkSync(path.join(dir, 'web-locks.second'));
      assert.equal(await a.request('x', (lock) => lock.name), 'x');
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
