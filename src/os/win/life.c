/* Proof of life in the Windows family (os/machine.h; the design:
 * os/win/machine.h, point 3): an exclusive lock of the owner's handle of
 * the file on one byte, at WL__LIFE_AT + the owner record's offset, which
 * the system gives up when the handle closes, so when its process ends,
 * however it ends. Others test it through a second handle (the probe), for
 * which the byte is held even when this process's own handle holds it.
 * The pid and creation time in the record only name a process to the
 * death watch (os/win/watch.c). */
#include "machine.h"

#define SEQ __ATOMIC_SEQ_CST

wl__owner_t *wl__win_owner(const wl_manager_t *m, wl_off_t off) {
  if (off % 8 != 0 || off < sizeof(wl__block_t) || off > m->capacity ||
      m->capacity - off < sizeof(wl__owner_t))
    return NULL;
  return (wl__owner_t *)(m->base + off);
}

int wl__win_created(HANDLE h, uint64_t *created) {
  FILETIME c, e, k, u;

  if (!GetProcessTimes(h, &c, &e, &k, &u))
    return -1;
  *created = ((uint64_t)c.dwHighDateTime << 32) | c.dwLowDateTime;
  return 0;
}

/* A shared lock, so that two threads' probes (a sweep's and a watcher's)
 * never exclude each other; an owner's exclusive one excludes it. 1 if
 * another handle holds the byte, 0 if it is free, -1 if the probe failed
 * (the handle asked through in *used). */
static int wl__ask(wl__os_local_t *l, uint64_t at, HANDLE *used) {
  int rc = 0;

  AcquireSRWLockShared(&l->probe_mu);
  *used = l->probe;
  if (wl__win_lock(l->probe, LOCKFILE_FAIL_IMMEDIATELY, at))
    wl__win_lock(l->probe, (DWORD)-1, at);
  else
    rc = GetLastError() == ERROR_LOCK_VIOLATION ? 1 : -1;
  ReleaseSRWLockShared(&l->probe_mu);
  return rc;
}

/* A failed probe is no proof of life: asked once more through a new
 * handle (os/win/machine.h, point 3). */
int wl__win_held(wl_manager_t *m, wl_off_t off) {
  uint64_t at = WL__LIFE_AT + off;
  HANDLE used;
  int rc;

  if (wl__win_owner(m, off) == NULL)
    return 1;
  rc = wl__ask(m->local, at, &used);
  if (rc < 0 && wl__win_probe_reopen(m, used) == 0)
    rc = wl__ask(m->local, at, &used);
  return rc != 0;
}

/* Under the mutex. The identity is written once the byte is held, pid
 * last, so that a watcher that reads the pid reads its creation time. */
int wl__os_life_take(wl_manager_t *m, wl_off_t owner) {
  wl__owner_t *o = wl__win_owner(m, owner);
  uint64_t created;
  DWORD e;

  if (o == NULL)
    return WL_ECORRUPT;
  if (wl__win_created(GetCurrentProcess(), &created) != 0)
    return wl__win_errno(GetLastError());
  if (!wl__win_lock(m->fd, LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY,
                    WL__LIFE_AT + owner)) {
    e = GetLastError();
    return e == ERROR_LOCK_VIOLATION ? -EBUSY : wl__win_errno(e);
  }
  __atomic_store_n(&o->pid, 0, SEQ);
  __atomic_store_n(&o->created, created, SEQ);
  __atomic_store_n(&o->pid, (uint32_t)m->local->pid, SEQ);
  return 0;
}

void wl__os_life_give(wl_manager_t *m, wl_off_t owner) {
  wl__owner_t *o = wl__win_owner(m, owner);

  if (o == NULL)
    return;
  __atomic_store_n(&o->pid, 0, SEQ);
  __atomic_store_n(&o->created, 0, SEQ);
  wl__win_lock(m->fd, (DWORD)-1, WL__LIFE_AT + owner);
}

/* When in doubt (a record out of bounds, a probe that fails twice), it is
 * held. */
int wl__os_life_held(wl_manager_t *m, wl_off_t owner) {
  return wl__win_held(m, owner);
}

/* The system marks no word at a death: only the byte says. */
int wl__os_life_ended(const wl__owner_t *o) {
  (void)o;
  return 0;
}
