'use strict'

// Finds a Node >= 24 (which has the built-in navigator.locks) to run the
// cases under, installing the official binary from npm into a cache outside
// git when needed: npm install --prefix <cache> node-<platform>-<arch>@26.

const fs = require('fs')
const path = require('path')
const { execFileSync } = require('child_process')

const MIN_MAJOR = 24
const WANT = '26'

function major (version) {
  return Number(/^v?(\d+)/.exec(version)[1])
}

function versionOf (bin) {
  try {
    return execFileSync(bin, ['--version'], { encoding: 'utf8', timeout: 20000 }).trim()
  } catch {
    return null
  }
}

function cacheDir () {
  if (process.env.WEB_LOCKS_BENCH_CACHE) return process.env.WEB_LOCKS_BENCH_CACHE
  if (process.env.XDG_CACHE_HOME) return path.join(process.env.XDG_CACHE_HOME, 'web-locks-bench')
  return path.join(__dirname, '..', '..', 'node_modules', '.cache', 'web-locks-bench')
}

function packageName () {
  const platform = { linux: 'linux', darwin: 'darwin', win32: 'win' }[process.platform]
  if (!platform) return null
  return `node-${platform}-${process.arch}`
}

function binaryIn (prefix, pkg) {
  const dir = path.join(prefix, 'node_modules', pkg)
  for (const rel of ['bin/node', 'bin/node.exe', 'node.exe']) {
    const file = path.join(dir, rel)
    if (fs.existsSync(file)) return file
  }
  return null
}

// Returns { bin, version, how } or { bin: null, why }.
function findNode ({ explicit, log }) {
  if (explicit) {
    const version = versionOf(explicit)
    if (!version) return { bin: null, why: `--node ${explicit} does not run` }
    if (major(version) < MIN_MAJOR) return { bin: null, why: `--node ${explicit} is ${version}, not >= ${MIN_MAJOR}` }
    return { bin: explicit, version, how: 'given with --node' }
  }
  if (major(process.version) >= MIN_MAJOR) {
    return { bin: process.execPath, version: process.version, how: 'the running Node' }
  }
  const pkg = packageName()
  if (!pkg) return { bin: null, why: `no Node binary package on npm for ${process.platform}` }
  const prefix = path.join(cacheDir(), `node-${WANT}`)
  let bin = binaryIn(prefix, pkg)
  let how = `cached in ${path.relative(process.cwd(), prefix) || prefix}`
  if (!bin) {
    log(`installing ${pkg}@${WANT} into ${prefix} (once) ...`)
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
    try {
      execFileSync(npm, ['install', '--prefix', prefix, '--no-save', '--no-package-lock', '--no-audit',
        '--no-fund', '--loglevel=error', `${pkg}@${WANT}`], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 600000 })
    } catch (error) {
      return { bin: null, why: `npm install ${pkg}@${WANT} failed: ${error.message.split('\n')[0]}` }
    }
    bin = binaryIn(prefix, pkg)
    how = `installed from npm into ${path.relative(process.cwd(), prefix) || prefix}`
  }
  const version = bin && versionOf(bin)
  if (!version) return { bin: null, why: `${pkg}@${WANT} installed but its binary does not run` }
  return { bin, version, how }
}

module.exports = { findNode, major, MIN_MAJOR }
