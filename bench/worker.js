'use strict'

// The body of every worker thread the thread cases start: workerData.case
// names the case file whose worker() runs here.

const { workerData } = require('worker_threads')

require(`./cases/${workerData.case}`).worker(workerData)
