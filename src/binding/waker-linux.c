/* The waker: a thread of the process's own that wakes the machine-wide
 * managers' agents whose thread's event loop cannot poll a descriptor. Bun
 * gives addons uv_async_t but aborts the process on uv_poll_init (and on
 * uv_thread_create: pthreads here). Under Node each agent's loop polls its
 * own FIFO (machine-unix.c) and this thread never starts.
 *
 * The thread waits on an epoll set of the agents' FIFOs. When one is
 * readable, it reads it (wl_agent_woken) and sends the agent's uv_async_t,
 * whose callback, on the agent's thread, drains its mailboxes as the
 * uv_poll_t's does under Node: one thread switch more per wake-up. It runs
 * while an agent is added: started by the first, stopped and joined when
 * the last is removed.
 *
 * The thread reads FIFOs and sends handles under the mutex. Removing an
 * agent takes its FIFO out of the set (EPOLL_CTL_DEL) and the agent out of
 * the table under the mutex too: once that returns, the thread touches
 * neither again, and the caller may close both. An event that epoll_wait
 * returned before the removal names the agent by a number never reused,
 * and finds it gone. */
#define _GNU_SOURCE /* pthread_setname_np */

#include "waker.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Events taken per epoll_wait. */
#define WLB_WAKER_EVENTS 16

typedef struct {
  uint64_t id; /* its epoll data: never reused, and never 0 (the stop's) */
  wl_agent_t *agent;
  uv_async_t *async;
} wlb__wakee_t;

typedef struct {
  pthread_t thread;
  int epoll;
  int stop; /* an eventfd, written once when the thread is to end */
  wlb__wakee_t *wakees;
  size_t n;
  size_t cap;
} wlb__waker_t;

/* The running waker, its table and the ids, under the mutex (made once:
 * libuv's has no static initialiser). */
static uv_once_t wlb__waker_once = UV_ONCE_INIT;
static uv_mutex_t wlb__waker_mutex;
static int wlb__waker_ok;
static wlb__waker_t *wlb__waker;
static uint64_t wlb__waker_ids;

static void wlb__waker_init(void) {
  wlb__waker_ok = uv_mutex_init(&wlb__waker_mutex) == 0;
}

/* Under the mutex. */
static void wlb__waker_wake(wlb__waker_t *w, uint64_t id) {
  size_t i;

  for (i = 0; i < w->n; i++) {
    if (w->wakees[i].id == id) {
      wl_agent_woken(w->wakees[i].agent);
      uv_async_send(w->wakees[i].async);
      return;
    }
  }
}

static void *wlb__waker_main(void *arg) {
  wlb__waker_t *w = arg;
  struct epoll_event ev[WLB_WAKER_EVENTS];
  int i, n;

  for (;;) {
    n = epoll_wait(w->epoll, ev, WLB_WAKER_EVENTS, -1);
    if (n < 0 && errno != EINTR)
      return NULL;
    uv_mutex_lock(&wlb__waker_mutex);
    for (i = 0; i < n; i++) {
      if (ev[i].data.u64 == 0) {
        uv_mutex_unlock(&wlb__waker_mutex);
        return NULL;
      }
      wlb__waker_wake(w, ev[i].data.u64);
    }
    uv_mutex_unlock(&wlb__waker_mutex);
  }
}

static void wlb__waker_free(wlb__waker_t *w) {
  if (w->epoll >= 0)
    close(w->epoll);
  if (w->stop >= 0)
    close(w->stop);
  free(w->wakees);
  free(w);
}

/* Under the mutex: makes the waker and starts its thread. Returns 0 or a
 * libuv error code. */
static int wlb__waker_start(void) {
  struct epoll_event ev = {EPOLLIN, {.u64 = 0}};
  wlb__waker_t *w = calloc(1, sizeof(*w));
  sigset_t all, old;
  int rc;

  if (w == NULL)
    return UV_ENOMEM;
  w->epoll = epoll_create1(EPOLL_CLOEXEC);
  w->stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (w->epoll < 0 || w->stop < 0 ||
      epoll_ctl(w->epoll, EPOLL_CTL_ADD, w->stop, &ev) != 0) {
    rc = -errno;
    wlb__waker_free(w);
    return rc;
  }
  /* The process's signals go to its own threads, never to this one. */
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  rc = pthread_create(&w->thread, NULL, wlb__waker_main, w);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    wlb__waker_free(w);
    return -rc;
  }
  /* Named here, not by the thread: named once this returns. */
  pthread_setname_np(w->thread, "wl-wake");
  wlb__waker = w;
  return 0;
}

/* Without the mutex, which the thread may be waiting for: ends the thread
 * of a waker no longer running (wlb__waker is another, or NULL) and frees
 * it. */
static void wlb__waker_stop(wlb__waker_t *w) {
  uint64_t one = 1;

  while (write(w->stop, &one, sizeof(one)) < 0 && errno == EINTR)
    ;
  pthread_join(w->thread, NULL);
  wlb__waker_free(w);
}

/* Under the mutex: the running waker, started if need be, with room for
 * one more agent. Returns 0 or a libuv error code. */
static int wlb__waker_room(void) {
  wlb__waker_t *w;
  wlb__wakee_t *wakees;
  size_t cap;
  int rc;

  if (wlb__waker == NULL && (rc = wlb__waker_start()) != 0)
    return rc;
  w = wlb__waker;
  if (w->n < w->cap)
    return 0;
  cap = w->cap ? w->cap * 2 : 4;
  wakees = realloc(w->wakees, cap * sizeof(*wakees));
  if (wakees == NULL)
    return UV_ENOMEM;
  w->wakees = wakees;
  w->cap = cap;
  return 0;
}

/* Under the mutex: takes a waker with no agent left out of service, to be
 * stopped once the mutex is given back; NULL if it has agents. */
static wlb__waker_t *wlb__waker_idle(void) {
  wlb__waker_t *w = wlb__waker;

  if (w == NULL || w->n > 0)
    return NULL;
  wlb__waker = NULL;
  return w;
}

int wlb__waker_add(wl_agent_t *agent, uv_async_t *async) {
  struct epoll_event ev = {EPOLLIN, {.u64 = 0}};
  wlb__waker_t *w, *idle;
  int rc;

  uv_once(&wlb__waker_once, wlb__waker_init);
  if (!wlb__waker_ok)
    return UV_ENOMEM;
  uv_mutex_lock(&wlb__waker_mutex);
  if ((rc = wlb__waker_room()) == 0) {
    w = wlb__waker;
    ev.data.u64 = ++wlb__waker_ids;
    if (epoll_ctl(w->epoll, EPOLL_CTL_ADD, wl_agent_wake_fd(agent), &ev) != 0)
      rc = -errno;
    else
      w->wakees[w->n++] = (wlb__wakee_t){ev.data.u64, agent, async};
  }
  idle = wlb__waker_idle();
  uv_mutex_unlock(&wlb__waker_mutex);
  if (idle != NULL)
    wlb__waker_stop(idle);
  return rc;
}

void wlb__waker_remove(wl_agent_t *agent) {
  wlb__waker_t *w, *idle;
  size_t i;

  uv_mutex_lock(&wlb__waker_mutex);
  w = wlb__waker;
  for (i = 0; w->wakees[i].agent != agent; i++)
    ;
  /* It cannot fail: the FIFO is open and in the set. */
  epoll_ctl(w->epoll, EPOLL_CTL_DEL, wl_agent_wake_fd(agent), NULL);
  w->wakees[i] = w->wakees[--w->n];
  idle = wlb__waker_idle();
  uv_mutex_unlock(&wlb__waker_mutex);
  if (idle != NULL)
    wlb__waker_stop(idle);
}
