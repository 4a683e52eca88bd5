'use strict';
// The README's OpenTelemetry recipe (## Observability, the block that
// subscribes to web-locks.request), run as written with the OpenTelemetry
// SDK (@opentelemetry/sdk-trace-base: BasicTracerProvider, an
// InMemorySpanExporter through a SimpleSpanProcessor) in a child process
// (test/fixtures/tracing-otel.mjs), for each manager: the spans it makes.
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const dc = require('node:diagnostics_channel');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { PKG, packageDir } = require('./fixtures/util');
const { postgres } = require('./fixtures/postgres');

const HARNESS = path.join(__dirname, 'fixtures', 'tracing-otel.mjs');
const TIMEOUT_MS = 30000;

// The README's ```js block that subscribes to the channel, as
// test/readme.test.js runs it: the lines between its fences, less the
// fence's indentation.
function recipe() {
  const lines = fs.readFileSync(path.join(PKG, 'README.md'), 'utf8').split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```js\s*$/.exec(lines[i]);
    if (!open) continue;
    const body = [];
    for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]); i++) body.push(lines[i].slice(open[1].length));
    const code = body.join('\n') + '\n';
    if (code.includes("tracingChannel('web-locks.request')")) return code;
  }
  throw new Error('README.md has no block that subscribes to web-locks.request');
}

describe('the README\'s OpenTelemetry recipe, with the OpenTelemetry SDK', function () {
  this.timeout(TIMEOUT_MS + 30000);
  let dir;
  let out;

  before(async function () {
    if (typeof dc.tracingChannel !== 'function') this.skip(); // Node 18.18: none
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-locks-otel-'));
    // Where the recipe's file is, @opentelemetry/api is the one the
    // harness registers the SDK with (the same file through a link).
    const scoped = path.join(dir, 'node_modules', '@opentelemetry');
    fs.mkdirSync(scoped, { recursive: true });
    fs.symlinkSync(packageDir('@opentelemetry/api'), path.join(scoped, 'api'), 'dir');
    const file = path.join(dir, 'recipe.mjs');
    fs.writeFileSync(file, recipe());
    const env = { ...process.env, WEB_LOCKS_PKG: PKG, WEB_LOCKS_TEST_DIR: dir, WEB_LOCKS_TEST_POSTGRES_URL: (await postgres()).url };
    const { stdout, stderr } = await new Promise((resolve, reject) => {
      execFile(process.execPath, [HARNESS, file], { env, timeout: TIMEOUT_MS, killSignal: 'SIGKILL' }, (error, stdout, stderr) => {
        if (error) reject(Object.assign(error, { message: `${error.message}\n${stderr}` }));
        else resolve({ stdout, stderr });
      });
    });
    assert.equal(stderr, '');
    out = JSON.parse(stdout);
  });
  after(function () {
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('no span, and no error, for a request traced for another subscriber before the recipe ran', function () {
    assert.deepEqual(out.spans.filter((s) => s.attributes['lock.name'] === 'early'), []);
  });

  for (const kind of ['process', 'machine', 'postgres']) {
    describe(kind, function () {
      let spans;
      let job;
      let facts;
      before(function () {
        facts = out.facts[kind];
        job = out.spans.find((s) => s.spanId === facts.job);
        spans = out.spans.filter((s) => s.name === 'locks.request' && s.attributes['lock.manager'] === kind);
      });
      // The one span of the request for name in mode, granted or not.
      const lockSpan = (name, mode = 'exclusive', granted = true) => {
        const found = spans.filter((s) => s.attributes['lock.name'] === name && s.attributes['lock.mode'] === mode &&
          s.attributes['lock.granted'] === granted);
        assert.equal(found.length, 1, `one span for ${name} (${mode}, granted: ${granted})`);
        return found[0];
      };

      it('a span per request, a child of the span active where request() was called', function () {
        assert.equal(job.name, `job ${kind}`);
        assert.equal(spans.length, 5);
        for (const name of [`held-${kind}`, `throws-${kind}`]) {
          const span = lockSpan(name);
          assert.equal(span.parent, job.spanId, name);
          assert.equal(span.traceId, job.traceId, name);
        }
        const outside = lockSpan(`outside-${kind}`);
        assert.equal(outside.parent, null);
        assert.notEqual(outside.traceId, job.traceId);
        // The callback runs in the context of the request() call: a span it
        // starts is the lock span's sibling.
        assert.equal(out.spans.find((s) => s.name === `inside ${kind}`).parent, job.spanId);
      });

      it('the attributes of a grant, and a duration that covers the wait', function () {
        const held = lockSpan(`held-${kind}`);
        assert.deepEqual(Object.keys(held.attributes).sort(), ['lock.granted', 'lock.manager', 'lock.mode', 'lock.name', 'lock.wait_ms']);
        assert.equal(held.attributes['lock.granted'], true);
        assert.equal(held.status.code, 0); // UNSET
        const waited = lockSpan(`held-${kind}`, 'shared');
        assert.equal(waited.parent, job.spanId);
        assert.equal(waited.attributes['lock.granted'], true);
        const wait = waited.attributes['lock.wait_ms'];
        const released = facts.released - facts.made;
        assert.ok(wait >= released, `lock.wait_ms ${wait}, released ${released} ms after the request`);
        assert.ok(waited.durationMs >= wait, `duration ${waited.durationMs} ms, wait ${wait} ms`);
        assert.ok(held.durationMs >= released, `the holder's span lasts as long as it held the lock: ${held.durationMs} ms`);
      });

      it('a miss: lock.granted false; a callback that throws: status ERROR with the exception', function () {
        const miss = lockSpan(`held-${kind}`, 'exclusive', false);
        assert.equal(typeof miss.attributes['lock.wait_ms'], 'number');
        assert.equal(miss.parent, job.spanId);
        const thrown = lockSpan(`throws-${kind}`);
        assert.equal(thrown.attributes['lock.granted'], true);
        assert.equal(thrown.status.code, 2); // ERROR
        assert.equal(thrown.exceptions.length, 1);
        assert.equal(thrown.exceptions[0]['exception.message'], 'boom');
      });
    });
  }
});
