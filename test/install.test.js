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

const { unsupported } = require(path.join(PKG, 'lib', 'platform.js'));

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

  it('fail at load with ENOTSUP and that sentence, not an advice to rebuild', function () {
    const r = runAs('win32', 'ia32', `try { require(${JSON.stringify(PKG)}) } catch (error) {
      console.log(JSON.stringify({ code: error.code, message: error.message })) }`);
    assert.equal(r.status, 0, r.stderr);
    const { code, message } = JSON.parse(r.stdout);
    assert.equal(code, 'ENOTSUP');
    assert.equal(message, unsupported('win32', 'ia32'));
  });
});
