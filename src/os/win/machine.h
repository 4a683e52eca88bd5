/* The Windows family of the machine-wide manager (os/machine.h): what its
 * files (file.c, mutex.c, life.c, wake.c, watch.c, and kernel.c, what they
 * share of the system) share. Included by them only.
 *
 * The design, and what it assumes:
 *   1. The file: made under a temporary name drawn at random, then renamed
 *      to its path by a rename that never replaces (MoveFileExW without
 *      MOVEFILE_REPLACE_EXISTING); opened with every sharing mode, mapped
 *      whole. The temporary file is marked to be removed with its last
 *      handle from just after it is made until just before the rename
 *      (os/win/file.c): a process killed while it makes the file leaves an
 *      empty file if killed between its making and that mark, the whole
 *      file only between the mark's removal and the rename, else nothing. Windows has no permission bits: the file's directory is
 *      assumed to be the user's own (%LOCALAPPDATA%, whose ACL admits only
 *      that user, SYSTEM and administrators), so that no other user can
 *      read, write, make or rename files in it. `mode` is kept, not
 *      applied. The file is made with this user as its owner, and a file
 *      whose owner is another (S-1-5-32-544, Administrators, included) is
 *      refused (EACCES): a scope shared across users is not supported on
 *      Windows. The file is not sparse: extending it has the file system
 *      allocate all of it, so a full disk fails its creation, never a
 *      store into it (wl__os_file_reserve has nothing left to do).
 *   2. The mutex: an exclusive LockFileEx lock on the byte at WL__MUTEX_AT,
 *      far past the file's end, through the manager's handle of the file,
 *      then the holder and broken words in the file (os/holder.h, shared
 *      with the POSIX family: a taker that got the byte and finds `holder`
 *      set follows a holder that died holding it; `broken`: unusable for
 *      good, LMDB's rule). A byte-range lock is the file's, not a name's:
 *      no object can be made under a name to squat it, and the system
 *      gives it up when the handle closes, so when its process ends.
 *      ASSUMED, not tested: processes of containers (silos, each with its
 *      own \BaseNamedObjects) that share the file's directory meet on it,
 *      as the file system keeps it. Windows's byte locks belong to a
 *      handle (its file object) and process: two handles of one process
 *      exclude each other, and so do two threads through one handle
 *      (test/c/test-win-machine.c, test_one_handle_two_threads), so no
 *      per-process table (as the POSIX family's local.c) is needed: each
 *      manager has its handle and its state (wl__os_local_t). Threads of a
 *      manager still take an SRW lock of it before the byte, so that only
 *      one of them at a time waits inside LockFileEx: ASSUMED, not tested,
 *      from the I/O manager's serialisation of calls on a synchronous
 *      handle, that a thread waiting there may hold up the other calls on
 *      that handle (UnlockFileEx by the holder included). Once the scope is
 *      open, no call on the manager's handle but its byte locks is made
 *      (its identity is kept from the open: file.c). Its handles are not
 *      inheritable: Windows lets go of a handle's locks as its file object
 *      is cleaned up, once its last handle closes, so a child holding a
 *      copy would keep them past its parent's death (ASSUMED from the file
 *      systems' unlock-all at cleanup).
 *   3. Proof of life: each owner holds an exclusive lock on the byte at
 *      WL__LIFE_AT + its record's offset through its manager's handle
 *      (os/win/life.c). Any process tests it by asking for a shared lock
 *      on the byte, without waiting, through a second handle of the file
 *      (the probe handle, the open by path that checks the file: its locks
 *      are not the manager's handle's, so this process's own owners read
 *      as held) and giving it back at once if it got it; shared, so that
 *      two threads' probes never exclude each other. Only
 *      ERROR_LOCK_VIOLATION reads as held: another failure (a broken
 *      handle, as an SMB path's after a reconnect) would keep a dead owner
 *      alive for good, so the probe handle is opened again by path, if
 *      that is still the file, and the byte asked once more; if that fails
 *      too, it is held, in doubt, and the next ask opens again. The pid
 *      and creation time in the record only name a process to the death
 *      watch (point 5): a pid reused by another process, a forged record,
 *      or a copy of a live scope's file (whose bytes no one locks) never
 *      keep a dead owner alive. Windows gives a process's locks up as its
 *      handles close, when it exits or is terminated: wine (its
 *      wineserver) at once; real Windows documents only that the locks are
 *      unlocked by the operating system, not when, and may do it after the
 *      process's handle is signalled.
 *   4. Wake-ups: a named auto-reset event per agent (and per owner's
 *      watcher, its bell), named by a number drawn at random (Global\,
 *      web-locks-wake-<16 hex digits>). The system removes a named event
 *      with its last handle: a dead agent leaves nothing to reap.
 *   5. The death watch: a watcher thread per manager waits on its bell and,
 *      while the target's byte is held, on the process handle of the
 *      process its record names (checked against the record's creation
 *      time), and then asks for the byte again, every few milliseconds,
 *      until it is let go (point 3: its release may come after the process
 *      handle is signalled), and asks its sweeper thread to sweep. A
 *      record that names no process this user can open (another user's, a
 *      forged one, one already gone, its pid reused) has the watcher ask
 *      for the byte in the same way from the start, for as long as it is
 *      held: no death goes unnoticed for want of a process handle
 *      (os/win/watch.c).
 *   6. Who may open the wake events: each is made with a DACL that gives
 *      this process's user and SYSTEM full access, and no one else any,
 *      whatever the token's default DACL (an elevated process's admits
 *      Administrators and SYSTEM but not the user, whose processes that are
 *      not elevated could then open no wake event: their wake-ups would be
 *      lost and their waits endless), and with the user as their owner
 *      (os/win/kernel.c). Built once per process from its token. Assumed,
 *      not tested (wine has no elevation): Windows labels an object with
 *      its maker's integrity level only below medium, so an elevated
 *      (high) process's objects read as medium and the user's other
 *      processes may write them. A wake event's name that exists already
 *      is drawn again. */
#ifndef WL_OS_WIN_MACHINE_H
#define WL_OS_WIN_MACHINE_H

#define WIN32_LEAN_AND_MEAN
#include <errno.h>
#include <windows.h>

#include <accctrl.h>

#include "../machine.h"

/* The named objects' names: Global\web-locks-<kind>-<16 hex digits>. */
#define WL__WIN_NAME_MAX 64

/* Far past any file's end (a region is at most 2^40 bytes): a byte-range
 * lock needs no data there. */
#define WL__MUTEX_AT ((uint64_t)1 << 47)
#define WL__LIFE_AT ((uint64_t)1 << 48)

/* This manager's state of its file (m->local): one per handle of the file
 * (point 2). */
typedef struct wl__os_local_s {
  SRWLOCK mu;   /* the mutex among this handle's threads */
  int dead;     /* taken after its holder died, not repaired: under mu */
  DWORD pid;    /* this process's id */
  HANDLE probe; /* a second handle of the file, once probed (point 3) */
  SRWLOCK probe_mu; /* over probe: shared to ask, exclusive to replace */
  DWORD volume; /* the serial number of the file's volume, once probed */
  uint64_t ino; /* the file's index on it, once probed */
  HANDLE doom;  /* a made file's, with DELETE access, until published */
} wl__os_local_t;

/* Takes (LOCKFILE_EXCLUSIVE_LOCK and LOCKFILE_FAIL_IMMEDIATELY in flags, or
 * 0) or gives back (flags -1) a lock on the byte at `at` through h: TRUE,
 * or FALSE (GetLastError says why; ERROR_LOCK_VIOLATION: another handle
 * holds it). Giving back a byte the handle holds fails only for a handle
 * no longer valid, whose locks went with it: no caller looks. */
BOOL wl__win_lock(HANDLE h, DWORD flags, uint64_t at);
/* Whether owner record `off`'s byte is held, asked through the probe
 * handle and given back at once: 1, and when in doubt; 0 if it is free
 * (life.c). */
int wl__win_held(wl_manager_t *m, wl_off_t off);
/* Replaces the probe handle `failed` by a new open of the file's path, if
 * that is still the file and no other thread replaced it first: 0, or -1
 * (file.c). */
int wl__win_probe_reopen(wl_manager_t *m, HANDLE failed);

/* Test builds (WL_FAULTS) tell a test's hook each step of the watcher
 * (watch.c), with the pid its look read, so that a test can await a step
 * instead of sleeping: "watch-process" (it waits for that process),
 * "watch-no-process" (no process this user can open has that identity),
 * "watch-again" (pid 0: the byte is still held after the process's end,
 * or with no process, and it waits to ask again). */
#ifdef WL_FAULTS
extern void (*wl__watch_hook)(const char *step, uint32_t pid);
#define WL__WATCH_STEP(step, pid)                                             \
  (wl__watch_hook != NULL ? wl__watch_hook(step, pid) : (void)0)
#else
#define WL__WATCH_STEP(step, pid) ((void)0)
#endif

/* kernel.c: name = Global\web-locks-<kind>-<number in hex>. */
void wl__win_name(wchar_t *name, const char *kind, uint64_t number);
/* kernel.c: the security attributes of the wake events (owned by this
 * process's user, open to that user and SYSTEM alone) and of the file
 * (owned by that user): NULL if this process's user cannot be learnt
 * (GetLastError says why). Made once per process. */
SECURITY_ATTRIBUTES *wl__win_objects(void);
SECURITY_ATTRIBUTES *wl__win_file(void);
/* Whether the object of handle h (of the kind type: SE_KERNEL_OBJECT,
 * SE_FILE_OBJECT) is owned by this process's user: 0; 1 if it is not (its
 * owner, as a string SID or "no one", then in owner); -1 if its owner
 * cannot be read (GetLastError says why). */
int wl__win_owned(HANDLE h, SE_OBJECT_TYPE type, char *owner, size_t len);
/* A negative errno for a Windows error code. */
int wl__win_errno(DWORD error);
/* Process pid's creation time (a FILETIME) through an open handle h of it:
 * 0, or -1. */
int wl__win_created(HANDLE h, uint64_t *created);
/* The owner record at offset off, within the mapping, or NULL: an offset
 * from the file is checked before it is used. */
wl__owner_t *wl__win_owner(const wl_manager_t *m, wl_off_t off);

#endif
