// Must compile (under every tsconfig.*.json here that lists it): typed use
// of the package from a CommonJS module, through the "require" condition.
// No global of lib.dom or @types/node is used (tsconfig.bare.json has none):
// the ok-<env>.ts files pass real AbortSignals.
import { locks, Lock, LockManager, ReleasableLock, rejectDeadlocks } from 'web-locks'
import type { AbortSignalLike, DeadlockMessage, LockGrantedCallback, LockInfo, LockManagerSnapshot, LockMode, LockOptions, LockRequestTrace } from 'web-locks'
import { installed } from 'web-locks/polyfill'
import { installed as forced } from 'web-locks/polyfill/force'
import webLocks = require('web-locks')

// Exact type equality: Expect<Equal<A, B>> fails to compile unless A is B.
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false
type Expect<T extends true> = T

export async function requests (signal: AbortSignalLike): Promise<void> {
  // request(name, callback): the result is the callback's, awaited.
  const n = locks.request('a', () => 42)
  type _n = Expect<Equal<typeof n, Promise<number>>>
  const s = locks.request('a', async () => 'text')
  type _s = Expect<Equal<typeof s, Promise<string>>>
  const nested = locks.request('a', async () => Promise.resolve(true))
  type _nested = Expect<Equal<typeof nested, Promise<boolean>>>
  const v = locks.request('a', () => {})
  type _v = Expect<Equal<typeof v, Promise<void>>>
  const explicit = locks.request<number>('a', () => 1)
  type _explicit = Expect<Equal<typeof explicit, Promise<number>>>

  // The callback gets Lock | null (null: an unavailable ifAvailable request).
  await locks.request('a', (lock) => {
    type _lock = Expect<Equal<typeof lock, Lock | null>>
    if (lock === null) return
    const name: string = lock.name
    const mode: LockMode = lock.mode
    const token: bigint = lock.token
    return [name, mode, token]
  })
  const typed = await locks.request('a', (lock: Lock | null) => lock?.mode)
  type _typed = Expect<Equal<typeof typed, LockMode | undefined>>

  // request(name, options, callback), with every option.
  const shared = locks.request('a', { mode: 'shared', signal }, async (lock) => lock !== null)
  type _shared = Expect<Equal<typeof shared, Promise<boolean>>>
  await locks.request('a', { ifAvailable: true }, (lock) => lock ?? 'busy')
  await locks.request('a', { steal: true, mode: 'exclusive' }, () => undefined)
  const options: LockOptions = { mode: 'shared' }
  await locks.request('a', options, () => null)
  const callback: LockGrantedCallback<Promise<number>> = async (lock) => (lock ? 1 : 0)
  const viaCallback = locks.request('a', options, callback)
  type _viaCallback = Expect<Equal<typeof viaCallback, Promise<number>>>
}

export async function acquires (signal: AbortSignalLike, flag: boolean, options: LockOptions): Promise<void> {
  // acquire(name): a ReleasableLock, which is a Lock, released by release()
  // or [Symbol.asyncDispose]().
  const lock = await locks.acquire('a')
  type _lock = Expect<Equal<typeof lock, ReleasableLock>>
  const asLock: Lock = lock
  const token: bigint = lock.token
  const released: Promise<void> = lock.release()
  const disposed: Promise<void> = lock[Symbol.asyncDispose]()
  await Promise.all([released, disposed])

  // null only where ifAvailable may be set.
  const shared = await locks.acquire('a', { mode: 'shared', signal, ifAvailable: false })
  type _shared = Expect<Equal<typeof shared, ReleasableLock>>
  const maybe = await locks.acquire('a', { ifAvailable: true })
  type _maybe = Expect<Equal<typeof maybe, ReleasableLock | null>>
  const unknown = await locks.acquire('a', { ifAvailable: flag })
  type _unknown = Expect<Equal<typeof unknown, ReleasableLock | null>>
  const viaOptions = await locks.acquire('a', options)
  type _viaOptions = Expect<Equal<typeof viaOptions, ReleasableLock | null>>
  await maybe?.release()

  // On a manager that openLockManager() opened too.
  const scope = await webLocks.openLockManager('app')
  const stolen = await scope.acquire('a', { steal: true })
  type _stolen = Expect<Equal<typeof stolen, ReleasableLock>>
  void asLock, token
}

export async function query (): Promise<string[]> {
  const snapshot = await locks.query()
  type _snapshot = Expect<Equal<typeof snapshot, LockManagerSnapshot>>
  const all: LockInfo[] = [...snapshot.held, ...snapshot.pending]
  return all.map((info) => `${info.name} ${info.mode} ${info.clientId}`)
}

export function classes (value: unknown): void {
  const manager: LockManager = locks
  if (value instanceof Lock) {
    const mode: LockMode = value.mode
    void mode
  }
  if (value instanceof LockManager) void value.query()
  void manager
}

// The polyfill's one export (web-locks/polyfill/force's too), and the whole
// module as a namespace.
export const polyfilled: boolean = installed
export const forcedIn: boolean = forced
type _ns = Expect<Equal<typeof webLocks.locks, LockManager>>

export async function shared (): Promise<void> {
  const scope = await webLocks.openLockManager('app', { dir: '/tmp', size: 1 << 20, mode: 0o600 })
  const asManager: LockManager = scope
  const n = await scope.request('a', { mode: 'shared' }, () => 1)
  type _n = Expect<Equal<typeof n, number>>
  const closed: Promise<void> = scope.close()
  await closed
  await asManager.query()
  await webLocks.openLockManager('app')
  const db = await webLocks.openLockManager('app', { postgres: 'postgres://app@db/app', schema: 'locks', keepalive: 5000 })
  await db.close()
  await webLocks.openLockManager('app', { postgres: { host: 'db', user: 'app' } })
  const sql: string = webLocks.postgresSchema('locks')
}

// The context of the tracing channel's events.
export function traced (request: LockRequestTrace): string {
  const manager: 'process' | 'machine' | 'postgres' = request.manager
  const granted: boolean | null = request.granted
  const waitMs: number | undefined = request.waitMs
  const token: bigint | undefined = request.token
  const mode: LockMode = request.mode
  const flags: boolean[] = [request.ifAvailable, request.steal, request.signal]
  const ids: Array<string | undefined> = [request.name, request.scope, request.clientId]
  return `${manager} ${granted} ${waitMs} ${token} ${mode} ${flags} ${ids} ${request.result} ${request.error}`
}

// Deadlocks: the channel's message, and the opt-in rejection.
export function deadlocks (message: DeadlockMessage): string[] {
  rejectDeadlocks(locks)
  rejectDeadlocks(locks, false)
  return message.cycle.map((step) => `${step.name} ${step.mode} ${step.clientId} -> ${step.waitsFor}`)
}
