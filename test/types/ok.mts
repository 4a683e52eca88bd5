// Must compile: the same from an ES module, through the "import" condition
// (index.d.mts, polyfill.d.mts, polyfill/force.d.mts), including default
// imports.
import webLocks, { locks, Lock, LockManager, ReleasableLock } from 'web-locks'
import type { LockMode, LockRequestTrace } from 'web-locks'
import polyfill, { installed } from 'web-locks/polyfill'
import 'web-locks/polyfill'
import force, { installed as forced } from 'web-locks/polyfill/force'
import 'web-locks/polyfill/force'

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false
type Expect<T extends true> = T

const result = await locks.request('a', { ifAvailable: true }, async (lock) => lock?.name)
type _result = Expect<Equal<typeof result, string | undefined>>
const mode: LockMode | undefined = await webLocks.locks.request('a', (lock) => lock?.mode)
type _default = Expect<Equal<typeof webLocks.locks, LockManager>>
type _polyfill = Expect<Equal<typeof polyfill.installed, boolean>>
const flag: boolean = installed
type _force = Expect<Equal<typeof force.installed, boolean>>
type _trace = Expect<Equal<LockRequestTrace['granted'], boolean | null>>
const forcedFlag: boolean = forced

// One set of types for both module formats: the classes that `import` gives
// are the ones that `require()` gives.
type CjsLock = import('web-locks', { with: { 'resolution-mode': 'require' } }).Lock
type CjsLockManager = import('web-locks', { with: { 'resolution-mode': 'require' } }).LockManager
type _sameLock = Expect<Equal<CjsLock, Lock>>
type _sameManager = Expect<Equal<CjsLockManager, LockManager>>
type CjsReleasableLock = import('web-locks', { with: { 'resolution-mode': 'require' } }).ReleasableLock
type _sameReleasable = Expect<Equal<CjsReleasableLock, ReleasableLock>>

export { mode, flag, forcedFlag }

const scope = await webLocks.openLockManager('app')
await scope.close()
