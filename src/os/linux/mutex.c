/* The Linux family's mutex in the file (os/machine.h): a pthread mutex,
 * process-shared and robust. The kernel marks it when its holder dies (the
 * holder's robust futex list), and the next pthread_mutex_lock, glibc's or
 * musl's, says EOWNERDEAD; one given back without pthread_mutex_consistent
 * is ENOTRECOVERABLE for good. This family keeps no state of the file per
 * process: its locks (OFD locks: os/linux/life.c) belong to their open file
 * description, so that closing one descriptor of the file drops no lock
 * taken through another. */
#define _GNU_SOURCE

#include <errno.h>
#include <linux/futex.h>
#include <time.h>
#include <unistd.h>

#include "../unix/machine.h"

int wl__os_file_mutex_init(wl__os_file_mutex_t *mu) {
  pthread_mutexattr_t attr;
  int rc;

  if ((rc = pthread_mutexattr_init(&attr)) != 0)
    return -rc;
  if ((rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED)) == 0 &&
      (rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST)) == 0)
    rc = pthread_mutex_init(&mu->mu, &attr);
  pthread_mutexattr_destroy(&attr);
  return -rc;
}

/* The mutex's kind word (glibc's __kind, musl's _m_type: its first int),
 * which tells pthread how to take it and which neither library changes
 * after init. Another kind in the file (priority inheritance, whose lock
 * asks the kernel about a thread id that the file names: glibc aborts on
 * ESRCH, musl waits for good) is corruption, checked before every lock.
 * A writer who changes it between the check and the lock still wins. */
#ifdef __GLIBC__
#define WL__KIND(mu) __atomic_load_n(&(mu)->__data.__kind, __ATOMIC_RELAXED)
#else
#define WL__KIND(mu) __atomic_load_n(&(mu)->__u.__i[0], __ATOMIC_RELAXED)
#endif
static int wl__kind = -1; /* what wl__os_file_mutex_init writes */

__attribute__((constructor)) static void wl__kind_init(void) {
  wl__os_file_mutex_t mu;

  if (wl__os_file_mutex_init(&mu) == 0) {
    wl__kind = WL__KIND(&mu.mu);
    pthread_mutex_destroy(&mu.mu);
  }
}

static int wl__kind_ok(pthread_mutex_t *mu) {
  return WL__KIND(mu) == wl__kind;
}

int wl__os_file_mutex_lock(wl_manager_t *m) {
  int rc;

  if (WL__UNLIKELY(!wl__kind_ok(&m->file_mutex->mu)))
    return WL_ECORRUPT;
  rc = pthread_mutex_lock(&m->file_mutex->mu);

  if (__builtin_expect(rc == 0, 1))
    return 0;
  return rc == EOWNERDEAD ? WL__EOWNERDEAD : WL_ECORRUPT;
}

void wl__os_file_mutex_unlock(wl_manager_t *m) {
  pthread_mutex_unlock(&m->file_mutex->mu);
}

void wl__os_file_mutex_consistent(wl_manager_t *m) {
  pthread_mutex_consistent(&m->file_mutex->mu);
}

/* The mutex's futex word, which the kernel marks FUTEX_OWNER_DIED when its
 * holder dies: glibc's __lock, musl's _m_lock (its second int). */
static unsigned wl__futex_word(pthread_mutex_t *mu) {
#ifdef __GLIBC__
  return (unsigned)__atomic_load_n(&mu->__data.__lock, __ATOMIC_ACQUIRE);
#else
  return (unsigned)__atomic_load_n(&mu->__u.__vi[1], __ATOMIC_ACQUIRE);
#endif
}

typedef struct {
  wl_manager_t *m;
  unsigned wait_ms;
  void (*look)(void *arg);
  void *arg;
  int rc;
} wl__peek_t;

/* A thread that ends holding the mutex (found after its holder died)
 * leaves it as it found it: the kernel (or musl, in pthread_exit) marks
 * it FUTEX_OWNER_DIED again, and the next taker repairs. */
static void *wl__peek_thread(void *arg) {
  wl__peek_t *p = arg;
  pthread_mutex_t *mu = &p->m->file_mutex->mu;
  struct timespec until;
  int rc;

  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += p->wait_ms / 1000;
  until.tv_nsec += (long)(p->wait_ms % 1000) * 1000000;
  if (until.tv_nsec >= 1000000000) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000;
  }
  rc = pthread_mutex_timedlock(mu, &until);
  if (rc == 0) {
    p->look(p->arg);
    pthread_mutex_unlock(mu);
  }
  p->rc = rc == 0            ? 0
          : rc == EOWNERDEAD ? WL__EOWNERDEAD
          : rc == ETIMEDOUT  ? -ETIMEDOUT
                             : WL_ECORRUPT;
  return NULL;
}

/* A mutex marked dead is left alone: taking it would write its words. */
int wl__os_file_mutex_peek(wl_manager_t *m, unsigned wait_ms,
                           void (*look)(void *arg), void *arg) {
  wl__peek_t p = {m, wait_ms, look, arg, 0};
  pthread_t thread;
  int rc;

  if (!wl__kind_ok(&m->file_mutex->mu))
    return WL_ECORRUPT;
  if (wl__futex_word(&m->file_mutex->mu) & FUTEX_OWNER_DIED)
    return WL__EOWNERDEAD;
  if ((rc = wl__thread_start(&thread, wl__peek_thread, &p)) != 0)
    return rc;
  pthread_join(thread, NULL);
  return p.rc;
}

int wl__os_file_join(wl_manager_t *m, const struct stat *st) {
  (void)m;
  (void)st;
  return 0;
}

void wl__os_file_leave(wl_manager_t *m) {
  if (m->fd >= 0)
    close(m->fd);
  m->fd = -1;
}

void wl__os_fd_close_foreign(int fd) { close(fd); }
