// Types as in TypeScript's lib.dom, for the Web Locks API.

export type LockMode = 'exclusive' | 'shared'

export interface LockOptions {
  ifAvailable?: boolean
  mode?: LockMode
  signal?: AbortSignal
  steal?: boolean
}

export interface LockInfo {
  clientId?: string
  mode?: LockMode
  name?: string
}

export interface LockManagerSnapshot {
  held?: LockInfo[]
  pending?: LockInfo[]
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
