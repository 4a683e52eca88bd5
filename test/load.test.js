'use strict';
// Loading the package where no native build matches (no prebuilt binary for
// the platform, and none built at install; or a build of another version of
// the package): an error that says what to do.
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { PKG } = require('./fixtures/util');

describe('loading the package', function () {
  this.timeout(20000);

  it('without a native build for this platform: an ENOBUILD error naming what is prebuilt and what to run', function () {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-load-'));
    try {
      const copy = path.join(dir, 'web-locks');
      fs.mkdirSync(copy);
      for (const entry of ['package.json', 'lib']) fs.cpSync(path.join(PKG, entry), path.join(copy, entry), { recursive: true });
      // Its dependency, wherever the package under test finds it: a copy, not
      // a symlink (Windows makes those for administrators only, wine not at all).
      fs.cpSync(path.dirname(require.resolve('node-gyp-build/package.json', { paths: [PKG] })),
        path.join(copy, 'node_modules', 'node-gyp-build'), { recursive: true });
      // A prebuilt binary of another platform only.
      fs.mkdirSync(path.join(copy, 'prebuilds', 'win32-arm64'), { recursive: true });
      const r = spawnSync(process.execPath, ['-e', `
        try { require(${JSON.stringify(copy)}) } catch (error) {
          console.log(JSON.stringify({ code: error.code, message: error.message, cause: String(error.cause && error.cause.message) }))
        }`], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      const { code, message, cause } = JSON.parse(r.stdout);
      assert.equal(code, 'ENOBUILD');
      assert.ok(message.includes(`${process.platform}-${process.arch}`) && message.includes('win32-arm64') &&
        message.includes('npm rebuild web-locks'), message);
      assert.ok(cause.startsWith('No native build was found'), cause);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  // What node-gyp-build found stands in for a build of another version: an
  // addon from before the interface had a number, and one of another number.
  for (const [what, addon, says] of [['an addon without an interface number', '{}', 'has no number'], ['an addon of interface 999', '{ abi: 999 }', 'is 999']]) {
    it(`with a native build of another version (${what}): an ENOBUILD error that says to rebuild`, function () {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-load-'));
      try {
        const copy = path.join(dir, 'web-locks');
        fs.mkdirSync(copy);
        for (const entry of ['package.json', 'lib']) fs.cpSync(path.join(PKG, entry), path.join(copy, entry), { recursive: true });
        fs.mkdirSync(path.join(copy, 'node_modules', 'node-gyp-build'), { recursive: true });
        fs.writeFileSync(path.join(copy, 'node_modules', 'node-gyp-build', 'index.js'), `module.exports = () => (${addon})\n`);
        const r = spawnSync(process.execPath, ['-e', `
          try { require(${JSON.stringify(copy)}) } catch (error) {
            console.log(JSON.stringify({ code: error.code, message: error.message }))
          }`], { encoding: 'utf8' });
        assert.equal(r.status, 0, r.stderr);
        const { code, message } = JSON.parse(r.stdout);
        assert.equal(code, 'ENOBUILD');
        assert.ok(message.includes('another version of web-locks') && message.includes(says) &&
          message.includes('npm rebuild web-locks'), message);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  }

  it('the addon built here has the interface this lib/ needs', function () {
    const r = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(PKG)}); console.log(require('node-gyp-build')(${JSON.stringify(PKG)}).abi)`],
      { encoding: 'utf8', cwd: PKG });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), '1');
  });
});
