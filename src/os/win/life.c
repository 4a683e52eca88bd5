/* Proof of life in the Windows family (os/machine.h; the design:
 * os/win/machine.h, point 3): the owner's process identity, pid and
 * creation time, in its record. The system never marks a word when a
 * process dies: the identity is tested against the process table. */
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

/* 1 while the process of that identity runs, or cannot be asked about
 * (another user's: access denied; a call that fails); 0 once it has ended,
 * or never was. */
static int wl__alive(DWORD pid, uint64_t created) {
  HANDLE h;
  uint64_t c;
  int alive;

  if (pid == 0)
    return 0;
  h = OpenProcess(SYNCHRONIZE | PROCESS_QUERY_LIMITED_INFORMATION, FALSE, pid);
  if (h == NULL)
    return GetLastError() != ERROR_INVALID_PARAMETER;
  if (wl__win_created(h, &c) != 0)
    alive = 1;
  else
    alive = c == created && WaitForSingleObject(h, 0) != WAIT_OBJECT_0;
  CloseHandle(h);
  return alive;
}

/* Under the mutex: a record no live process holds gets this process's
 * identity, pid last, so that a reader without the mutex (a watcher) that
 * sees the pid sees its creation time. */
int wl__os_life_take(wl_manager_t *m, wl_off_t owner) {
  wl__owner_t *o = wl__win_owner(m, owner);
  uint64_t created;

  if (o == NULL)
    return WL_ECORRUPT;
  if (wl__os_life_held(m, owner))
    return -EBUSY;
  if (wl__win_created(GetCurrentProcess(), &created) != 0)
    return wl__win_errno(GetLastError());
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
}

/* When in doubt (a record out of bounds), it is held. */
int wl__os_life_held(wl_manager_t *m, wl_off_t owner) {
  const wl__owner_t *o = wl__win_owner(m, owner);
  uint32_t pid;
  uint64_t created;

  if (o == NULL)
    return 1;
  pid = __atomic_load_n(&o->pid, SEQ);
  created = __atomic_load_n(&o->created, SEQ);
  WL__HIDE(pid);
  WL__HIDE(created);
  return wl__alive(pid, created);
}

/* The system marks no word at a death: only the process table says. */
int wl__os_life_ended(const wl__owner_t *o) {
  (void)o;
  return 0;
}
