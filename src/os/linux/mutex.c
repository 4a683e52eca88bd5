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

int wl__os_file_mutex_lock(wl_manager_t *m) {
  int rc = pthread_mutex_lock(&m->file_mutex->mu);

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
