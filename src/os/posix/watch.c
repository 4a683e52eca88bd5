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
 * A process that calls exec lets go of its locks too (the scope's
 * descriptors are close-on-exec) but lives on, as another program: macOS
 * says so on the same kqueue (NOTE_EXEC; after it, as after an exit, the
 * byte is asked again until it is let go). A pidfd has no such event: on
 * Linux the watcher also watches the file for closes (inotify IN_CLOSE_*,
 * reported once the last descriptor of an open of the file is closed, after
 * the close has let go of its process's locks) and asks for the byte again
 * after each. So on Linux an exec goes unnoticed (until a sweep) while a
 * child forked before it and not yet gone through exec or exit shares the
 * target's open of the file, and the watcher wakes, for one F_GETLK, at
 * every close of the file by any process.
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
#include <stdio.h>
#include <sys/inotify.h>
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
  int closes;    /* readable after a close of the file (Linux), or -1 */
  uint32_t stop;
};

/* A descriptor that becomes readable once process pid has exited (macOS:
 * or called exec), or -errno. */
static int wl__exit_watch(pid_t pid) {
#ifdef __APPLE__
  struct kevent ev;
  int kq = kqueue();

  if (kq < 0)
    return -errno;
  EV_SET(&ev, pid, EVFILT_PROC, EV_ADD, NOTE_EXIT | NOTE_EXEC, 0, NULL);
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

/* Linux: an inotify descriptor that a close of m's file makes readable
 * (see above), or -1 where there is none (no instance or watch left under
 * the user's limits, no /proc): then an exec is found by a sweep only.
 * macOS: -1 (NOTE_EXEC says it). */
static int wl__closes_open(wl_manager_t *m) {
#ifdef __APPLE__
  (void)m;
  return -1;
#else
  char proc[64];
  int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);

  if (fd < 0)
    return -1;
  /* The file this process has open, whatever is at its path now; a
   * lookup, not an open (nothing to close: posix.h point 3). */
  snprintf(proc, sizeof(proc), "/proc/self/fd/%d", m->fd);
  if (inotify_add_watch(fd, proc, IN_CLOSE_WRITE | IN_CLOSE_NOWRITE) < 0) {
    close(fd);
    return -1;
  }
  return fd;
#endif
}

#define WL__BELL 1
#define WL__EXIT 2
#define WL__CLOSE 4

/* Waits for the bell, for fd to be readable (unless it is -1), for a close
 * of the file (if closes) or for ms milliseconds (unless -1): WL__BELL if
 * the bell has a byte, WL__EXIT if fd is readable, WL__CLOSE if the file
 * was closed (those events are read: one that comes after ends the next
 * wait). The bell is emptied only before its owner record is read
 * (wl__watcher_main): a byte that came after that ends every wait. poll()
 * leaves out a descriptor of -1. */
static int wl__wait(wl__watch_t *w, int fd, int closes, int ms) {
  struct pollfd p[3] = {{w->bell, POLLIN, 0},
                        {fd, POLLIN, 0},
                        {closes ? w->closes : -1, POLLIN, 0}};
  char buf[4096];
  int rc = 0;

  while (poll(p, 3, ms) < 0 && errno == EINTR)
    ;
  if (p[0].revents != 0)
    rc |= WL__BELL;
  if (p[1].revents != 0)
    rc |= WL__EXIT;
  if (p[2].revents != 0) {
    rc |= WL__CLOSE;
    while (read(w->closes, buf, sizeof(buf)) > 0)
      ;
  }
  return rc;
}

/* Until the target changes (its bell rings) or its process has died and let
 * go of its byte: whether it died. */
static int wl__watch_one(wl__watch_t *w, wl_off_t t) {
  pid_t pid = wl__posix_holder(w->m, t);
  int fd, died, ev;

  if (pid < 0)
    return 1;
  WL__FAULT("watch-pid");
  fd = pid > 0 ? wl__exit_watch(pid) : -EINVAL;
  if (fd < 0 && fd != -ESRCH) {
    /* It cannot be named, or watched, here. */
    wl__wait(w, -1, 0, -1);
    return 0;
  }
  if (fd >= 0 && wl__posix_holder(w->m, t) != pid) {
    /* Another process holds it now: look again. */
    close(fd);
    return 0;
  }
  died = fd < 0;
  if (fd >= 0) {
    /* A close of the file that leaves the byte held says nothing. */
    do
      ev = wl__wait(w, fd, 1, -1);
    while (ev == WL__CLOSE && wl__posix_holder(w->m, t) == pid);
    died = (ev & (WL__EXIT | WL__CLOSE)) != 0;
    close(fd);
  }
  /* Gone (ESRCH), or said to have exited (or called exec), and still
   * holding its byte. */
  while (died && wl__posix_holder(w->m, t) == pid) {
    if (wl__wait(w, -1, 0, 1) & WL__BELL)
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
      wl__wait(w, -1, 0, -1);
    } else if (wl__watch_one(w, t)) {
      /* The sweep mends the ring, which rings the bell. */
      wl__sweeper_ask(&w->sweeper);
      wl__wait(w, -1, 0, -1);
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
  w->closes = wl__closes_open(m);
  if ((rc = wl__sweeper_start(&w->sweeper, m, sweep)) == 0) {
    if ((rc = wl__thread_start(&w->watcher, wl__watcher_main, w)) == 0) {
      m->watcher = w;
      return 0;
    }
    wl__sweeper_free(&w->sweeper);
  }
  if (w->closes >= 0)
    close(w->closes);
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
  if (w->closes >= 0)
    close(w->closes);
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
