'use strict';
// The published package (npm run test:pack; not part of the default suite:
// it packs, which rebuilds the addon, and installs, which takes seconds).
//
// `npm pack` runs prepack (scripts/prebuild.js), so the tarball carries
// stripped Node-API prebuilds for Linux x64 and arm64, glibc and musl, and
// Windows x64, which scripts/check-prebuilds.js checks. Installed into a fresh project with
// no network (npm --offline, and a dead proxy should npm try anyway) and no
// compiler on PATH (PATH holds only node, npm and sh, which npm runs scripts
// with), it must load that prebuild
// from CommonJS and ES modules, and an arm64 node under qemu-user must load
// the arm64 one. Without a prebuild, install compiles (with a compiler), or
// fails (without one).
//
// npm 11's install-script policy (allowScripts, --strict-allow-scripts) is
// tested on installs from a registry of the test's own (a worker thread
// serving the tarball and its dependency on 127.0.0.1): the policy matches
// registry packages by name, which a tarball install is not.
const assert = require('node:assert/strict');
const { execFileSync, spawnSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Worker } = require('node:worker_threads');

const { arm64Node } = require('../../scripts/arm64-node.js');

const ROOT = path.resolve(__dirname, '..', '..');
const PREBUILD_DIR = `prebuilds/${process.platform}-${process.arch}`;
// Each prebuild is tagged with its C library, so that a musl system does not
// load a glibc build; this machine is glibc.
const PREBUILD = 'web-locks.glibc.node';
const PREBUILDS = ['darwin-arm64/web-locks.node', 'darwin-x64/web-locks.node', 'linux-arm64/web-locks.glibc.node', 'linux-arm64/web-locks.musl.node',
  'linux-x64/web-locks.glibc.node', 'linux-x64/web-locks.musl.node', 'win32-x64/web-locks.node'].map((f) => `prebuilds/${f}`);

function run(command, args, options = {}) {
  const r = spawnSync(command, args, Object.assign({ encoding: 'utf8', maxBuffer: 64 << 20 }, options));
  if (r.error) throw r.error;
  return r;
}

function check(r, what) {
  const hint = /ENOTCACHED/.test(r.stderr)
    ? '\n(npm --offline needs node-gyp-build in the npm cache, with its registry metadata: see before())'
    : '';
  assert.equal(r.status, 0, `${what} failed (${r.status}):\n${r.stdout}\n${r.stderr}${hint}`);
  return r;
}

function which(name) {
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    const file = path.join(dir, name);
    try {
      fs.accessSync(file, fs.constants.X_OK);
      return file;
    } catch {}
  }
  return null;
}

// Headers for node-gyp without a download: those next to the running node
// (Debian's nodejs, the node-<os>-<arch> npm packages, nodejs.org tarballs).
function localNodedir() {
  const dir = path.resolve(path.dirname(process.execPath), '..');
  return fs.existsSync(path.join(dir, 'include', 'node', 'node_api.h')) ? dir : null;
}

// An environment for npm and node run as a user would, in a project of their
// own: none of the npm_* variables of an enclosing `npm run` (they would point
// npm at this repository) except the user's own settings, and no network.
function userEnv(PATH) {
  const env = {};
  const keep = new Set(['npm_config_cache', 'npm_config_userconfig', 'npm_config_cafile', 'npm_config_nodedir']);
  for (const [key, value] of Object.entries(process.env)) {
    if (/^npm_/i.test(key) && !keep.has(key.toLowerCase())) continue;
    if (/^(https?_proxy|no_proxy|all_proxy)$/i.test(key)) continue;
    env[key] = value;
  }
  const dead = 'http://127.0.0.1:9';
  Object.assign(env, {
    PATH,
    npm_config_offline: 'true',
    npm_config_proxy: dead,
    npm_config_https_proxy: dead,
    npm_config_noproxy: '',
    HTTP_PROXY: dead,
    HTTPS_PROXY: dead,
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    npm_config_update_notifier: 'false',
  });
  return env;
}

function freshProject(dir, fields = {}) {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: path.basename(dir), version: '1.0.0', private: true, ...fields }, null, 2));
  return dir;
}

// A registry on 127.0.0.1 that serves these tarballs (and their packuments),
// in a worker thread: spawnSync() blocks this thread while npm talks to it.
const REGISTRY = `
  const http = require('node:http');
  const fs = require('node:fs');
  const { parentPort, workerData } = require('node:worker_threads');
  const server = http.createServer((req, res) => {
    const url = decodeURIComponent(req.url.split('?')[0]);
    for (const p of workerData) {
      if (url === '/' + p.manifest.name) {
        const version = Object.assign({}, p.manifest, { _id: p.manifest.name + '@' + p.manifest.version, dist: p.dist(server) });
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ name: p.manifest.name, 'dist-tags': { latest: p.manifest.version }, versions: { [p.manifest.version]: version } }));
        return;
      }
      if (url === p.path) {
        res.end(fs.readFileSync(p.file));
        return;
      }
    }
    res.statusCode = 404;
    res.end('{}');
  });
  for (const p of workerData) {
    p.dist = (s) => ({ tarball: 'http://127.0.0.1:' + s.address().port + p.path, integrity: p.integrity, shasum: p.shasum });
  }
  server.listen(0, '127.0.0.1', () => parentPort.postMessage(server.address().port));
`;

async function startRegistry(tarballs) {
  const packages = tarballs.map((file) => {
    const manifest = JSON.parse(execFileSync('tar', ['-xzOf', file, 'package/package.json'], { encoding: 'utf8' }));
    const data = fs.readFileSync(file);
    return {
      manifest,
      file,
      path: `/${manifest.name}/-/${manifest.name}-${manifest.version}.tgz`,
      integrity: `sha512-${crypto.createHash('sha512').update(data).digest('base64')}`,
      shasum: crypto.createHash('sha1').update(data).digest('hex'),
    };
  });
  const worker = new Worker(REGISTRY, { eval: true, workerData: packages });
  const port = await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  return { url: `http://127.0.0.1:${port}/`, close: () => worker.terminate() };
}

// npm install web-locks@<version> from a registry of startRegistry(), with
// a cache of its own (nothing of the test's registry in the user's cache);
// other hosts stay behind userEnv's dead proxy.
function registryInstall(project, registry, env, extra = []) {
  const { version } = require(path.join(ROOT, 'package.json'));
  return run(process.execPath, [NPM_CLI, 'install', '--no-audit', '--no-fund', '--loglevel=warn', ...extra, `web-locks@${version}`], {
    cwd: project,
    env: Object.assign({}, env, {
      npm_config_registry: registry.url,
      npm_config_offline: 'false',
      npm_config_noproxy: '127.0.0.1',
      npm_config_cache: path.join(project, '.npm-cache'),
    }),
  });
}

function npmInstall(project, tarball, env, extra = []) {
  return run(process.execPath, [NPM_CLI, 'install', '--offline', '--no-audit', '--no-fund', '--loglevel=warn', ...extra, tarball], { cwd: project, env });
}

// npm's own script (the `npm` on PATH, through its symlinks).
const NPM_CLI = (() => {
  const npm = which('npm');
  return npm && fs.realpathSync(npm);
})();

// Takes a lock through require() and through the polyfill, across a worker
// too, and reports which addon file got loaded.
const CJS_CHECK = `
  const { Worker } = require('node:worker_threads');
  const { locks, Lock } = require('web-locks');
  const { installed } = require('web-locks/polyfill');
  (async () => {
    const lock = await locks.request('cjs', (l) => l instanceof Lock && { name: l.name, mode: l.mode });
    const viaNavigator = installed ? await navigator.locks.request('cjs-polyfill', (l) => l.name) : 'built-in kept';
    // A worker holds a lock; this thread sees it held.
    const worker = new Worker("const { locks } = require('web-locks'); const { parentPort } = require('node:worker_threads');" +
      "locks.request('cjs-worker', () => new Promise((r) => { parentPort.postMessage('held'); parentPort.once('message', r); }))", { eval: true });
    await new Promise((r) => worker.once('message', r));
    const blocked = await locks.request('cjs-worker', { ifAvailable: true }, (l) => l === null);
    await worker.terminate();
    const addon = require('node-gyp-build').resolve(require('node:path').dirname(require.resolve('web-locks/package.json')));
    console.log(JSON.stringify({ lock, viaNavigator, blocked, addon }));
  })().catch((e) => { console.error(e); process.exit(1); });
`;

const ESM_CHECK = `
  import webLocks, { locks, Lock } from 'web-locks';
  import polyfill, { installed } from 'web-locks/polyfill';
  import { createRequire } from 'node:module';
  const require = createRequire(import.meta.url);
  const lock = await locks.request('esm', async (l) => l instanceof Lock && { name: l.name, mode: l.mode });
  const viaNavigator = installed ? await navigator.locks.request('esm-polyfill', (l) => l.name) : 'built-in kept';
  const sameAsRequire = webLocks === require('web-locks') && locks === require('web-locks').locks && polyfill === require('web-locks/polyfill');
  console.log(JSON.stringify({ lock, viaNavigator, sameAsRequire }));
`;

describe('the packed package', function () {
  this.timeout(300000);

  let tmp;
  let tarball;
  let files;
  let nodeOnlyPath; // a PATH with node, npm and sh, and nothing else
  let depTarballs; // the package's dependencies' tarballs, from npm's cache

  before(function () {
    if (!NPM_CLI) this.skip();
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-pack-'));

    // npm pack, with its prepack (scripts/prebuild.js). Build logs share stdout with
    // the JSON report, which comes last.
    const packed = check(run(process.execPath, [NPM_CLI, 'pack', '--json', '--pack-destination', tmp], { cwd: ROOT }), 'npm pack');
    const report = JSON.parse(packed.stdout.slice(packed.stdout.search(/^\[$/m)))[0];
    tarball = path.join(tmp, report.filename);
    files = report.files.map((f) => f.path);

    // The offline installs resolve the package's dependency from npm's
    // cache, which `npm ci` fills with its tarball but not with the registry
    // metadata a range needs: fetch both now, while the registry is there.
    const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8'));
    const deps = path.join(tmp, 'deps');
    fs.mkdirSync(deps);
    depTarballs = [];
    for (const dep of Object.keys(require(path.join(ROOT, 'package.json')).dependencies)) {
      const { version } = lock.packages[`node_modules/${dep}`];
      check(run(process.execPath, [NPM_CLI, 'cache', 'add', `${dep}@${version}`], { cwd: ROOT }), `npm cache add ${dep}@${version}`);
      // Its tarball, for the test's registry (the registry's own, from the cache).
      const r = check(run(process.execPath, [NPM_CLI, 'pack', '--offline', '--json', '--pack-destination', deps, `${dep}@${version}`], {
        cwd: deps,
        env: userEnv(process.env.PATH),
      }), `npm pack ${dep}@${version}`);
      depTarballs.push(path.join(deps, JSON.parse(r.stdout.slice(r.stdout.search(/^\[$/m)))[0].filename));
    }

    const bin = path.join(tmp, 'bin');
    fs.mkdirSync(bin);
    fs.symlinkSync(process.execPath, path.join(bin, 'node'));
    fs.symlinkSync(NPM_CLI, path.join(bin, 'npm'));
    fs.symlinkSync(which('sh') || '/bin/sh', path.join(bin, 'sh'));
    nodeOnlyPath = bin;
  });

  after(function () {
    if (tmp && !process.env.WEB_LOCKS_KEEP_TMP) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('holds Node-API prebuilds for Linux x64 and arm64, glibc and musl (stripped), macOS x64 and arm64, and Windows x64, the ES module and type files, the SQL and the license, and no build output', function () {
    const prebuilds = files.filter((f) => f.startsWith('prebuilds/')).sort();
    assert.deepEqual(prebuilds, PREBUILDS, 'Node-API prebuilds, named for no particular Node ABI, tagged with their C library');
    for (const f of ['lib/index.js', 'lib/index.mjs', 'lib/polyfill.js', 'lib/polyfill.mjs', 'polyfill.js',
      'lib/polyfill-force.js', 'lib/polyfill-force.mjs', 'polyfill/force.js', 'polyfill/force.d.ts', 'polyfill/force.d.mts',
      'index.d.ts', 'index.d.mts', 'polyfill.d.ts', 'polyfill.d.mts', 'binding.gyp', 'src/binding/module.c', 'package.json',
      'lib/postgres/schema.sql', 'lib/postgres/migrations/001-layout-1.sql', 'lib/postgres/migrations/002-agent-channels.sql', 'lib/postgres/migrations/003-backend-identity.sql', 'LICENSE',
      'scripts/install.js', 'lib/platform.js', 'bin/web-locks.js']) {
      assert.ok(files.includes(f), `${f} is in the tarball`);
    }
    // scripts/install.js is the install script; no other script ships.
    assert.deepEqual(files.filter((f) => /^(build|test|scripts|bench|node_modules)\//.test(f) && f !== 'scripts/install.js'), []);
    for (const file of PREBUILDS.filter((f) => f.startsWith('prebuilds/linux-'))) {
      // An ELF file keeps a .symtab section unless stripped.
      assert.ok(!fs.readFileSync(path.join(ROOT, file)).includes('.symtab'), `${file} is stripped`);
    }
  });

  it('every prebuild needs glibc 2.28 at most, or musl, or Windows\'s own DLLs, or libSystem, and imports only what node and its C library have (scripts/check-prebuilds.js)', function () {
    const r = run(process.execPath, [path.join(ROOT, 'scripts', 'check-prebuilds.js'), path.join(ROOT, 'prebuilds')]);
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.equal(r.stdout.split('\n').filter((line) => line.startsWith('ok ')).length, PREBUILDS.length, r.stdout);
  });

  it('the test PATH has no compiler or build tool on it', function () {
    const r = run('/bin/sh', ['-c', 'for t in cc gcc clang make python3 python; do command -v $t; done; exit 0'], {
      env: { PATH: nodeOnlyPath },
    });
    assert.equal(r.stdout.trim(), '', 'found on the test PATH');
  });

  describe('installed offline without a compiler', function () {
    let project;
    let env;
    before(function () {
      project = freshProject(path.join(tmp, 'app'));
      env = userEnv(nodeOnlyPath);
      check(npmInstall(project, tarball, env), 'npm install of the tarball');
    });

    it('uses the prebuild: nothing was compiled', function () {
      const pkg = path.join(project, 'node_modules', 'web-locks');
      assert.ok(fs.existsSync(path.join(pkg, PREBUILD_DIR, PREBUILD)));
      assert.ok(!fs.existsSync(path.join(pkg, 'build')), 'no build/ directory');
    });

    it('require(): takes locks, through the polyfill and across a worker, with the prebuild', function () {
      const r = check(run(process.execPath, ['-e', CJS_CHECK], { cwd: project, env }), 'the CommonJS check');
      const out = JSON.parse(r.stdout);
      assert.deepEqual(out.lock, { name: 'cjs', mode: 'exclusive' });
      assert.ok(out.viaNavigator === 'cjs-polyfill' || out.viaNavigator === 'built-in kept');
      assert.equal(out.blocked, true);
      assert.equal(fs.realpathSync(out.addon), fs.realpathSync(path.join(project, 'node_modules', 'web-locks', PREBUILD_DIR, PREBUILD)));
    });

    it('import: takes locks, with the polyfill imported too, and shares require()\'s instance', function () {
      const file = path.join(project, 'check.mjs');
      fs.writeFileSync(file, ESM_CHECK);
      const r = check(run(process.execPath, [file], { cwd: project, env }), 'the ES module check');
      const out = JSON.parse(r.stdout);
      assert.deepEqual(out.lock, { name: 'esm', mode: 'exclusive' });
      assert.ok(out.viaNavigator === 'esm-polyfill' || out.viaNavigator === 'built-in kept');
      assert.equal(out.sameAsRequire, true);
    });

    it('an arm64 node (under qemu-user) loads the arm64 glibc prebuild from the same install, and takes locks', function () {
      this.timeout(120000);
      const node = arm64Node();
      if (node.missing) {
        this.test.title += ` (pending: ${node.missing})`;
        this.skip();
      }
      const r = check(run(node.bin, ['-e', CJS_CHECK], { cwd: project, env: Object.assign({}, env, node.env) }), 'the CommonJS check on arm64');
      const out = JSON.parse(r.stdout);
      assert.deepEqual(out.lock, { name: 'cjs', mode: 'exclusive' });
      assert.equal(out.blocked, true);
      assert.equal(fs.realpathSync(out.addon), fs.realpathSync(path.join(project, 'node_modules', 'web-locks', 'prebuilds', 'linux-arm64', PREBUILD)));
    });
  });

  it('installed with install scripts blocked (--ignore-scripts), still loads the prebuild', function () {
    const project = freshProject(path.join(tmp, 'app-no-scripts'));
    const env = userEnv(nodeOnlyPath);
    check(npmInstall(project, tarball, env, ['--ignore-scripts']), 'npm install --ignore-scripts of the tarball');
    const r = check(run(process.execPath, ['-e', CJS_CHECK], { cwd: project, env }), 'the CommonJS check');
    assert.deepEqual(JSON.parse(r.stdout).lock, { name: 'cjs', mode: 'exclusive' });
  });

  // npm 11: a dependency's install script runs (with a warning) unless the
  // project's allowScripts policy denies it; --strict-allow-scripts (or
  // strict-allow-scripts=true in .npmrc) makes an unreviewed one an error.
  // Allowed, the script (node-gyp-build) finds the prebuild and compiles
  // nothing; denied, it does not run, and the prebuild is loaded anyway.
  describe("under npm's install-script policy, --strict-allow-scripts (npm 11)", function () {
    let registry;
    let env;
    before(function () {
      if (run(process.execPath, [NPM_CLI, 'install-scripts', '--help'], { env: userEnv(process.env.PATH) }).status !== 0) {
        this.skip(); // an npm without the policy
      }
      env = userEnv(nodeOnlyPath);
      return startRegistry([tarball, ...depTarballs]).then((r) => { registry = r; });
    });

    after(function () {
      if (registry) return registry.close();
    });

    function loadsThePrebuild(project) {
      const pkg = path.join(project, 'node_modules', 'web-locks');
      assert.ok(!fs.existsSync(path.join(pkg, 'build')), 'no build/ directory');
      const r = check(run(process.execPath, ['-e', CJS_CHECK], { cwd: project, env }), 'the CommonJS check');
      const out = JSON.parse(r.stdout);
      assert.deepEqual(out.lock, { name: 'cjs', mode: 'exclusive' });
      assert.equal(fs.realpathSync(out.addon), fs.realpathSync(path.join(pkg, PREBUILD_DIR, PREBUILD)));
    }

    it('with no allowScripts entry for web-locks, the install fails with npm\'s policy error, naming its install script', function () {
      const project = freshProject(path.join(tmp, 'policy-none'));
      const r = registryInstall(project, registry, env, ['--strict-allow-scripts']);
      assert.notEqual(r.status, 0, `install succeeded:\n${r.stdout}\n${r.stderr}`);
      assert.match(r.stderr, /ESTRICTALLOWSCRIPTS/);
      assert.match(r.stderr, /web-locks@\S+ \(install: node scripts\/install\.js\)/);
      assert.ok(!fs.existsSync(path.join(project, 'node_modules', 'web-locks')), 'nothing installed');
    });

    it('denied ("allowScripts": {"web-locks": false}): installs, runs no script, and loads the prebuild', function () {
      const project = freshProject(path.join(tmp, 'policy-denied'), { allowScripts: { 'web-locks': false } });
      const r = check(registryInstall(project, registry, env, ['--strict-allow-scripts']), 'npm install, denied');
      assert.doesNotMatch(r.stderr, /allowScripts/, 'no warning about web-locks');
      loadsThePrebuild(project);
    });

    it('allowed ("allowScripts": {"web-locks": true}): installs, and loads the prebuild', function () {
      const project = freshProject(path.join(tmp, 'policy-allowed'), { allowScripts: { 'web-locks': true } });
      const r = check(registryInstall(project, registry, env, ['--strict-allow-scripts']), 'npm install, allowed');
      assert.doesNotMatch(r.stderr, /allowScripts/, 'no warning about web-locks');
      loadsThePrebuild(project);
    });

    it('allowed in the project\'s .npmrc (allow-scripts=web-locks, with strict-allow-scripts=true there too)', function () {
      const project = freshProject(path.join(tmp, 'policy-npmrc'));
      fs.writeFileSync(path.join(project, '.npmrc'), 'strict-allow-scripts=true\nallow-scripts=web-locks\n');
      check(registryInstall(project, registry, env), 'npm install, allowed in .npmrc');
      loadsThePrebuild(project);
    });

    it('the name does not cover a tarball install: its entry is the tarball\'s file: spec (as `npm install-scripts approve` writes it)', function () {
      const byName = freshProject(path.join(tmp, 'policy-tarball-name'), { allowScripts: { 'web-locks': true } });
      const r = npmInstall(byName, tarball, env, ['--strict-allow-scripts']);
      assert.notEqual(r.status, 0, `install succeeded:\n${r.stdout}\n${r.stderr}`);
      assert.match(r.stderr, /ESTRICTALLOWSCRIPTS/);
      const bySpec = freshProject(path.join(tmp, 'policy-tarball-spec'), { allowScripts: { [`file:${tarball}`]: false } });
      check(npmInstall(bySpec, tarball, env, ['--strict-allow-scripts']), 'npm install of the tarball, denied by its file: spec');
      loadsThePrebuild(bySpec);
    });
  });

  describe('without a prebuild that fits', function () {
    let bare; // the same tarball minus prebuilds/
    before(function () {
      const unpacked = path.join(tmp, 'unpacked');
      fs.mkdirSync(unpacked);
      check(run('tar', ['-xzf', tarball, '-C', unpacked]), 'tar -x');
      fs.rmSync(path.join(unpacked, 'package', 'prebuilds'), { recursive: true, force: true });
      const out = path.join(tmp, 'bare');
      fs.mkdirSync(out);
      const r = check(run(process.execPath, [NPM_CLI, 'pack', '--ignore-scripts', '--json', '--pack-destination', out], {
        cwd: path.join(unpacked, 'package'),
        env: userEnv(process.env.PATH),
      }), 'npm pack without prebuilds');
      const report = JSON.parse(r.stdout.slice(r.stdout.search(/^\[$/m)))[0];
      assert.deepEqual(report.files.filter((f) => f.path.startsWith('prebuilds/')), []);
      bare = path.join(out, report.filename);
    });

    it('install compiles the addon with node-gyp, and it works', function () {
      const env = userEnv(process.env.PATH);
      if (!env.npm_config_nodedir) {
        // No headers configured: use the running node's, never a download.
        const nodedir = localNodedir();
        if (!nodedir) this.skip();
        env.npm_config_nodedir = nodedir;
      }
      const project = freshProject(path.join(tmp, 'app-compiled'));
      check(npmInstall(project, bare, env), 'npm install of the tarball without prebuilds');
      const pkg = path.join(project, 'node_modules', 'web-locks');
      assert.ok(fs.existsSync(path.join(pkg, 'build', 'Release', 'web_locks.node')), 'built by node-gyp');
      assert.ok(!fs.existsSync(path.join(pkg, 'prebuilds')));
      const r = check(run(process.execPath, ['-e', CJS_CHECK], { cwd: project, env }), 'the CommonJS check');
      const out = JSON.parse(r.stdout);
      assert.deepEqual(out.lock, { name: 'cjs', mode: 'exclusive' });
      assert.equal(fs.realpathSync(out.addon), fs.realpathSync(path.join(pkg, 'build', 'Release', 'web_locks.node')));
    });

    it('and without a compiler either, install fails (so the prebuild is what made the first install work)', function () {
      const project = freshProject(path.join(tmp, 'app-no-compiler'));
      const r = npmInstall(project, bare, userEnv(nodeOnlyPath));
      assert.notEqual(r.status, 0, `install succeeded:\n${r.stdout}\n${r.stderr}`);
    });

    it('denied by npm\'s allowScripts policy, the install runs no script: nothing is built, and require() says so', function () {
      if (run(process.execPath, [NPM_CLI, 'install-scripts', '--help'], { env: userEnv(process.env.PATH) }).status !== 0) this.skip();
      const env = userEnv(process.env.PATH); // a compiler at hand: it is not used
      if (!env.npm_config_nodedir && localNodedir()) env.npm_config_nodedir = localNodedir();
      return startRegistry([bare, ...depTarballs]).then((registry) => {
        try {
          const project = freshProject(path.join(tmp, 'policy-denied-bare'), { allowScripts: { 'web-locks': false } });
          check(registryInstall(project, registry, env, ['--strict-allow-scripts']), 'npm install, denied, without prebuilds');
          assert.ok(!fs.existsSync(path.join(project, 'node_modules', 'web-locks', 'build')), 'nothing built');
          const r = check(run(process.execPath, ['-e', "try { require('web-locks') } catch (e) { console.log(e.code) }"], { cwd: project, env }), 'require');
          assert.equal(r.stdout.trim(), 'ENOBUILD');
        } finally {
          registry.close();
        }
      });
    });
  });
});
