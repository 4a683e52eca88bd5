// The ES module entry point. It imports the CommonJS module rather than
// duplicating it, so `import` and `require()` share one instance: the same
// `locks`, the same classes, one set of per-thread state.
import webLocks from './index.js'

export const { locks, LockManager, Lock } = webLocks
export default webLocks
