#!/usr/bin/env node
'use strict'

// Type tests (npm run test:types). For each environment in test/types/
// (none: es2022 only, @types/node 24, @types/node 22, lib.dom):
//   tsconfig.<env>.json         the ok files: tsc must succeed, silently;
//   tsconfig.<env>.errors.json  errors.ts, errors.mts: tsc must fail with
//                               exactly the errors announced on their lines
//                               by `// error TSxxxx` comments, and no other.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..')
const DIR = path.join(ROOT, 'test', 'types')
const ENVS = ['bare', 'node24', 'node22', 'dom']
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc')

function tsc (config) {
  const r = spawnSync(process.execPath, [TSC, '-p', path.join(DIR, config), '--pretty', 'false'], {
    cwd: ROOT,
    encoding: 'utf8'
  })
  if (r.error) throw r.error
  return { status: r.status, output: (r.stdout + r.stderr).trim() }
}

// Reads JSON with comments (tsconfig files), enough for the files here.
function readJsonc (file) {
  return JSON.parse(fs.readFileSync(file, 'utf8').replace(/^\s*\/\/.*$/gm, ''))
}

// "file:line TSxxxx" for each error a file announces.
function announced (file) {
  const result = []
  fs.readFileSync(path.join(DIR, file), 'utf8').split('\n').forEach((text, i) => {
    const m = text.match(/\/\/ error ((?:TS\d+\s*)+)$/)
    if (m) for (const code of m[1].trim().split(/\s+/)) result.push(`${file}:${i + 1} ${code}`)
  })
  return result
}

// "file:line TSxxxx" for each error in tsc's output (first lines only).
function reported (output) {
  const result = []
  for (const line of output.split('\n')) {
    const m = line.match(/^(.+?)\((\d+),\d+\): error (TS\d+):/)
    if (m) result.push(`${path.relative(DIR, path.resolve(ROOT, m[1]))}:${m[2]} ${m[3]}`)
  }
  return result
}

function difference (a, b) {
  const rest = [...b]
  return a.filter((x) => {
    const i = rest.indexOf(x)
    if (i === -1) return true
    rest.splice(i, 1)
    return false
  })
}

let failed = false
const fail = (message) => { failed = true; console.log(`  FAIL ${message}`) }

console.log(`tsc: ${spawnSync(process.execPath, [TSC, '--version'], { encoding: 'utf8' }).stdout.trim()}`)
for (const env of ENVS) {
  console.log(`${env}:`)

  const okConfig = `tsconfig.${env}.json`
  const ok = tsc(okConfig)
  const okFiles = readJsonc(path.join(DIR, okConfig)).files.join(', ')
  if (ok.status === 0 && ok.output === '') console.log(`  ok    ${okFiles} compile`)
  else fail(`${okFiles} must compile (${okConfig}):\n${ok.output}`)

  const errorsConfig = `tsconfig.${env}.errors.json`
  const files = readJsonc(path.join(DIR, errorsConfig)).files
  const expected = files.flatMap(announced)
  const bad = tsc(errorsConfig)
  const got = reported(bad.output)
  const missing = difference(expected, got)
  const unexpected = difference(got, expected)
  if (bad.status === 0) fail(`${files.join(', ')} compiled (${errorsConfig})`)
  else if (missing.length || unexpected.length) {
    fail(`${files.join(', ')} (${errorsConfig}): expected ${expected.length} errors, got ${got.length}`)
    for (const e of missing) console.log(`      missing:    ${e}`)
    for (const e of unexpected) console.log(`      unexpected: ${e}`)
    console.log(bad.output.replace(/^/gm, '      | '))
  } else {
    const codes = {}
    for (const e of got) { const code = e.split(' ')[1]; codes[code] = (codes[code] || 0) + 1 }
    console.log(`  ok    ${files.join(', ')} fail with the ${got.length} announced errors (${Object.entries(codes).map(([c, n]) => `${c}×${n}`).join(' ')})`)
  }
}

if (failed) {
  console.log('type tests FAILED')
  process.exit(1)
}
console.log('type tests passed')
