'use strict';
// Loading the package where no native build matches (no prebuilt binary for
// the platform, and none built at install): an error that says what to do.
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
});
