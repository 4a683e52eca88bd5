'use strict';
// The randomized multi-thread stress test (test/stress/), bounded: a few
// fixed seeds and one random seed, each run in a child process (the stress
// driver loads the package through its instrumentation, so it needs a thread
// that has not loaded it yet). A failure shows the seed, the command that
// reruns it, and the operation trace. Longer runs: npm run stress -- --seconds N
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');

const RUN = path.join(__dirname, 'stress', 'run.js');

function stress(args, ms) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [RUN, '--quiet', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    const timer = setTimeout(() => {
      out += `\n(killed after ${ms} ms)`;
      child.kill('SIGKILL');
    }, ms);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, out });
    });
  });
}

describe('stress: random operations on many threads against the reference model', function () {
  const SECONDS = 3;
  this.timeout((SECONDS + 40) * 1000);

  const seeds = [1, 2, 3, (Math.random() * 2 ** 31) >>> 0];
  for (const [i, seed] of seeds.entries()) {
    it(`seed ${seed}${i === seeds.length - 1 ? ' (random)' : ''}: mutual exclusion, every request ends once, grants in queue order, state equal to the model's, nothing left`, async function () {
      const r = await stress(['--seed', String(seed), '--seconds', String(SECONDS), '--threads', '4'], (SECONDS + 35) * 1000);
      assert.equal(r.code, 0, `seed ${seed} (rerun: node test/stress/run.js --seed ${seed} --seconds ${SECONDS})\n${r.out}`);
      const stats = JSON.parse(r.out.slice(r.out.indexOf('stress: ok ') + 11).split('\n')[0]);
      // The run did what it is for (loose enough for a slow machine or a
      // sanitizer build).
      assert.ok(stats.requests > 100 && stats.granted > 50, JSON.stringify(stats));
      assert.ok(stats.threadsSpawned > 4 && Object.keys(stats.ended).filter((k) => k !== 'graceful').length >= 3, JSON.stringify(stats));
    });
  }
});

describe('stress: random operations from many processes on one scope against the reference model', function () {
  // Longer than the threads' run: starting processes takes most of it.
  const SECONDS = 6;
  this.timeout((SECONDS + 60) * 1000);
  if (process.platform !== 'linux') return;

  const seeds = [1, (Math.random() * 2 ** 31) >>> 0];
  for (const [i, seed] of seeds.entries()) {
    it(`seed ${seed}${i === seeds.length - 1 ? ' (random)' : ''}: every event reaches its process, mutual exclusion, query() equal to the model's, processes killed, exiting and crashing, nothing left`, async function () {
      const r = await stress(['--seed', String(seed), '--seconds', String(SECONDS), '--processes', '4'], (SECONDS + 55) * 1000);
      assert.equal(r.code, 0, `seed ${seed} (rerun: node test/stress/run.js --processes 4 --seed ${seed} --seconds ${SECONDS})\n${r.out}`);
      const stats = JSON.parse(r.out.slice(r.out.indexOf('stress: ok ') + 11).split('\n')[0]);
      assert.ok(stats.requests > 30 && stats.granted > 10 && stats.stolen + stats.aborted + stats.unavailable > 3, JSON.stringify(stats));
      assert.ok(stats.killed + stats.exited + stats.crashed >= 3, JSON.stringify(stats));
    });
  }
});

describe('stress: random operations from processes on one PostgreSQL scope against the reference model', function () {
  // Each run starts a server of its own (restartable, unlike the suite's),
  // about a second, and ends it.
  const SECONDS = 6;
  // Steps made however long they take (a loaded machine makes fewer in the
  // time): enough for the counts below.
  const MIN_STEPS = 120;
  this.timeout((SECONDS + 90) * 1000);
  const restartable = !process.env.WEB_LOCKS_TEST_POSTGRES;

  const seeds = [1, (Math.random() * 2 ** 31) >>> 0];
  for (const [i, seed] of seeds.entries()) {
    // The random seed's run cuts the network too (a keepalive of 1 s).
    const cut = i === seeds.length - 1 ? ['--cut'] : [];
    it(`seed ${seed}${cut.length ? ' (random)' : ''}: every event reaches its process, mutual exclusion, query() equal to the model's, processes killed, sessions ended by the server${restartable ? ', the server restarted' : ''}${cut.length ? ', the network cut' : ''}, nothing left`, async function () {
      const r = await stress(['--postgres', '--seed', String(seed), '--seconds', String(SECONDS), '--min-steps', String(MIN_STEPS), '--processes', '4', ...cut], (SECONDS + 85) * 1000);
      assert.equal(r.code, 0, `seed ${seed} (rerun: node test/stress/run.js --postgres --processes 4 --seed ${seed} --seconds ${SECONDS} --min-steps ${MIN_STEPS} ${cut.join(' ')})\n${r.out}`);
      const stats = JSON.parse(r.out.slice(r.out.indexOf('stress: ok ') + 11).split('\n')[0]);
      // A count the run never made is absent from its figures.
      const count = (key) => stats[key] || 0;
      const said = JSON.stringify(stats);
      assert.ok(count('requests') > 30 && count('granted') > 10 && count('stolen') + count('aborted') + count('unavailable') > 3, said);
      // Every fault of the mix comes at least once (the driver sees to it).
      assert.ok(count('killed') >= 1 && count('crashed') >= 1 && count('terminated') >= 1, said);
      assert.ok(count('killedHolding') + count('killedWaiting') + count('terminatedHolding') + count('terminatedWaiting') >= 1, said);
      if (restartable) assert.equal(count('restarts'), 1, said);
      if (cut.length) assert.ok(count('cut') >= 1, said);
    });
  }
});

describe("stress: the network cut's TCP proxy", function () {
  const net = require('node:net');
  const { Proxy } = require('./fixtures/tcp-proxy');
  // How long "nothing arrives" is watched for: an absence has no event.
  const QUIET_MS = 300;

  let echo;
  let proxy;
  const sockets = [];
  beforeEach(async function () {
    echo = net.createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => {});
      socket.pipe(socket);
    });
    await new Promise((resolve) => echo.listen(0, '127.0.0.1', resolve));
    proxy = await Proxy.start('127.0.0.1', echo.address().port);
  });
  afterEach(async function () {
    await proxy.close();
    for (const socket of sockets.splice(0)) socket.destroy();
    await new Promise((resolve) => echo.close(resolve));
  });

  function connect() {
    return new Promise((resolve, reject) => {
      const socket = net.connect(proxy.port, '127.0.0.1', () => resolve(socket));
      socket.once('error', reject);
      socket.setEncoding('utf8');
      socket.received = '';
      socket.on('data', (text) => { socket.received += text; });
    });
  }

  function echoed(socket, text) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no echo of ${text} within 5000 ms`)), 5000);
      const check = () => {
        if (!socket.received.endsWith(text)) return;
        clearTimeout(timer);
        socket.off('data', check);
        resolve();
      };
      socket.on('data', check);
      socket.write(text);
    });
  }

  it('forwards both ways; cut() stops forwarding on open connections without closing them; new connections are forwarded', async function () {
    const a = await connect();
    await echoed(a, 'one');
    let closed = false;
    a.on('close', () => { closed = true; });
    assert.equal(proxy.cut(), 1);
    assert.equal(proxy.forwarding, 0);
    a.write('two');
    // A server-side write of its own must not arrive either.
    sockets[0].write('three');
    await new Promise((resolve) => setTimeout(resolve, QUIET_MS));
    assert.equal(a.received, 'one');
    assert.equal(closed, false);
    assert.equal(a.destroyed, false);
    assert.equal(sockets[0].destroyed, false);
    const b = await connect();
    await echoed(b, 'four');
    assert.equal(proxy.forwarding, 1);
    assert.equal(proxy.cut(), 1);
    a.destroy();
    b.destroy();
  });
});
