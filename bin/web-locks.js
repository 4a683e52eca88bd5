#!/usr/bin/env node
'use strict'

// The package's command: `npx web-locks inspect <scope>`, a look inside a
// scope that changes nothing (lib/inspect.js). Exit codes: 0 printed; 1 no
// such scope; 2 a bad command line; 3 the scope could not be read (corrupt,
// of another layout, another user's, waiting for a repair, its mutex held
// throughout the wait, the database unreachable); 4 not available here.

const USAGE = `usage: web-locks inspect <scope> [--dir <dir>] [--mode <octal>] [--json] [--watch [ms]]
       web-locks inspect <scope> --postgres <url> [--schema <name>] [--json] [--watch [ms]]

Prints who holds each name of the scope and who waits for it, in queue
order, with their clientId, process id, host, for how long, and whether
their process has died without its locks being ended yet; nothing in the
scope changes. The scope's file is the one openLockManager(scope, { dir })
opens (by default in ${process.platform === 'darwin' ? '/var/tmp' : process.platform === 'win32' ? '%LOCALAPPDATA%' : '/dev/shm'}); --mode as its mode option (0600: only
this user's file is read). --json prints one JSON document per look
({ scope, file or schema, host, at, held, pending, cycles }); --watch looks
again every ms milliseconds (1000 by default, 100 to 60000) until Ctrl-C.

exit codes: 0 printed, 1 no such scope, 2 bad command line, 3 the scope
could not be read, 4 not available on this platform`

const WATCH_DEFAULT = 1000
const WATCH_MIN = 100
const WATCH_MAX = 60000

class UsageError extends Error {}

// The command line after `inspect`: { scope, dir, mode, postgres, schema,
// json, watch (ms or null) }.
function parse (args) {
  const options = { scope: undefined, dir: undefined, mode: undefined, postgres: undefined, schema: undefined, json: false, watch: null }
  const value = (i, flag) => {
    if (i + 1 >= args.length || args[i + 1].startsWith('--')) throw new UsageError(`${flag} needs a value`)
    return args[i + 1]
  }
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]
    if (arg === '--json') {
      options.json = true
    } else if (arg === '--watch') {
      options.watch = WATCH_DEFAULT
      if (i + 1 < args.length && /^\d+$/.test(args[i + 1])) {
        options.watch = Number(args[++i])
        if (options.watch < WATCH_MIN || options.watch > WATCH_MAX) {
          throw new UsageError(`--watch takes ${WATCH_MIN} to ${WATCH_MAX} milliseconds`)
        }
      }
    } else if (arg === '--dir' || arg === '--postgres' || arg === '--schema') {
      options[arg.slice(2)] = value(i++, arg)
    } else if (arg === '--mode') {
      const mode = value(i++, arg)
      if (!/^0?o?[0-7]{3}$/.test(mode)) throw new UsageError('--mode takes octal permission bits: 600, 660, 606 or 666')
      options.mode = parseInt(mode.replace(/^0?o?/, ''), 8)
    } else if (arg.startsWith('--')) {
      throw new UsageError(`unknown option ${arg}`)
    } else if (options.scope === undefined) {
      options.scope = arg
    } else {
      throw new UsageError(`one scope at a time (${options.scope}, then ${arg})`)
    }
  }
  if (options.scope === undefined) throw new UsageError('which scope?')
  if (options.postgres !== undefined && (options.dir !== undefined || options.mode !== undefined)) {
    throw new UsageError('--dir and --mode are of a machine-wide scope, --postgres of another kind')
  }
  if (options.postgres === undefined && options.schema !== undefined) throw new UsageError('--schema goes with --postgres')
  return options
}

// The exit code of an error that a look threw.
function exitCode (error) {
  const code = error !== null && typeof error === 'object' ? error.code : undefined
  if (code === 'ENOENT') return 1
  if (code === 'ENOTSUP') return 4
  if (error instanceof TypeError || error instanceof RangeError) return 2
  return 3
}

// What the user reads of it: the package's messages, without the API's
// "Failed to execute" framing.
function message (error) {
  const text = error !== null && typeof error === 'object' && typeof error.message === 'string' ? error.message : String(error)
  return text.replace(/^Failed to execute 'openLockManager': /, 'web-locks inspect: ')
}

async function look (options) {
  const inspect = require('../lib/inspect.js')
  const doc = options.postgres !== undefined
    ? await inspect.inspectPostgres(options.scope, options)
    : inspect.inspectMachine(options.scope, options)
  return options.json ? JSON.stringify(doc) + '\n' : inspect.formatText(doc)
}

async function inspectCommand (args) {
  let options
  try {
    options = parse(args)
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    process.stderr.write(`web-locks inspect: ${error.message}\n${USAGE}\n`)
    return 2
  }
  if (options.watch === null) {
    try {
      process.stdout.write(await look(options))
      return 0
    } catch (error) {
      process.stderr.write(message(error) + '\n')
      return exitCode(error)
    }
  }
  // Each look in turn, the scope's going and coming told as it happens;
  // Ctrl-C ends it.
  process.once('SIGINT', () => process.exit(0))
  const clear = !options.json && process.stdout.isTTY ? '\x1b[H\x1b[2J' : ''
  for (;;) {
    try {
      const text = await look(options)
      process.stdout.write(options.json ? text : `${clear}${text}\n`)
    } catch (error) {
      if (exitCode(error) === 2 || exitCode(error) === 4) {
        process.stderr.write(message(error) + '\n')
        return exitCode(error)
      }
      process.stderr.write(message(error) + '\n')
    }
    await new Promise((resolve) => setTimeout(resolve, options.watch))
  }
}

async function main (argv) {
  const [command, ...args] = argv
  if (command === 'inspect') return inspectCommand(args)
  if (command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(USAGE + '\n')
    return 0
  }
  process.stderr.write(`web-locks: ${command === undefined ? 'which command?' : `unknown command ${command}`}\n${USAGE}\n`)
  return 2
}

main(process.argv.slice(2)).then((code) => {
  process.exitCode = code
}, (error) => {
  process.stderr.write(`web-locks: ${error && error.stack ? error.stack : error}\n`)
  process.exitCode = 3
})
