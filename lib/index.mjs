// The ES module entry point. It imports the CommonJS module rather than
// duplicating it, so `import` and `require()` share one instance: the same
// `locks`, the same classes, one set of per-thread state. Every named export
// of lib/index.js is listed here (test/esm.test.js checks that).
import webLocks from './index.js'

export const { locks, LockManager, Lock, ReleasableLock, monitorContention, openLockManager, postgresSchema, rejectDeadlocks } = webLocks
export default webLocks
