// Must compile with @types/node 24+, which types Node's built-in Web Locks
// (navigator.locks, worker_threads.locks): this package's LockManager can be
// used where Node's is expected, and Node's where this package's is.
import { locks, type LockManager } from 'web-locks'
import * as workerThreads from 'node:worker_threads'

export const asNodes: workerThreads.LockManager = locks
export const asOurs: LockManager = navigator.locks
export const builtin: workerThreads.LockManager = navigator.locks

export async function both (): Promise<[number, number]> {
  return [await locks.request('a', () => 1), await navigator.locks.request('a', () => 2)]
}
