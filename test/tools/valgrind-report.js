#!/usr/bin/env node
'use strict';
// Reads valgrind --xml=yes files and fails if any error involves the addon:
// a definite (or indirect) leak, an invalid read or write, an invalid free,
// or a use of uninitialised memory with a frame in web_locks.node or in the
// addon's source files. Prints a summary of everything else.
//
//   node test/tools/valgrind-report.js FILE...
const fs = require('node:fs');

const OURS = /web_locks\.node|\/src\/(binding|wl-[a-z]+)\.[ch]/;
let ours = 0;
const kinds = {};
let leakedBytes = { definite: 0, indirect: 0, possible: 0 };
let files = 0;
for (const file of process.argv.slice(2)) {
  const xml = fs.readFileSync(file, 'utf8');
  files++;
  if (!xml.includes('</valgrindoutput>') || !/<state>FINISHED<\/state>/.test(xml)) {
    console.log(`${file}: incomplete: valgrind did not finish this process (killed, or a fatal valgrind error)`);
    ours++;
    continue;
  }
  for (const m of xml.matchAll(/<error>([\s\S]*?)<\/error>/g)) {
    const e = m[1];
    const kind = (e.match(/<kind>(.*?)<\/kind>/) || [])[1];
    kinds[kind] = (kinds[kind] || 0) + 1;
    const bytes = Number((e.match(/<leakedbytes>(\d+)<\/leakedbytes>/) || [])[1] || 0);
    if (kind === 'Leak_DefinitelyLost') leakedBytes.definite += bytes;
    if (kind === 'Leak_IndirectlyLost') leakedBytes.indirect += bytes;
    if (kind === 'Leak_PossiblyLost') leakedBytes.possible += bytes;
    const serious = kind !== 'Leak_PossiblyLost' && kind !== 'Leak_StillReachable';
    if (serious && OURS.test(e)) {
      ours++;
      const what = (e.match(/<text>(.*?)<\/text>/) || e.match(/<what>(.*?)<\/what>/) || [])[1];
      const frames = [...e.matchAll(/<frame>([\s\S]*?)<\/frame>/g)].slice(0, 12).map((f) => {
        const fn = (f[1].match(/<fn>(.*?)<\/fn>/) || [])[1] || (f[1].match(/<obj>(.*?)<\/obj>/) || [])[1];
        const at = (f[1].match(/<file>(.*?)<\/file>/) || [])[1];
        const line = (f[1].match(/<line>(.*?)<\/line>/) || [])[1];
        return `    ${fn}${at ? ` (${at}:${line})` : ''}`;
      });
      console.log(`${file}: ${kind}: ${what}\n${frames.join('\n')}`);
    }
  }
}
console.log(`valgrind: ${files} process(es); errors by kind (after suppressions): ${JSON.stringify(kinds)}; lost bytes: ${JSON.stringify(leakedBytes)}`);
console.log(ours === 0 ? "valgrind: nothing from web-locks (no definite leak, invalid access or uninitialised use with an addon frame)" : `valgrind: ${ours} problem(s): errors with an addon frame, or processes valgrind did not finish`);
process.exit(ours === 0 && files > 0 ? 0 : 1);
