// Must NOT compile: the ES module types (index.d.mts, polyfill.d.mts), marked
// as in errors.ts.
import webLocks, { Lock } from 'web-locks'
import polyfill from 'web-locks/polyfill'
import force from 'web-locks/polyfill/force'

new webLocks.Lock() // error TS2673
new Lock() // error TS2673
await webLocks.locks.request('a', { mode: 'none' }, () => {}) // error TS2322
webLocks.nothing // error TS2339
const flag: string = polyfill.installed // error TS2322
const forced: string = force.installed // error TS2322
force.nothing // error TS2339
export { flag, forced }
