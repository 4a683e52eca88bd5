// Must compile in every environment here (es2022 only, @types/node 24 or 22,
// lib.dom): the globals that web-locks/polyfill (and web-locks/polyfill/force)
// declare, navigator.locks and the LockManager and Lock classes, typed as the
// spec's. They merge with lib.dom's and @types/node's declarations, and stand
// alone where there are none.
import 'web-locks/polyfill'
import 'web-locks/polyfill/force'
import { locks } from 'web-locks'

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false
type Expect<T extends true> = T

export const global: LockManager = navigator.locks
type _locks = Expect<Equal<typeof navigator.locks, LockManager>>

// This package's LockManager and Lock fit the global ones.
export const ours: LockManager = locks
export async function ourLock (): Promise<Lock | null> {
  return locks.request('a', (lock) => lock)
}

export async function requests (): Promise<string> {
  const name = await navigator.locks.request('a', { mode: 'shared', ifAvailable: true }, (lock) => lock?.name)
  type _name = Expect<Equal<typeof name, string | undefined>>
  const mode = await navigator.locks.request('a', async (lock: Lock | null) => lock?.mode)
  type _mode = Expect<Equal<typeof mode, 'exclusive' | 'shared' | undefined>>
  // lib.dom's LockManagerSnapshot has optional members, this package's not.
  const snapshot = await navigator.locks.query()
  return [name, mode, ...(snapshot.held ?? []).map((info) => info.name)].join()
}

// The classes, as values.
export function kind (value: unknown): string {
  if (value instanceof Lock) return `lock ${value.name}`
  if (value instanceof LockManager) return 'manager'
  return 'other'
}
export const prototypes: [Lock, LockManager] = [Lock.prototype, LockManager.prototype]
