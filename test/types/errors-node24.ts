// Must NOT compile with @types/node 24+ (tsconfig.node24.errors.json), as
// errors.ts: Node's built-in LockManager cannot stand for this package's,
// whose locks have a fencing token (Lock.token) that Node's lack.
import type { LockManager } from 'web-locks'

export const asOurs: LockManager = navigator.locks // error TS2322
