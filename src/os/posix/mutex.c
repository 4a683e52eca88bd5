/* The POSIX family's mutex in the file (os/machine.h; the design and its
 * assumptions: os/posix/posix.h). Taking it: this process's pthread mutex
 * of the file, then a write lock on its byte (F_SETLKW), then its words.
 * Giving it back: the words, the byte, the pthread mutex.
 *
 * A process killed at any instruction (each step has a fault point, which
 * test/c/test-posix.c kills a process at):
 *   - before `holder` is set ("mutex-locked"): the next taker finds it 0;
 *     the dead process had changed nothing yet;
 *   - once it is set ("mutex-held"), until it is cleared: the next taker
 *     finds it set and repairs (WL__EOWNERDEAD), a repair that dies too
 *     included;
 *   - once it is cleared ("mutex-freed"): nothing to repair;
 *   - a taker that found its holder dead gives it back without marking it
 *     consistent: `broken` is set ("mutex-broken") before `holder` is
 *     cleared, so every later taker finds it unusable (WL_ECORRUPT).
 * Threads of one process wait for each other on the pthread mutex: only
 * one at a time waits for the byte, and the byte is never asked for by a
 * process that already has it. */
#define _GNU_SOURCE
#define _DARWIN_C_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <time.h>

#include "posix.h"

#define SEQ __ATOMIC_SEQ_CST

int wl__os_file_mutex_init(wl__os_file_mutex_t *mu) {
  mu->holder = 0;
  mu->broken = 0;
  return 0;
}

/* Waits for the byte. EDEADLK is never a cycle here: the system's check
 * follows processes, not threads, across every file, so another process's
 * thread waiting for a byte this process holds (of another scope) while
 * that process holds this one looks like one; but no holder of this byte
 * waits for any lock. So it asks again, after a moment: that holder gives
 * the byte back without waiting (test/c/test-posix.c). */
static int wl__mutex_byte_take(wl__os_local_t *l) {
  static const struct timespec moment = {0, 100000};

  for (;;) {
    if (wl__posix_lock(l->fd, F_SETLKW, F_WRLCK, WL__MUTEX_AT) == 0)
      return 0;
    if (errno == EDEADLK)
      nanosleep(&moment, NULL);
    else if (errno != EINTR)
      return -1;
  }
}

/* A byte that cannot be taken for another reason than a signal or a false
 * cycle (no lock records left, ENOLCK) leaves the mutex unusable to this
 * process. */
int wl__os_file_mutex_lock(wl_manager_t *m) {
  wl__os_local_t *l = m->local;
  wl__os_file_mutex_t *mu = m->file_mutex;
  uint32_t was;

  pthread_mutex_lock(&l->mu);
  if (wl__mutex_byte_take(l) != 0) {
    pthread_mutex_unlock(&l->mu);
    return WL_ECORRUPT;
  }
  WL__FAULT("mutex-locked");
  if (__atomic_load_n(&mu->broken, SEQ) != 0) {
    wl__posix_lock(l->fd, F_SETLK, F_UNLCK, WL__MUTEX_AT);
    pthread_mutex_unlock(&l->mu);
    return WL_ECORRUPT;
  }
  was = __atomic_exchange_n(&mu->holder, (uint32_t)l->pid, SEQ);
  WL__FAULT("mutex-held");
  if (__builtin_expect(was == 0, 1))
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
  wl__posix_lock(l->fd, F_SETLK, F_UNLCK, WL__MUTEX_AT);
  pthread_mutex_unlock(&l->mu);
}

void wl__os_file_mutex_consistent(wl_manager_t *m) { m->local->dead = 0; }
