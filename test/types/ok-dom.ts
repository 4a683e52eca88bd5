// Must compile with lib.dom (no @types/node): this package's LockManager and
// Lock fit lib.dom's, so browser-typed code can be given this package's
// `locks`, e.g. under the polyfill.
import { locks, Lock } from 'web-locks'
import 'web-locks/polyfill'

export const asDom: globalThis.LockManager = locks
export function lockAsDom (lock: Lock): globalThis.Lock { return lock }
export const fromNavigator: globalThis.LockManager = navigator.locks

export async function both (): Promise<string> {
  const ours = await locks.request('a', { signal: new AbortController().signal }, (lock) => lock?.name ?? '')
  return ours + await navigator.locks.request('a', (lock) => lock?.name ?? '')
}

// lib.dom's LockOptions (its AbortSignal) are accepted as options.
export async function domOptions (): Promise<void> {
  const options: globalThis.LockOptions = { mode: 'shared', signal: AbortSignal.timeout(1000) }
  await locks.request('a', options, () => {})
}
