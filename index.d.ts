// Types as in TypeScript's lib.dom, for the Web Locks API.

export type LockMode = 'exclusive' | 'shared'

export interface LockOptions {
  ifAvailable?: boolean
  mode?: LockMode
  signal?: AbortSignalLike
  steal?: boolean
}

/**
 * An AbortSignal, as these declarations see it: lib.dom's and @types/node's
 * fit, but neither is needed (a project without lib.dom or @types/node, e.g.
 * TypeScript 6+'s default empty `types`, compiles). At run time only a real
 * AbortSignal is accepted (Node's, or the global AbortSignal class's, e.g.
 * jsdom's): anything else is a TypeError.
 */
export interface AbortSignalLike {
  readonly aborted: boolean
  readonly reason: any
  addEventListener (type: 'abort', listener: (this: any, event: any) => any, options?: any): void
  removeEventListener (type: 'abort', listener: (this: any, event: any) => any, options?: any): void
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
  /**
   * Not in the spec: this grant's fencing token. Each lock manager (the
   * process-wide `locks`, or one scope of openLockManager()) numbers its
   * grants in increasing order (possibly skipping numbers), so a token is
   * greater than every token the same manager gave before, whatever the
   * name, thread or process: for one name, tokens increase in grant order,
   * and a thief's is greater than the holders' it took the lock from. A
   * resource can so refuse a holder that has lost its lock, e.g.
   * `UPDATE ... SET fence = $token WHERE id = $1 AND fence < $token`.
   */
  readonly token: bigint
}

// The symbol of explicit resource management (`await using`), where no lib
// declares it (lib esnext.disposable does; @types/node 22 declares it so
// too). Node has it from 18.18 on.
declare global {
  interface SymbolConstructor {
    readonly asyncDispose: unique symbol
  }
}

/**
 * Not in the spec: a granted lock that acquire() gave (a Lock at run time:
 * `instanceof Lock` holds), held until release() or [Symbol.asyncDispose]()
 * (the end of an `await using` block). Not constructible.
 */
export declare class ReleasableLock implements Lock {
  private constructor ()
  readonly mode: LockMode
  readonly name: string
  readonly token: bigint
  /**
   * Releases the lock. Every call (and [Symbol.asyncDispose]()) returns the
   * same promise: fulfilled once the lock is released, or rejected with the
   * error that request() would have rejected with, an AbortError if the
   * lock was stolen or its manager closed.
   */
  release (): Promise<void>
  /** release(), for `await using`. */
  [Symbol.asyncDispose] (): Promise<void>
}

/**
 * A lock manager as seen from one thread: the process-wide one (`locks`) or
 * one that openLockManager() opened. Not constructible.
 */
export declare class LockManager {
  private constructor ()
  query (): Promise<LockManagerSnapshot>
  request<T> (name: string, callback: LockGrantedCallback<T>): Promise<Awaited<T>>
  request<T> (name: string, options: LockOptions, callback: LockGrantedCallback<T>): Promise<Awaited<T>>
  /**
   * Not in the spec: request() without a callback, as proposed for the spec
   * (w3c/web-locks#122). Resolves with the lock once it is granted, held
   * until its release() or the end of an `await using` block; with null
   * when `ifAvailable` is set and the lock is not free. Rejects as request()
   * does (the same options, the same errors). A lock never released stays
   * held, as a callback's whose promise never settles, until the manager is
   * closed or the thread ends.
   */
  acquire (name: string, options: LockOptions & { ifAvailable: true }): Promise<ReleasableLock | null>
  acquire (name: string, options?: LockOptions & { ifAvailable?: false }): Promise<ReleasableLock>
  acquire (name: string, options?: LockOptions): Promise<ReleasableLock | null>
}

/** A LockManager that openLockManager() opened (the same class). */
export interface SharedLockManager extends LockManager {
  /**
   * Not in the spec. This thread leaves the manager: its pending requests
   * leave their queues, its locks are released, and the promises of its
   * unsettled requests reject with an AbortError. Afterwards request() and
   * query() reject with an InvalidStateError. Closing twice is harmless.
   * (The process-wide `locks` cannot be closed: NotSupportedError.)
   */
  close (): Promise<void>
}

/** This thread's LockManager. */
export declare const locks: LockManager

export interface OpenLockManagerOptions {
  /** The directory of the scope's file (default `/dev/shm` on Linux, `/var/tmp` on macOS, `%LOCALAPPDATA%` on Windows; required on Windows where `%LOCALAPPDATA%` is not set). */
  dir?: string
  /**
   * The file's size in bytes when this call creates it: whole 4096-byte
   * pages, at least 8192 (default 16 MiB). An existing file keeps its size.
   */
  size?: number
  /**
   * The file's permission bits when this call creates it (default 0o600),
   * and whom this call trusts: with a private mode, a file that another user
   * made is refused (EACCES); with a mode that shares the scope, it is
   * accepted when its own mode grants access. One of 0o600, 0o660, 0o606,
   * 0o666 (RangeError otherwise): a user who may only read the file, or only
   * write it, could hold its locks.
   */
  mode?: number
}

export interface PostgresLockManagerOptions {
  /**
   * The database: a connection string, node-postgres's client config, or a
   * `pg.Pool` (the calls then go through it). Needs the `pg` package. The
   * manager's session must be a session of its own: behind a pooler in
   * transaction or statement mode, it rejects with `code: 'EPOOLED'`. A
   * pool whose connections run at another isolation level than READ
   * COMMITTED is refused with `code: 'EISOLATION'`.
   */
  postgres: string | object
  /**
   * The schema of the manager's tables and functions (default `web_locks`),
   * created on first use.
   */
  schema?: string
  /**
   * Milliseconds (at least 300, default 10000) within which a cut-off side
   * learns that its session is lost, and the server ends a silent session.
   */
  keepalive?: number
}

/**
 * This thread's agent of the lock manager shared by every process on this
 * host that opens `scope` (letters, digits, `.`, `_`, `-`; at most 100
 * characters). Opening a scope again in the same thread gives the same
 * manager until it is closed. Linux, macOS and Windows only: elsewhere it
 * rejects with a NotSupportedError. A file that is damaged, of another layout, a symbolic
 * link or not to be trusted rejects with an Error whose `code` says so
 * (ECORRUPT, ELAYOUT, ELOOP, EACCES, ...); one found damaged while in use
 * rejects every unsettled request of the scope with its ECORRUPT error.
 */
export declare function openLockManager (scope: string, options?: OpenLockManagerOptions): Promise<SharedLockManager>
/**
 * With a `postgres` option: a new agent of the lock manager shared by every
 * process, on any host, that opens `scope` in that database.
 */
export declare function openLockManager (scope: string, options: PostgresLockManagerOptions): Promise<SharedLockManager>

/**
 * The SQL that creates the PostgreSQL manager's schema (default
 * `web_locks`), for a database owner to run (as one query: it is then one
 * transaction) where the role that uses it may not create it; with
 * `layout`, the SQL that migrates a schema of that older layout instead (an
 * `EACCES` error of openLockManager names it). Throws a RangeError for a
 * layout this version does not know.
 */
export declare function postgresSchema (schema?: string, layout?: number): string

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

/**
 * The context of a lock request's events on the `diagnostics_channel`
 * tracing channel `web-locks.request` (`tracing:web-locks.request:start`,
 * `:end`, `:asyncStart`, `:asyncEnd`, `:error`): one object per request,
 * shared by all its events. For Node's `tracingChannel<unknown,
 * LockRequestTrace>('web-locks.request')`. The package itself exports no
 * value for it: the channel is found by its name.
 */
export interface LockRequestTrace {
  readonly name: string
  readonly mode: LockMode
  readonly ifAvailable: boolean
  readonly steal: boolean
  /** Whether the request has a signal. */
  readonly signal: boolean
  /** `locks`, openLockManager(scope), or openLockManager(scope, { postgres }). */
  readonly manager: 'process' | 'machine' | 'postgres'
  /** The scope of openLockManager; undefined for `locks`. */
  readonly scope: string | undefined
  /**
   * The requesting agent's clientId, as query() shows it; undefined while a
   * PostgreSQL agent joins again, until the callback is reached.
   */
  readonly clientId: string | undefined
  /**
   * false until the callback is reached (and for a request that ended
   * without it); then true, or null for an ifAvailable request that missed.
   */
  readonly granted: boolean | null
  /**
   * Milliseconds (performance.now()) from the request's making to its
   * callback, or to its end if the callback never ran; undefined before.
   */
  readonly waitMs: number | undefined
  /** The grant's fencing token (lock.token). */
  readonly token: bigint | undefined
  /** What the request's promise resolved with. */
  readonly result: unknown
  /** What the request's promise rejected with. */
  readonly error: unknown
}

/**
 * One request of a deadlock: a cycle of waiting requests, each waiting for a
 * lock held, or a request queued ahead, by the agent of the next.
 */
export interface DeadlockStep {
  readonly name: string
  readonly mode: LockMode
  /** The agent whose request this is (as query() shows it). */
  readonly clientId: string
  /** The agent it waits for: the next step's. */
  readonly waitsFor: string
}

/**
 * What the `diagnostics_channel` channel `web-locks.deadlock` publishes, in
 * every thread that has a request in a deadlock, once per deadlock. A thread
 * watches while it has a subscriber there, or called `rejectDeadlocks`, or
 * `WEB_LOCKS_DEADLOCKS` is `watch` or `reject` in its environment; a cycle is
 * found when each of its threads watched as its requests were made.
 */
export interface DeadlockMessage {
  readonly cycle: DeadlockStep[]
}

/**
 * While `on` (default true), a deadlock through one of this thread's
 * requests of `manager` rejects one request of it with a DOMException named
 * OperationError, whose `cycle` names it. By default a deadlock is only
 * published, and its requests wait, as the spec says.
 */
export declare function rejectDeadlocks (manager: LockManager, on?: boolean): void
