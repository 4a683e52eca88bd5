/* The Windows family's mutex in the file (os/machine.h; the design:
 * os/win/machine.h, point 2): a named mutex, then the holder word, as the
 * POSIX family's (os/posix/mutex.c) after its byte lock. Taking it: the
 * named mutex, then the words. Giving it back: the words, the mutex.
 *
 * A process killed at any instruction:
 *   - before `holder` is set ("mutex-locked"): the next taker gets
 *     WAIT_ABANDONED (or, if the mutex went away with the dead process's
 *     handle, a new mutex) and finds the word 0; nothing was changed, but
 *     an abandoned mutex is repaired all the same;
 *   - once it is set ("mutex-held"), until it is cleared: the next taker
 *     finds it set, or is told WAIT_ABANDONED, and repairs;
 *   - once it is cleared ("mutex-freed"): nothing to repair;
 *   - a taker that found its holder dead gives it back without marking it
 *     consistent: `broken` is set ("mutex-broken") before `holder` is
 *     cleared, so every later taker finds it unusable (WL_ECORRUPT).
 * A Windows mutex is its holder thread's, and taken again by that thread
 * without waiting: the core never takes it twice in one thread. */
#include "machine.h"

#define SEQ __ATOMIC_SEQ_CST

/* Its name: a number no one can predict, drawn with the file. */
int wl__os_file_mutex_init(wl__os_file_mutex_t *mu) {
  mu->holder = 0;
  mu->broken = 0;
  return wl__os_draw(&mu->name);
}

/* A wait that fails (a handle the system no longer knows) leaves the mutex
 * unusable to this process. */
int wl__os_file_mutex_lock(wl_manager_t *m) {
  wl__os_local_t *l = m->local;
  wl__os_file_mutex_t *mu = m->file_mutex;
  DWORD w = WaitForSingleObject(l->mutex, INFINITE);
  uint32_t was;

  if (w != WAIT_OBJECT_0 && w != WAIT_ABANDONED)
    return WL_ECORRUPT;
  WL__FAULT("mutex-locked");
  if (__atomic_load_n(&mu->broken, SEQ) != 0) {
    ReleaseMutex(l->mutex);
    return WL_ECORRUPT;
  }
  was = __atomic_exchange_n(&mu->holder, (uint32_t)l->pid, SEQ);
  WL__FAULT("mutex-held");
  if (__builtin_expect(was == 0 && w == WAIT_OBJECT_0, 1))
    return 0;
  l->dead = 1;
  return WL__EOWNERDEAD;
}

void wl__os_file_mutex_unlock(wl_manager_t *m) {
  wl__os_local_t *l = m->local;
  wl__os_file_mutex_t *mu = m->file_mutex;

  if (l->dead) {
    __atomic_store_n(&mu->broken, 1, SEQ);
    WL__FAULT("mutex-broken");
    l->dead = 0;
  }
  __atomic_store_n(&mu->holder, 0, SEQ);
  WL__FAULT("mutex-freed");
  ReleaseMutex(l->mutex);
}

void wl__os_file_mutex_consistent(wl_manager_t *m) { m->local->dead = 0; }
