/* The Windows family's mutex in the file (os/machine.h; the design:
 * os/win/machine.h, point 2). Taking it: this handle's SRW lock, then an
 * exclusive lock on the byte at WL__MUTEX_AT (LockFileEx, waiting), then
 * its words (os/holder.h: what a process killed at each step leaves, and
 * its fault points). Giving it back: the words, the byte, the SRW lock.
 *
 * Only one thread of a handle at a time waits for the byte: a thread
 * waiting inside LockFileEx on a synchronous handle may hold up every other
 * call on that handle, UnlockFileEx included. */
#include "machine.h"

#include "../holder.h"

int wl__os_file_mutex_init(wl__os_file_mutex_t *mu) {
  mu->holder = 0;
  mu->broken = 0;
  return 0;
}

/* A byte that cannot be taken (a handle the system no longer knows) leaves
 * the mutex unusable to this process. */
int wl__os_file_mutex_lock(wl_manager_t *m) {
  wl__os_local_t *l = m->local;
  int rc;

  AcquireSRWLockExclusive(&l->mu);
  if (!wl__win_lock(m->fd, LOCKFILE_EXCLUSIVE_LOCK, WL__MUTEX_AT)) {
    ReleaseSRWLockExclusive(&l->mu);
    return WL_ECORRUPT;
  }
  WL__FAULT("mutex-locked");
  rc = wl__holder_enter(m->file_mutex, (uint32_t)l->pid, &l->dead);
  if (rc == WL_ECORRUPT) {
    wl__win_lock(m->fd, (DWORD)-1, WL__MUTEX_AT);
    ReleaseSRWLockExclusive(&l->mu);
  }
  return rc;
}

void wl__os_file_mutex_unlock(wl_manager_t *m) {
  wl__os_local_t *l = m->local;

  wl__holder_leave(m->file_mutex, &l->dead);
  wl__win_lock(m->fd, (DWORD)-1, WL__MUTEX_AT);
  ReleaseSRWLockExclusive(&l->mu);
}

void wl__os_file_mutex_consistent(wl_manager_t *m) { m->local->dead = 0; }

/* The look's handle is its own (wl_scope_peek): no other thread waits on
 * it, and its SRW lock is not needed. The byte is asked for again, after a
 * moment that doubles up to 10 ms, until the deadline (a blocking wait
 * could last for good: a holder that does not run); then the words are
 * only read. A live holder would hold the byte: with it, `holder` set says
 * the last one died holding it. */
int wl__os_file_mutex_peek(wl_manager_t *m, unsigned wait_ms,
                           void (*look)(void *arg), void *arg) {
  ULONGLONG deadline = GetTickCount64() + wait_ms;
  DWORD moment = 1;
  int rc = 0;

  while (!wl__win_lock(m->fd, LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY,
                       WL__MUTEX_AT)) {
    if (GetLastError() != ERROR_LOCK_VIOLATION)
      return WL_ECORRUPT;
    if (GetTickCount64() >= deadline)
      return -ETIMEDOUT;
    Sleep(moment);
    if (moment < 10)
      moment *= 2;
  }
  if (__atomic_load_n(&m->file_mutex->broken, __ATOMIC_SEQ_CST) != 0)
    rc = WL_ECORRUPT;
  else if (__atomic_load_n(&m->file_mutex->holder, __ATOMIC_SEQ_CST) != 0)
    rc = WL__EOWNERDEAD;
  else
    look(arg);
  wl__win_lock(m->fd, (DWORD)-1, WL__MUTEX_AT);
  return rc;
}
