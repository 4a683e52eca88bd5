/* Prompt notice of a process's death in the POSIX family (os/machine.h,
 * os/posix/posix.h). As on Linux, owners watch each other in a ring
 * (core/owners.c), each process's watcher thread the owner after its own,
 * and a death it notices has its process's sweeper sweep (os/unix/sweep.c).
 *
 * The process watched is the one that the system says holds the target's
 * proof of life (F_GETLK: the kernel's word, not a pid read from the file).
 * Its exit is awaited through a descriptor that poll() reports readable
 * once it has exited: pidfd_open (Linux 5.3) or a kqueue with EVFILT_PROC
 * NOTE_EXIT (macOS). Both report the exit after the process's files are
 * closed, so after its locks are released. A pid names another process once
 * its own has exited and been reaped: the holder is asked again after the
 * descriptor is open, and the same pid still holding the byte is the same
 * process, whose descriptor it is.
 *
 * A watcher learns of a new target through its bell: a FIFO of its own
 * (os/unix/wake.c), named by the owner record's `wake`, to which whoever
 * changes `watch` writes a byte after the change. The watcher empties it,
 * then reads `watch`, and no wait empties it: a change it has not read
 * leaves a byte in it, which ends every wait at once.
 *
 * Where the holder cannot be named (Linux: a process of another pid
 * namespace, which F_GETLK names 0) or watched (Linux before 5.3 has no
 * pidfd_open), the watcher waits for its bell only: that death is found by
 * the next sweep (an open of the scope, a repair, wl_sweep). And where the
 * system says no process has that pid any more while the byte is still
 * held (macOS stops finding an exiting process shortly before it closes its
 * files), the watcher looks at the byte again every millisecond, and at its
 * bell, until it is let go.
 *
 * The watcher takes no lock: it reads its record with atomics, tests bytes
 * with F_GETLK, and asks the sweeper, so that it can be stopped, and waited
 * for, under the mutex. */
#define _GNU_SOURCE
#define _DARWIN_C_SOURCE

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>
#ifdef __APPLE__
#include <sys/event.h>
#include <fcntl.h>
#else
#include <sys/syscall.h>
/* pidfd_open has number 434 on every architecture; older libc headers do
 * not name it. */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#endif

#include "posix.h"

#define SEQ __ATOMIC_SEQ_CST

typedef struct wl__watch_s wl__watch_t;

struct wl__watch_s {
  wl_manager_t *m;
  wl__owner_t *self; /* this process's owner record */
  wl__sweeper_t sweeper;
  pthread_t watcher;
  int bell;      /* its FIFO, open to read and write (never at its end) */
  uint64_t wake; /* its FIFO's number */
  uint32_t stop;
};

/* A descriptor that becomes readable once process pid has exited, or
 * -errno. */
static int wl__exit_watch(pid_t pid) {
#ifdef __APPLE__
  struct kevent ev;
  int kq = kqueue();

  if (kq < 0)
    return -errno;
  EV_SET(&ev, pid, EVFILT_PROC, EV_ADD, NOTE_EXIT, 0, NULL);
  if (fcntl(kq, F_SETFD, FD_CLOEXEC) != 0 ||
      kevent(kq, &ev, 1, NULL, 0, NULL) != 0) {
    int e = errno;
    close(kq);
    return -e;
  }
  return kq;
#else
  long fd = syscall(SYS_pidfd_open, pid, 0);
  return fd < 0 ? -errno : (int)fd;
#endif
}

/* Whether t is an offset at which an owner record can be, in the whole
 * region (not this process's limit, which it may not have raised yet to
 * cover a new owner, whose process reserved its page). Read without the
 * mutex: a bad one is the mutex holder's to report. */
static int wl__target_ok(const wl__watch_t *w, wl_off_t t) {
  return t % 8 == 0 && t >= sizeof(wl__block_t) &&
         t <= w->m->capacity - sizeof(wl__owner_t);
}

#define WL__BELL 1
#define WL__EXIT 2

/* Waits for the bell, for fd to be readable (unless it is -1) or for ms
 * milliseconds (unless -1): WL__BELL if the bell has a byte, WL__EXIT if fd
 * is readable. The bell is emptied only before its owner record is read
 * (wl__watcher_main): a byte that came after that ends every wait. */
static int wl__wait(wl__watch_t *w, int fd, int ms) {
  struct pollfd p[2] = {{w->bell, POLLIN, 0}, {fd, POLLIN, 0}};
  int rc = 0;

  while (poll(p, fd >= 0 ? 2 : 1, ms) < 0 && errno == EINTR)
    ;
  if (p[0].revents != 0)
    rc |= WL__BELL;
  if (fd >= 0 && p[1].revents != 0)
    rc |= WL__EXIT;
  return rc;
}

/* Until the target changes (its bell rings) or its process has died and let
 * go of its byte: whether it died. */
static int wl__watch_one(wl__watch_t *w, wl_off_t t) {
  pid_t pid = wl__posix_holder(w->m, t);
  int fd, died;

  if (pid < 0)
    return 1;
  WL__FAULT("watch-pid");
  fd = pid > 0 ? wl__exit_watch(pid) : -EINVAL;
  if (fd < 0 && fd != -ESRCH) {
    /* It cannot be named, or watched, here. */
    wl__wait(w, -1, -1);
    return 0;
  }
  if (fd >= 0 && wl__posix_holder(w->m, t) != pid) {
    /* Another process holds it now: look again. */
    close(fd);
    return 0;
  }
  died = fd < 0 || (wl__wait(w, fd, -1) & WL__EXIT) != 0;
  if (fd >= 0)
    close(fd);
  /* Gone (ESRCH), or said to have exited, and still holding its byte. */
  while (died && wl__posix_holder(w->m, t) == pid) {
    if (wl__wait(w, -1, 1) & WL__BELL)
      return 0;
  }
  return died;
}

static void *wl__watcher_main(void *arg) {
  wl__watch_t *w = arg;

  wl__thread_name("wl-watch");
  for (;;) {
    char buf[64];
    wl_off_t t;

    while (read(w->bell, buf, sizeof(buf)) > 0)
      ;
    if (__atomic_load_n(&w->stop, SEQ))
      return NULL;
    t = __atomic_load_n(&w->self->watch, SEQ);
    if (t == 0 || !wl__target_ok(w, t)) {
      wl__wait(w, -1, -1);
    } else if (wl__watch_one(w, t)) {
      /* The sweep mends the ring, which rings the bell. */
      wl__sweeper_ask(&w->sweeper);
      wl__wait(w, -1, -1);
    }
  }
}

/* Its FIFO's number is in its record before the FIFO exists, so that a
 * sweep after this process dies at any point here removes it. */
int wl__os_watch_start(wl_manager_t *m, wl__owner_t *self,
                       int (*sweep)(wl_manager_t *m)) {
  wl__watch_t *w = calloc(1, sizeof(*w));
  int rc;

  if (w == NULL)
    return WL_ENOMEM;
  w->m = m;
  w->self = self;
  if ((rc = wl__os_wake_open(m, &self->wake, &w->wake, &w->bell)) != 0) {
    free(w);
    return rc;
  }
  if ((rc = wl__sweeper_start(&w->sweeper, m, sweep)) == 0) {
    if ((rc = wl__thread_start(&w->watcher, wl__watcher_main, w)) == 0) {
      m->watcher = w;
      return 0;
    }
    wl__sweeper_free(&w->sweeper);
  }
  __atomic_store_n(&self->wake, 0, SEQ);
  wl__os_wake_close(m, w->wake, w->bell);
  free(w);
  return rc;
}

void wl__os_watch_stop_sweeper(wl_manager_t *m) {
  if (m->watcher != NULL)
    wl__sweeper_stop(&m->watcher->sweeper);
}

/* The watcher is stopped by its own bell. */
void wl__os_watch_stop(wl_manager_t *m) {
  wl__watch_t *w = m->watcher;

  if (w == NULL)
    return;
  wl__sweeper_stop(&w->sweeper);
  __atomic_store_n(&w->stop, 1, SEQ);
  while (write(w->bell, "s", 1) < 0 && errno == EINTR)
    ;
  pthread_join(w->watcher, NULL);
  wl__sweeper_free(&w->sweeper);
  if (__atomic_load_n(&w->self->wake, SEQ) == w->wake)
    __atomic_store_n(&w->self->wake, 0, SEQ);
  wl__os_wake_close(m, w->wake, w->bell);
  free(w);
  m->watcher = NULL;
}

/* Rings the bell after the change (see above). */
void wl__os_watch_target(wl_manager_t *m, wl__owner_t *o, wl_off_t target) {
  __atomic_store_n(&o->watch, target, SEQ);
  wl__os_wake(m, wl__off_of(m, o), __atomic_load_n(&o->wake, SEQ));
}

/* Its FIFO, by the number in its record (which names only a FIFO beside
 * the file: os/unix/wake.c). */
void wl__os_watch_end(wl_manager_t *m, wl__owner_t *o) {
  uint64_t wake = __atomic_exchange_n(&o->wake, 0, SEQ);

  WL__HIDE(wake);
  wl__os_wake_close(m, wake, -1);
}
