// Must NOT compile. Each line that must fail ends with `// error TSxxxx`
// (one or more codes); scripts/test-types.js checks that tsc reports exactly
// these errors, on these lines, and no other.
import { locks, Lock, LockManager, openLockManager, ReleasableLock, rejectDeadlocks } from 'web-locks'
import type { LockOptions, LockManagerSnapshot, LockRequestTrace } from 'web-locks'
import { installed } from 'web-locks/polyfill'

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false
type Expect<T extends true> = T

export async function misuse (): Promise<void> {
  // Not constructible: both classes have private constructors.
  new Lock() // error TS2673
  new LockManager() // error TS2673

  // LockMode is 'exclusive' | 'shared'.
  await locks.request('a', { mode: 'write' }, () => {}) // error TS2322
  const options: LockOptions = { mode: 'read' } // error TS2322

  // The callback gets Lock | null, nothing else.
  await locks.request('a', (lock: string) => lock) // error TS2345
  await locks.request('a', (lock: Lock) => lock.name) // error TS2345
  await locks.request('a', (lock) => lock.name) // error TS18047

  // Missing or misplaced arguments.
  await locks.request('a') // error TS2554
  await locks.request(() => {}) // error TS2554
  await locks.request('a', () => {}, {}) // error TS2559

  // Unknown option, wrongly typed option.
  await locks.request('a', { exclusive: true }, () => {}) // error TS2353
  await locks.request('a', { signal: 'abort' }, () => {}) // error TS2322
  await locks.request('a', { signal: { aborted: false } }, () => {}) // error TS2739

  // The result type is the callback's, awaited.
  const n: number = await locks.request('a', async () => 'text') // error TS2322
  const p: Promise<string> = await locks.request('a', async () => 'text') // error TS2322

  // Read-only properties.
  await locks.request('a', (lock) => { if (lock) lock.name = 'b' }) // error TS2540
  await locks.request('a', (lock) => { if (lock) lock.token = 1n }) // error TS2540
  await locks.request('a', (lock) => lock?.token === 1) // error TS2367

  // query() gives a snapshot, not a list.
  const snapshot: LockManagerSnapshot = await locks.query()
  snapshot.held.push({ name: 'x', mode: 'exclusive' }) // error TS2741
  const first: string = snapshot[0] // error TS7053

  // The Equal/Expect checks of ok.ts do fail on a wrong type.
  type _wrong = Expect<Equal<typeof n, Promise<number>>> // error TS2344

  // Only a manager that openLockManager() opened has close().
  await locks.close() // error TS2339
  await openLockManager('app', { size: '1M' }) // error TS2769
  await openLockManager('app', { postgres: 'postgres://db', schema: 1 }) // error TS2769

  // acquire() takes a name and options, no callback; its lock's release()
  // and [Symbol.asyncDispose]() take nothing and give a Promise<void>.
  await locks.acquire() // error TS2554
  await locks.acquire('a', () => {}) // error TS2769
  await locks.acquire('a', { mode: 'write' }) // error TS2769
  const acquired = await locks.acquire('a')
  const released: boolean = await acquired.release() // error TS2322
  const maybe = await locks.acquire('a', { ifAvailable: true })
  await maybe.release() // error TS18047
  const notReleasable: ReleasableLock = await locks.request('a', (lock) => lock!) // error TS2739
  void released, notReleasable
  // rejectDeadlocks takes a LockManager, and a boolean.
  rejectDeadlocks({}) // error TS2739
  rejectDeadlocks(locks, 'yes') // error TS2345

  // The tracing channel's context: read-only, its manager one of three.
  const traced = {} as LockRequestTrace
  traced.granted = true // error TS2540
  const kind: 'worker' = traced.manager // error TS2322
  const token: number = traced.token // error TS2322
  void kind, token

  // The polyfill exports one boolean.
  const flag: string = installed // error TS2322
  void options, n, p, first, flag

  // The polyfill's globals are typed as the spec's (lib.dom's), whichever
  // environment: navigator.locks may be the platform's, without a token.
  await navigator.locks.request('a', (lock) => lock?.token) // error TS2339
  await navigator.locks.request('a', { mode: 'write' }, () => {}) // error TS2322
  const mine: Pick<LockManager, 'request' | 'query'> = navigator.locks // error TS2322
  void mine
  // Nor has it acquire() (not in the spec).
  await navigator.locks.acquire('a') // error TS2339
}
