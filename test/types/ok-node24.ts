// Must compile with @types/node 24+, which types Node's built-in Web Locks
// (navigator.locks, worker_threads.locks): this package's LockManager can be
// used where Node's is expected. (Not the other way round: Node's locks have
// no fencing token; errors-node24.ts.)
import { locks } from 'web-locks'
import type { LockRequestTrace } from 'web-locks'
import * as workerThreads from 'node:worker_threads'
import { tracingChannel } from 'node:diagnostics_channel'

export const asNodes: workerThreads.LockManager = locks
export const builtin: workerThreads.LockManager = navigator.locks

export async function both (): Promise<[number, number]> {
  return [await locks.request('a', () => 1), await navigator.locks.request('a', () => 2)]
}

// Node's AbortSignal is accepted as a signal, and Node's LockOptions as
// options.
export async function signals (): Promise<number> {
  const controller = new AbortController()
  await locks.request('a', { signal: controller.signal }, () => 1)
  const options: workerThreads.LockOptions = { mode: 'shared', signal: AbortSignal.timeout(1000) }
  return locks.request('a', options, () => 2)
}

// `await using` (lib esnext.disposable, which @types/node 24 brings): an
// acquired lock is an AsyncDisposable, and so is null.
export async function using (): Promise<bigint> {
  await using lock = await locks.acquire('a')
  await using maybe = await locks.acquire('b', { ifAvailable: true })
  const disposable: AsyncDisposable = lock
  void disposable, maybe
  return lock.token
}

// The tracing channel, typed with the context of its events.
export function trace (): void {
  tracingChannel<unknown, LockRequestTrace>('web-locks.request').subscribe({
    start (request) {
      const name: string = request.name
      console.log(name, request.manager)
    },
    asyncStart (request) {
      const granted: boolean | null = request.granted
      console.log(granted, request.waitMs, request.token)
    },
    end () {},
    asyncEnd () {},
    error (request) {
      console.log(request.error)
    }
  })
}
