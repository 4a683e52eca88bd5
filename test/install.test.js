'use strict';
// Where web-locks cannot run (Windows on arm64 or ia32: no prebuilt binary,
// and its C sources need GCC or Clang, not node-gyp's MSVC), installing
// fails with a sentence naming what is supported, before any compiler
// starts, and loading a copy installed without its script says the same.
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { PKG } = require('./fixtures/util');

const { unsupported, unbuildable } = require(path.join(PKG, 'lib', 'platform.js'));

// Runs a script with process.platform and process.arch as given.
function runAs (platform, arch, args, options = {}) {
  const fake = `Object.defineProperty(process, 'platform', { value: ${JSON.stringify(platform)} });
    Object.defineProperty(process, 'arch', { value: ${JSON.stringify(arch)} });`;
  return spawnSync(process.execPath, ['-e', `${fake}\n${args}`], Object.assign({ encoding: 'utf8', timeout: 15000 }, options));
}

describe('platforms web-locks does not support', function () {
  this.timeout(20000);

  it('are Windows on any CPU but x64; Linux, macOS, other Unix systems and Windows x64 are supported', function () {
    for (const arch of ['arm64', 'ia32']) {
      const reason = unsupported('win32', arch);
      assert.ok(reason.includes(`Windows on ${arch}`) && reason.includes('Windows x64') && reason.includes('Linux x64 and arm64') &&
        reason.includes('macOS'), reason);
    }
    for (const [platform, arch] of [['win32', 'x64'], ['linux', 'x64'], ['linux', 'arm64'], ['darwin', 'arm64'], ['darwin', 'x64'], ['freebsd', 'x64']]) {
      assert.equal(unsupported(platform, arch), null, `${platform}-${arch}`);
    }
  });

  it('fail at install with that sentence, and no compiler started', function () {
    // node-gyp-build's installer, were it reached, would find no prebuild for
    // win32-arm64 and run node-gyp, which says "gyp" on its way.
    const r = runAs('win32', 'arm64', `process.argv[1] = ${JSON.stringify(path.join(PKG, 'scripts', 'install.js'))};
      require(process.argv[1])`, { cwd: PKG });
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.equal(r.stderr.trim(), unsupported('win32', 'arm64'));
    assert.doesNotMatch(r.stdout + r.stderr, /gyp/);
  });

  it('start nothing at install even when a build from source is asked for, where elsewhere node-gyp-build runs node-gyp', function () {
    // Shims on an otherwise empty PATH log every call: node-gyp-build's
    // installer runs `node-gyp rebuild` from PATH (no node-gyp package is
    // resolvable from it here) when npm_config_build_from_source is set.
    if (process.platform === 'win32') this.skip(); // the shims are sh scripts
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-install-'));
    try {
      const bin = path.join(dir, 'bin');
      fs.mkdirSync(bin);
      for (const tool of ['node-gyp', 'node-gyp-build-test', 'cc', 'gcc', 'clang', 'make', 'python3', 'python']) {
        fs.writeFileSync(path.join(bin, tool), '#!/bin/sh\necho "$0 $*" >> "$WL_SHIM_LOG"\nexit 0\n', { mode: 0o755 });
      }
      const log = path.join(dir, 'log');
      const script = `process.argv[1] = ${JSON.stringify(path.join(PKG, 'scripts', 'install.js'))}; require(process.argv[1])`;
      const env = { PATH: bin, WL_SHIM_LOG: log, npm_config_build_from_source: 'true' };
      const calls = () => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').trim() : '');

      const refused = runAs('win32', 'arm64', script, { cwd: PKG, env });
      assert.equal(refused.status, 1, refused.stdout + refused.stderr);
      assert.equal(refused.stderr.trim(), unsupported('win32', 'arm64'));
      assert.equal(calls(), '', 'nothing started on win32-arm64');

      // The same on a supported platform reaches node-gyp-build's installer,
      // which honours npm_config_build_from_source: the shims see node-gyp.
      const supported = runAs('linux', 'x64', script, { cwd: PKG, env });
      assert.equal(supported.status, 0, supported.stdout + supported.stderr);
      assert.equal(calls(), `${path.join(bin, 'node-gyp')} rebuild`);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('fail at load with ENOTSUP and that sentence, not an advice to rebuild', function () {
    const r = runAs('win32', 'ia32', `try { require(${JSON.stringify(PKG)}) } catch (error) {
      console.log(JSON.stringify({ code: error.code, message: error.message })) }`);
    assert.equal(r.status, 0, r.stderr);
    const { code, message } = JSON.parse(r.stdout);
    assert.equal(code, 'ENOTSUP');
    assert.equal(message, unsupported('win32', 'ia32'));
  });
});

// WEB_LOCKS_NO_MACHINE at install asks for the addon without the machine-wide
// manager (binding.gyp): no prebuilt binary is that, so the install script
// compiles it even where one matches, and node-gyp-build loads that build
// first (test/tools/no-machine.sh installs so, with a prebuild present, and
// runs the suites on the result).
describe('WEB_LOCKS_NO_MACHINE at install', function () {
  this.timeout(20000);

  it('compiles from source, where a matching prebuilt binary is otherwise only checked to load', function () {
    if (process.platform === 'win32') this.skip(); // the shims are sh scripts
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-install-'));
    try {
      const bin = path.join(dir, 'bin');
      fs.mkdirSync(bin);
      // node-gyp-build's installer runs node-gyp-build-test (is there a
      // binary that loads?) unless asked to build from source, and then
      // `node-gyp rebuild` from PATH; each shim logs its call and the
      // variable binding.gyp reads.
      for (const tool of ['node-gyp', 'node-gyp-build-test']) {
        fs.writeFileSync(path.join(bin, tool), '#!/bin/sh\necho "$0 $* [$WEB_LOCKS_NO_MACHINE]" >> "$WL_SHIM_LOG"\nexit 0\n', { mode: 0o755 });
      }
      const log = path.join(dir, 'log');
      const script = `process.argv[1] = ${JSON.stringify(path.join(PKG, 'scripts', 'install.js'))}; require(process.argv[1])`;
      const calls = () => {
        const text = fs.existsSync(log) ? fs.readFileSync(log, 'utf8').trim() : '';
        fs.rmSync(log, { force: true });
        return text;
      };

      const plain = runAs('linux', 'x64', script, { cwd: PKG, env: { PATH: bin, WL_SHIM_LOG: log } });
      assert.equal(plain.status, 0, plain.stdout + plain.stderr);
      assert.equal(calls(), `${path.join(bin, 'node-gyp-build-test')}  []`);

      const noMachine = runAs('linux', 'x64', script, { cwd: PKG, env: { PATH: bin, WL_SHIM_LOG: log, WEB_LOCKS_NO_MACHINE: '1' } });
      assert.equal(noMachine.status, 0, noMachine.stdout + noMachine.stderr);
      assert.equal(calls(), `${path.join(bin, 'node-gyp')} rebuild [1]`);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  // The install script as on `platform`, with `env`: each child_process call
  // the installer makes is logged (and the process ends there): a build
  // from source spawns node-gyp; the prebuilt binary's path execs
  // node-gyp-build-test.
  function installLogged(platform, env) {
    const hook = `const cp = require('node:child_process');
      cp.spawn = (c, a) => { console.log('spawn', c, a.join(' ')); process.exit(0) };
      cp.exec = (c) => { console.log('exec', c); process.exit(0) };`;
    const script = `${hook}\nprocess.argv[1] = ${JSON.stringify(path.join(PKG, 'scripts', 'install.js'))}; require(process.argv[1])`;
    return runAs(platform, 'x64', script, { cwd: PKG, env: { PATH: process.env.PATH, ...env } });
  }

  it('on Windows x64, where only the prebuilt binary can be had, fails at once with the reason, and starts nothing', function () {
    for (const asked of [{ WEB_LOCKS_NO_MACHINE: '1' }, { WEB_LOCKS_OS: 'posix' }, { npm_config_build_from_source: 'true' }]) {
      const r = installLogged('win32', asked);
      assert.equal(r.status, 1, r.stdout + r.stderr);
      assert.equal(r.stderr.trim(), unbuildable('win32', asked));
      assert.match(r.stderr, new RegExp(`cannot be compiled on Windows.*${Object.keys(asked)[0]}`));
      assert.equal(r.stdout, '', `nothing started for ${JSON.stringify(asked)}`);
    }
  });

  it('on Windows x64, refuses exactly what would build from source: install.js and node-gyp-build read the variables, not unbuildable', function () {
    // Any non-empty value sets WEB_LOCKS_NO_MACHINE and WEB_LOCKS_OS
    // (install.js, binding.gyp), "false" included: a build, to refuse.
    for (const asked of [{ WEB_LOCKS_NO_MACHINE: 'false' }, { WEB_LOCKS_OS: 'false' }]) {
      const r = installLogged('win32', asked);
      assert.doesNotMatch(r.stdout, /spawn/, `node-gyp started for ${JSON.stringify(asked)}`);
      assert.equal(r.status, 1, r.stdout + r.stderr);
    }
    // node-gyp-build builds from source only for "true": anything else
    // (npm install --build-from-source=sqlite3, for another package) takes
    // the prebuilt binary, and must not be refused.
    for (const value of ['sqlite3', '1', '0']) {
      const r = installLogged('win32', { npm_config_build_from_source: value });
      assert.equal(r.stdout.trim(), 'exec node-gyp-build-test', `npm_config_build_from_source=${value}: ${r.stderr}`);
    }
  });

  it('a build without the machine-wide manager says why: WEB_LOCKS_NO_MACHINE on Linux, macOS and Windows, those platforms elsewhere', function () {
    const target = { file: '/nowhere/web-locks.x', size: 8192, mode: 0o600 };
    const message = (platform) => {
      const r = runAs(platform, 'x64', `try { require(${JSON.stringify(path.join(PKG, 'lib', 'manager-machine.js'))}).openMachine({}, ${JSON.stringify(target)}) }
        catch (error) { console.log(JSON.stringify({ name: error.name, message: error.message })) }`);
      assert.equal(r.status, 0, r.stderr);
      return JSON.parse(r.stdout);
    };
    for (const platform of ['linux', 'darwin', 'win32']) {
      const built = message(platform);
      assert.equal(built.name, 'NotSupportedError');
      assert.match(built.message, /built with WEB_LOCKS_NO_MACHINE set/);
      assert.doesNotMatch(built.message, /needs Linux/);
    }
    for (const platform of ['freebsd', 'sunos']) {
      const other = message(platform);
      assert.equal(other.name, 'NotSupportedError');
      assert.match(other.message, /it needs Linux, macOS or Windows/);
    }
  });
});
