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
 *   2. The mutex: a named mutex (Global\, so that processes of every
 *      session of the user meet) named by a number drawn with the file and
 *      kept in it (wl__os_file_mutex_t.name). The name is no secret: any
 *      process, of any user, can list \BaseNamedObjects and read it there
 *      while the scope is open, and make an object under it once no
 *      process has the scope open. A mutex that exists already is used
 *      only if this user owns it (point 6); one of another user's, or an
 *      object of another kind under the name, has the open fail with
 *      EACCES, never wait on an object that another user holds. Windows gives
 *      a mutex whose holder thread ended up to its next taker with
 *      WAIT_ABANDONED; a holder word, as in the POSIX family, covers the
 *      named mutex that went away with its last handle (its holder was the
 *      last process with it open, and died): the next process makes a new
 *      one and finds the word set. A `broken` word marks it unusable for
 *      good, as LMDB does.
 *   3. Proof of life: the owner's process identity in its record (pid and
 *      creation time, which together never name two processes). Another
 *      process tests it by opening that pid (OpenProcess), comparing the
 *      creation time, and asking whether it has ended (its handle is
 *      signalled). No such process, or another one at that pid, or an
 *      ended one: dead. A process that cannot be opened (another user's,
 *      access denied): alive, in doubt. Nothing read from the record is
 *      trusted beyond naming a process to ask the system about.
 *   4. Wake-ups: a named auto-reset event per agent (and per owner's
 *      watcher, its bell), named by a number drawn at random (Global\,
 *      web-locks-wake-<16 hex digits>). The system removes a named event
 *      with its last handle: a dead agent leaves nothing to reap.
 *   5. The death watch: a watcher thread per manager waits on its bell and
 *      on the process handle of the owner it watches (checked against the
 *      owner's creation time), and asks its sweeper thread to sweep when
 *      that process ends (os/win/watch.c).
 *   6. Who may open the named objects: each is made with a DACL that gives
 *      this process's user and SYSTEM full access, and no one else any,
 *      whatever the token's default DACL (an elevated process's admits
 *      Administrators and SYSTEM but not the user, whose processes that are
 *      not elevated could then open neither the mutex nor a wake event:
 *      their wake-ups would be lost and their waits endless), and with the
 *      user as their owner (os/win/kernel.c). Built once per process from
 *      its token. Assumed, not tested (wine has no elevation): Windows
 *      labels an object with its maker's integrity level only below
 *      medium, so an elevated (high) process's objects read as medium and
 *      the user's other processes may write them. An object found under a name (the mutex's, which others
 *      can learn: point 2) is used only if its owner is this user, which
 *      only this user's processes (and administrators) can make it; a wake
 *      event's name that exists already is drawn again. */
#ifndef WL_OS_WIN_MACHINE_H
#define WL_OS_WIN_MACHINE_H

#define WIN32_LEAN_AND_MEAN
#include <errno.h>
#include <windows.h>

#include <accctrl.h>

#include "../machine.h"

/* The named objects' names: Global\web-locks-<kind>-<16 hex digits>. */
#define WL__WIN_NAME_MAX 64

/* This process's state of a manager's file (m->local), one per handle. */
typedef struct wl__os_local_s {
  HANDLE mutex; /* the named mutex, once the file is probed */
  DWORD pid;    /* this process's id */
  int dead;     /* the mutex's last holder died: repairing */
  DWORD volume; /* the serial number of the file's volume, once probed */
  HANDLE doom;  /* a made file's, with DELETE access, until published */
} wl__os_local_t;

/* kernel.c: name = Global\web-locks-<kind>-<number in hex>. */
void wl__win_name(wchar_t *name, const char *kind, uint64_t number);
/* kernel.c: the security attributes of the named objects (owned by this
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
