'use strict'

// The body of every process the cross-process cases fork (lib/processes.js):
// argv[2] is its data, whose case names the case file whose proc() runs here.

const data = JSON.parse(process.argv[2])

function report (error) {
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
  const exit = () => process.exit(1)
  setTimeout(exit, 1000)
  if (process.connected) process.send({ error: message.slice(0, 300) }, exit)
  else exit()
}

process.on('uncaughtException', report)
process.on('unhandledRejection', report)
// The child process that forked this one is done, or was killed by the
// orchestrator's watchdog: no one is left to report to.
process.on('disconnect', () => process.exit(0))

require(`./cases/${data.case}`).proc(data)
