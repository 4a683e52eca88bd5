// Types of the ES module entry point (lib/index.mjs). They are the CommonJS
// entry point's types, so both module formats share one LockManager and Lock.
import * as webLocks from './index.js'

export * from './index.js'
export default webLocks
