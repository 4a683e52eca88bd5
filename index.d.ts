// Types as in TypeScript's lib.dom, for the Web Locks API.

export type LockMode = 'exclusive' | 'shared'

export interface LockOptions {
  ifAvailable?: boolean
  mode?: LockMode
  signal?: AbortSignal
  steal?: boolean
}

// lib.dom marks every member of these two optional (WebIDL dictionaries);
// query() here always fills them all, so they are required, as in
// @types/node's worker_threads types. Both stay assignable to lib.dom's.
export interface LockInfo {
  clientId: string
  mode: LockMode
  name: string
}

export interface LockManagerSnapshot {
  held: LockInfo[]
  pending: LockInfo[]
}

export interface LockGrantedCallback<T> {
  (lock: Lock | null): T
}

/** A granted lock. Not constructible. */
export declare class Lock {
  private constructor ()
  readonly mode: LockMode
  readonly name: string
}

/** The process-wide lock manager, as seen from one thread. Not constructible. */
export declare class LockManager {
  private constructor ()
  query (): Promise<LockManagerSnapshot>
  request<T> (name: string, callback: LockGrantedCallback<T>): Promise<Awaited<T>>
  request<T> (name: string, options: LockOptions, callback: LockGrantedCallback<T>): Promise<Awaited<T>>
}

/** This thread's LockManager. */
export declare const locks: LockManager

/**
 * Contention figures for one lock name, counted on this thread for the
 * requests made while the monitor runs (a request made before it started is
 * not counted, whatever happens to it later).
 */
export interface ContentionFigures {
  /** Requests made. */
  requests: number
  /** Requests granted (their callback got a Lock). */
  granted: number
  /** Granted requests that had to wait for the lock. */
  waited: number
  /** Total time those requests waited, in milliseconds. */
  waitMs: number
  /** The longest of those waits, in milliseconds. */
  maxWaitMs: number
  /** ifAvailable requests whose callback got null. */
  missed: number
  /** Requests whose lock was stolen. */
  stolen: number
  /** Requests aborted by their signal before their callback ran. */
  aborted: number
  /** Requests whose callback threw or rejected (whatever the error, even an AbortError). */
  failed: number
}

export interface ContentionMonitor {
  /** A copy of the figures so far, by lock name. */
  figures (): Map<string, ContentionFigures>
  /** Stops counting. */
  stop (): void
}

/** Starts counting contention per lock name for this thread's requests. */
export declare function monitorContention (): ContentionMonitor
