// Must NOT compile: the ES module types (index.d.mts, polyfill.d.mts), marked
// as in errors.ts.
import webLocks, { Lock } from 'web-locks'
import polyfill from 'web-locks/polyfill'

new webLocks.Lock() // error TS2673
new Lock() // error TS2673
await webLocks.locks.request('a', { mode: 'none' }, () => {}) // error TS2322
webLocks.nothing // error TS2339
const flag: string = polyfill.installed // error TS2322
export { flag }
