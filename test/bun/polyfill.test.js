// Run by `bun test --preload <package>/polyfill.js` (scripts/test-runtimes.js):
// the polyfill under Bun's own test runner, which has a navigator without
// locks.
import { test, expect } from 'bun:test'

test('navigator.locks, LockManager and Lock come from the polyfill', async () => {
  expect(navigator.locks instanceof LockManager).toBe(true)
  expect(await navigator.locks.request('bun', (lock) => lock instanceof Lock && lock.name)).toBe('bun')
})

test('errors are DOMExceptions, and an AbortSignal aborts a waiting request', async () => {
  const reserved = await navigator.locks.request('-bun', () => {}).catch((e) => e)
  expect(reserved).toBeInstanceOf(DOMException)
  expect(reserved.name).toBe('NotSupportedError')
  let release
  let held
  await new Promise((started) => {
    held = navigator.locks.request('bun-held', () => new Promise((resolve) => { release = resolve; started() }))
  })
  const controller = new AbortController()
  const waiting = navigator.locks.request('bun-held', { signal: controller.signal }, () => 'granted').catch((e) => e.name)
  controller.abort()
  expect(await waiting).toBe('AbortError')
  release()
  await held
})
