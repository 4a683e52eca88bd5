'use strict';
// The README's code blocks, run as written (a doc test).
//
// The rule: every fenced code block of README.md is run, unless the line
// before it (blank lines aside) is an HTML comment saying why not:
//
//   <!-- not run: a fragment: db is your database client -->
//
// Mark that way a fragment (it uses what the reader's code defines), and
// every block that is not JavaScript (shell, SQL, ...). An unmarked block of
// another language fails here. A ```js block is written to a file of its
// own and run by node in a directory where `web-locks` is this package and
// `pg` and `@opentelemetry/api` are installed: as an ES module (.mjs) if it has an import or export
// statement, else as CommonJS (.cjs), as a reader who saves it would. It
// passes if node exits with status 0 within BLOCK_TIMEOUT_MS and writes
// nothing to stderr. A block with the README's example connection string
// (POSTGRES_URL) runs against the tests' PostgreSQL server
// (test/fixtures/postgres.js), that string replaced by the server's. A
// machine-wide scope that a block opened in /dev/shm (a string literal
// given to openLockManager) is removed afterwards, unless it was there
// before. A block with `await using` (syntax of Node 24+) runs where the
// running Node has that syntax, and is skipped, saying why, where it has not.
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { PKG, packageDir, HAS_AWAIT_USING } = require('./fixtures/util');
const { postgres } = require('./fixtures/postgres');

const README = path.join(PKG, 'README.md');
const POSTGRES_URL = 'postgres://app@db/app';
const BLOCK_TIMEOUT_MS = 20000;
const SHM = '/dev/shm';

// [{ line, lang, code, skip }]: skip is the reason given by the marker, or
// null. line is the fence's, counted from 1.
function codeBlocks(text) {
  const lines = text.split('\n');
  const blocks = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\S*)\s*$/.exec(lines[i]);
    if (!open) continue;
    const start = i;
    const body = [];
    for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]); i++) body.push(lines[i].slice(open[1].length));
    let before = start - 1;
    while (before >= 0 && lines[before].trim() === '') before--;
    const marker = before >= 0 ? /^\s*<!--\s*not run:\s*(.*?)\s*-->\s*$/.exec(lines[before]) : null;
    blocks.push({ line: start + 1, lang: open[2], code: body.join('\n') + '\n', skip: marker ? marker[1] : null });
  }
  return blocks;
}


function isModule(code) {
  return /^\s*(import\s*[\w{*'"]|export\s)/m.test(code);
}

function run(file, cwd) {
  return new Promise((resolve) => {
    execFile(process.execPath, [file], { cwd, timeout: BLOCK_TIMEOUT_MS, killSignal: 'SIGKILL' }, (error, stdout, stderr) => {
      resolve({ code: error ? error.code : 0, signal: error ? error.signal : null, killed: !!(error && error.killed), stdout, stderr });
    });
  });
}

// The machine-wide scopes a block opens by name, whose files it may leave.
function scopeFiles(code) {
  const scopes = [...code.matchAll(/openLockManager\(\s*'([A-Za-z0-9._-]+)'/g)].map((m) => m[1]);
  let entries = [];
  try {
    entries = fs.readdirSync(SHM);
  } catch {}
  return entries.filter((entry) => scopes.some((scope) => entry === `web-locks.${scope}` || entry.startsWith(`web-locks.${scope}.`)));
}

describe('README.md: every code block runs as written, or is marked <!-- not run: why -->', function () {
  this.timeout(BLOCK_TIMEOUT_MS + 60000);

  let dir;

  before(function () {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-readme-'));
    const modules = path.join(dir, 'node_modules');
    fs.mkdirSync(modules);
    fs.symlinkSync(PKG, path.join(modules, 'web-locks'), 'dir');
    fs.symlinkSync(packageDir('pg'), path.join(modules, 'pg'), 'dir');
    fs.mkdirSync(path.join(modules, '@opentelemetry'));
    fs.symlinkSync(packageDir('@opentelemetry/api'), path.join(modules, '@opentelemetry', 'api'), 'dir');
  });

  after(function () {
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  const blocks = codeBlocks(fs.readFileSync(README, 'utf8'));

  it('has code blocks, and a reason in every marker', function () {
    assert.ok(blocks.some((b) => b.skip === null), 'no block is run');
    for (const b of blocks) assert.notEqual(b.skip, '', `line ${b.line}: a marker without a reason`);
  });

  for (const block of blocks) {
    const first = block.code.split('\n').find((l) => l.trim() !== '') || '';
    const title = `line ${block.line} (${block.lang || 'no language'}): ${first.trim().slice(0, 60)}`;
    if (block.skip !== null) {
      it(`${title} [not run: ${block.skip}]`);
      continue;
    }
    if (!HAS_AWAIT_USING && /\bawait using\b/.test(block.code)) {
      it(`${title} [not run: Node ${process.version} has no \`await using\`]`);
      continue;
    }
    it(title, async function () {
      assert.equal(block.lang, 'js', `a \`\`\`${block.lang} block is not run here: mark it with <!-- not run: why --> on the line before`);
      let code = block.code;
      if (code.includes(POSTGRES_URL)) code = code.split(POSTGRES_URL).join((await postgres()).url);
      const file = path.join(dir, `line-${block.line}.${isModule(code) ? 'mjs' : 'cjs'}`);
      fs.writeFileSync(file, code);
      const before = new Set(scopeFiles(code));
      try {
        const r = await run(file, dir);
        const said = `\n--- ${path.basename(file)}\n${code}--- exit ${r.code}${r.signal ? ` (${r.signal})` : ''}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;
        assert.ok(!r.killed, `did not end within ${BLOCK_TIMEOUT_MS} ms${said}`);
        assert.equal(r.code, 0, `failed${said}`);
        assert.equal(r.stderr, '', `wrote to stderr${said}`);
      } finally {
        for (const entry of scopeFiles(code)) {
          if (!before.has(entry)) fs.rmSync(path.join(SHM, entry), { force: true });
        }
      }
    });
  }
});
