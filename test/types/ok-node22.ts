// Must compile with @types/node 22 (no Web Locks there): Node's AbortSignal
// is accepted as a signal.
import { locks } from 'web-locks'

export async function signals (): Promise<number> {
  const controller = new AbortController()
  await locks.request('a', { signal: controller.signal }, () => 1)
  return locks.request('a', { signal: AbortSignal.any([controller.signal, AbortSignal.timeout(1000)]) }, () => 2)
}

// `await using`, with the AsyncDisposable that @types/node 22 declares.
export async function using (): Promise<bigint> {
  await using lock = await locks.acquire('a')
  const disposable: AsyncDisposable = lock
  void disposable
  return lock.token
}
