'use strict'

// One measurement point, in a fresh process: node bench/child.js <spec>.
// Prints '@@result <json>' or '@@error <json>' (with '@@partial <json>'
// for metrics gathered before a failure). The orchestrator (run.js) kills
// it if it hangs.

const { sofar } = require('./lib/measure')

const spec = JSON.parse(process.argv[2])

function where (error) {
  const frame = String((error && error.stack) || '').split('\n').find((l) => /^\s+at /.test(l))
  return frame ? frame.trim().replace(/^at /, '') : undefined
}

function fail (error) {
  const partial = sofar()
  if (Object.keys(partial).length) process.stdout.write(`@@partial ${JSON.stringify(partial)}\n`)
  const e = error instanceof Error ? error : new Error(String(error))
  process.stdout.write(`@@error ${JSON.stringify({ name: e.name, message: String(e.message).split('\n')[0].slice(0, 200), where: where(e) })}\n`)
  process.exit(1)
}

process.on('uncaughtException', fail)
process.on('unhandledRejection', fail)

async function main () {
  const mod = require(`./cases/${spec.case}`)
  const ctx = { rounds: spec.rounds, budgetMs: spec.budgetMs, quick: spec.quick, dir: spec.dir, postgres: spec.postgres }
  const result = await mod.run(spec.params, spec.impl, ctx)
  process.stdout.write(`@@result ${JSON.stringify(result)}\n`)
  // Held locks, queued requests and workers may remain: leave now.
  process.exit(0)
}

main().catch(fail)
