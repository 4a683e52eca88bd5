'use strict'

// The tracing channel of lock requests: diagnostics_channel's TracingChannel
// `web-locks.request` (channels tracing:web-locks.request:start, :end,
// :asyncStart, :asyncEnd, :error), so that tracing tools show a request, its
// wait included, as a span. In addition to the plain locks.request.*
// channels (index.js), which stay as Node's built-in has them.
//
// One context object per request, shared by all its events, in this order:
// start (request() makes it, in the caller's async context; stores bound to
// start apply to the rest of request(), and so to the callback, which is
// chained there), end (request() returns), then asyncStart when the callback
// is reached (granted, or missed with ifAvailable; stores bound to
// asyncStart apply to the callback's run), error if the request's promise
// rejects, and asyncEnd when it settles. A request that ends without its
// callback (aborted, dropped, refused by its manager) has error, asyncStart
// and asyncEnd at once. Every start has one end and one asyncEnd (a thread
// or process that exits leaves its unsettled requests without).
//
// A request is traced only if someone subscribed when it started (Node's
// rule for tracing channels); otherwise it costs a test of each channel.
// Node before 18.19 (and 19.0 to 19.8) has no tracingChannel: there
// requests are never traced, and only the plain channels publish.

const diagnostics = require('diagnostics_channel')
const { performanceNow, SafeBigInt } = require('./intrinsics.js')

const channels = typeof diagnostics.tracingChannel === 'function' ? diagnostics.tracingChannel('web-locks.request') : undefined
const { start, end, asyncStart, asyncEnd, error } = channels === undefined ? {} : channels

// A traced request's state, apart from its context, which subscribers may
// change: when it was made (after the start subscribers ran: a span they
// start covers its wait), whether request() has returned (end published),
// whether its callback was reached, and how it settled.
class Trace {
  context
  since = 0
  returned = false
  reached = false
  settled = false
  ok = false

  constructor (context) {
    this.context = context
  }
}

function subscribed () {
  return channels !== undefined &&
    (start.hasSubscribers || end.hasSubscribers || asyncStart.hasSubscribers || asyncEnd.hasSubscribers || error.hasSubscribers)
}

// request(): make(request) makes the request and returns its promise, or
// throws (then request() rejects with that error), traced.
function traceRequest (request, make) {
  const { backend, name, options } = request
  const { agent } = backend
  const context = {
    name,
    mode: options.mode,
    ifAvailable: options.ifAvailable,
    steal: options.steal,
    signal: options.signal !== undefined,
    manager: backend.kind,
    scope: agent.scope,
    clientId: agent.clientId,
    granted: false,
    waitMs: undefined,
    token: undefined,
    result: undefined,
    error: undefined
  }
  const trace = new Trace(context)
  request.trace = trace
  let promise
  try {
    promise = start.runStores(context, timed, undefined, trace, request, make)
  } catch (thrown) {
    trace.returned = true
    end.publish(context)
    settle(request, false, thrown)
    throw thrown
  }
  trace.returned = true
  end.publish(context)
  // Settled before request() returned (an abort by a replaced
  // addEventListener): its last events come after end.
  if (trace.settled) finish(trace)
  return promise
}

function timed (trace, request, make) {
  trace.since = performanceNow()
  return make(request)
}

// The callback is reached: callback(lock), lock null for a miss.
function reach (request, callback, lock) {
  const trace = request.trace
  const { context } = trace
  trace.reached = true
  context.waitMs = performanceNow() - trace.since
  context.granted = lock === null ? null : true
  if (lock !== null) context.token = typeof request.token === 'bigint' ? request.token : SafeBigInt(request.token)
  // A PostgreSQL agent that was (re)joining when the request started.
  if (context.clientId === undefined) context.clientId = request.backend.agent.clientId
  return asyncStart.runStores(context, callback, undefined, lock)
}

// The request's promise settles with value. Its callback, if it runs
// after this (a grant stolen before the callback ran), is not traced.
function settle (request, ok, value) {
  const trace = request.trace
  request.trace = undefined
  const { context } = trace
  trace.settled = true
  trace.ok = ok
  if (ok) context.result = value
  else context.error = value
  if (!trace.reached) context.waitMs = performanceNow() - trace.since
  if (trace.returned) finish(trace)
}

function finish (trace) {
  const { context } = trace
  if (!trace.ok) error.publish(context)
  if (!trace.reached) asyncStart.publish(context)
  asyncEnd.publish(context)
}

module.exports = { subscribed, traceRequest, reach, settle }
