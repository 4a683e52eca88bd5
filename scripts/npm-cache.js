'use strict'

// Tools the scripts take from the npm registry (Node of each major, an arm64
// node, Bun, Deno, Zig), each installed once into a cache directory outside the repository:
// $WEB_LOCKS_TOOLS_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/web-locks/<kind>.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

function cacheDir (kind) {
  const base = process.env.WEB_LOCKS_TOOLS_CACHE
    ? path.resolve(process.env.WEB_LOCKS_TOOLS_CACHE)
    : path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'web-locks')
  return path.join(base, kind)
}

// The file `bin` (a path inside the package) of npm package `spec`
// (name@range), installed without its scripts if it is not there yet (or
// again, with update: the newest release in the range); or throws. force:
// install a package made for another CPU.
function cachedPackage (kind, spec, bin, { force = false, update = false } = {}) {
  const dir = cacheDir(kind)
  const name = spec.slice(0, spec.lastIndexOf('@'))
  const file = path.join(dir, 'node_modules', name, bin)
  if (fs.existsSync(file) && !update) return file
  console.log(`installing ${spec} into ${dir}`)
  fs.mkdirSync(dir, { recursive: true })
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
  const r = spawnSync(npm, ['install', '--prefix', dir, '--no-save', '--no-package-lock', '--no-audit', '--no-fund',
    '--ignore-scripts', '--loglevel=error', ...(force ? ['--force'] : []), spec], { stdio: 'inherit', shell: process.platform === 'win32' })
  if (r.status !== 0 || !fs.existsSync(file)) throw new Error(`npm install ${spec} failed`)
  return file
}

module.exports = { cacheDir, cachedPackage }
