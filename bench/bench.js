'use strict'

// Entry point of `npm run bench`: see bench/run.js for the options.

require('./run').main(process.argv.slice(2)).catch((error) => {
  console.error(error && error.message ? error.message : error)
  process.exitCode = 1
})
