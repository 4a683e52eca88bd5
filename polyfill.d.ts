// Installs navigator.locks where the platform has none (or null); never
// replaces one. (web-locks/polyfill/force has these types too.)
import type { LockManagerSnapshot, LockMode, LockOptions } from './index.js'

/** True when this package's `locks` was installed as `navigator.locks`. */
export declare const installed: boolean

// Only `installed` is exported (a declaration file's other declarations would
// be too, without this).
export {}

// The globals the polyfill provides: navigator.locks, and the LockManager and
// Lock classes. They are typed as the spec's (lib.dom's), not as this
// package's: where the platform has its own (lib.dom's types, Node 24's
// navigator.locks), that one stays. For this package's Lock.token, use
// require('web-locks').locks.
//
// They are declared so as to merge with lib.dom's, lib.webworker's and
// @types/node's, whichever a project has, and to stand alone in a project
// that has none (TypeScript 6+'s empty default `types`, lib es20xx only):
// lib.dom and lib.webworker (which have `onmessage`) already declare
// LockManager and Lock, so these add nothing there; `navigator` takes the
// type that another declaration gives it, as @types/node's does.

/** The spec's Lock (lib.dom's), where no lib declares it. */
interface SpecLock {
  readonly mode: LockMode
  readonly name: string
}

/** The spec's LockManager (lib.dom's), where no lib declares it. */
interface SpecLockManager {
  query (): Promise<LockManagerSnapshot>
  request<T> (name: string, callback: (lock: Lock | null) => T): Promise<Awaited<T>>
  request<T> (name: string, options: LockOptions, callback: (lock: Lock | null) => T): Promise<Awaited<T>>
}

type _Lock = typeof globalThis extends { onmessage: any } ? {} : SpecLock
type _LockManager = typeof globalThis extends { onmessage: any } ? {} : SpecLockManager
// lib.webworker (`onmessage` without `onabort`) has no Navigator of its own,
// but @types/node's then has Node's LockManager, which lib.webworker's (whose
// LockInfo.clientId is optional) does not fit: SpecLockManager does.
type _NavigatorLocks = typeof globalThis extends { onabort: any } ? LockManager
  : typeof globalThis extends { onmessage: any } ? SpecLockManager : LockManager

declare global {
  interface Lock extends _Lock {}
  var Lock: typeof globalThis extends { onmessage: any; Lock: infer T } ? T : {
    prototype: Lock
    new (): Lock
  }

  interface LockManager extends _LockManager {}
  var LockManager: typeof globalThis extends { onmessage: any; LockManager: infer T } ? T : {
    prototype: LockManager
    new (): LockManager
  }

  interface Navigator {
    readonly locks: _NavigatorLocks
  }
  var navigator: typeof globalThis extends { onmessage: any; navigator: infer T } ? T : Navigator
}
