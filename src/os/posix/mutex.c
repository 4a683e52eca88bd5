/* The POSIX family's mutex in the file (os/machine.h; the design and its
 * assumptions: os/posix/posix.h). Taking it: this process's pthread mutex
 * of the file, then a write lock on its byte (F_SETLKW), then its words
 * (os/holder.h: what a process killed at each step leaves, and its fault
 * points, at which test/c/test-posix.c kills a process). Giving it back:
 * the words, the byte, the pthread mutex.
 *
 * Threads of one process wait for each other on the pthread mutex: only
 * one at a time waits for the byte, and the byte is never asked for by a
 * process that already has it. */
#define _GNU_SOURCE
#define _DARWIN_C_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <time.h>

#include "posix.h"

#include "../holder.h"

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
 * the byte back without waiting (test/c/test-posix.c). The moment doubles,
 * from 100 µs up to 10 ms, so that a holder that does not run (a stopped
 * process) is not asked of the system 10,000 times a second. */
static int wl__mutex_byte_take(wl__os_local_t *l) {
  struct timespec moment = {0, 100000};

  for (;;) {
    if (wl__posix_lock(l->fd, F_SETLKW, F_WRLCK, WL__MUTEX_AT) == 0)
      return 0;
    if (errno == EDEADLK) {
      nanosleep(&moment, NULL);
      if (moment.tv_nsec < 10000000)
        moment.tv_nsec *= 2;
    } else if (errno != EINTR) {
      return -1;
    }
  }
}

/* A byte that cannot be taken for another reason than a signal or a false
 * cycle (no lock records left, ENOLCK) leaves the mutex unusable to this
 * process. */
int wl__os_file_mutex_lock(wl_manager_t *m) {
  wl__os_local_t *l = m->local;
  int rc;

  pthread_mutex_lock(&l->mu);
  if (wl__mutex_byte_take(l) != 0) {
    pthread_mutex_unlock(&l->mu);
    return WL_ECORRUPT;
  }
  WL__FAULT("mutex-locked");
  rc = wl__holder_enter(m->file_mutex, (uint32_t)l->pid, &l->dead);
  if (rc == WL_ECORRUPT) {
    wl__posix_lock(l->fd, F_SETLK, F_UNLCK, WL__MUTEX_AT);
    pthread_mutex_unlock(&l->mu);
  }
  return rc;
}

void wl__os_file_mutex_unlock(wl_manager_t *m) {
  wl__os_local_t *l = m->local;

  wl__holder_leave(m->file_mutex, &l->dead);
  wl__posix_lock(l->fd, F_SETLK, F_UNLCK, WL__MUTEX_AT);
  pthread_mutex_unlock(&l->mu);
}

void wl__os_file_mutex_consistent(wl_manager_t *m) { m->local->dead = 0; }

/* Waits a moment, doubling it up to 10 ms: 0, or -ETIMEDOUT once the
 * deadline (wl__os_now's) has passed. */
static int wl__nap(struct timespec *moment, uint64_t deadline) {
  if (wl__os_now() >= deadline)
    return -ETIMEDOUT;
  nanosleep(moment, NULL);
  if (moment->tv_nsec < 10000000)
    moment->tv_nsec *= 2;
  return 0;
}

/* Both locks, each asked for again until the deadline (a blocking wait
 * could last for good: a stopped holder); then the words are only read.
 * A live holder would hold the byte: with it, `holder` set says the last
 * one died holding it. */
int wl__os_file_mutex_peek(wl_manager_t *m, unsigned wait_ms,
                           void (*look)(void *arg), void *arg) {
  wl__os_local_t *l = m->local;
  uint64_t deadline = wl__os_now() + (uint64_t)wait_ms * 1000000;
  struct timespec moment = {0, 100000};
  int rc = 0;

  while (pthread_mutex_trylock(&l->mu) != 0) {
    if ((rc = wl__nap(&moment, deadline)) != 0)
      return rc;
  }
  while (rc == 0 &&
         wl__posix_lock(l->fd, F_SETLK, F_WRLCK, WL__MUTEX_AT) != 0) {
    if (errno != EAGAIN && errno != EACCES && errno != EINTR)
      rc = WL_ECORRUPT;
    else
      rc = wl__nap(&moment, deadline);
  }
  if (rc == 0) {
    if (__atomic_load_n(&m->file_mutex->broken, __ATOMIC_SEQ_CST) != 0)
      rc = WL_ECORRUPT;
    else if (__atomic_load_n(&m->file_mutex->holder, __ATOMIC_SEQ_CST) != 0)
      rc = WL__EOWNERDEAD;
    else
      look(arg);
    wl__posix_lock(l->fd, F_SETLK, F_UNLCK, WL__MUTEX_AT);
  }
  pthread_mutex_unlock(&l->mu);
  return rc;
}
