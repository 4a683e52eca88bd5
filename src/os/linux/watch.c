/* Prompt notice of a process's death, without polling. The kernel releases
 * a dead process's OFD lock (its proof of life, os/linux/life.c) only once its
 * memory is torn down, about 100 ms per GiB; a robust futex it marks first,
 * as each thread exits. So each process with a machine-wide manager open runs a
 * watcher thread whose own kernel robust list holds one entry: its owner
 * record's life word, holding the thread's TID. However the process dies,
 * the kernel then sets FUTEX_OWNER_DIED in that word and wakes one thread
 * waiting on it (if FUTEX_WAITERS is set).
 *
 * Owners watch each other in a ring: each owner's watcher waits on the life
 * word of the owner after it (wl__ring, core/owners.c). When that owner dies, the watcher
 * asks its process's sweeper thread to sweep, which ends the dead owner's
 * agents (the sweep it was started with) and mends the ring.
 *
 * A watcher waits with futex_waitv on two words at once: its own bell, which
 * whoever changes its target rings, and its target's life. A FUTEX_WAIT on
 * the life word alone can sleep through a change of target: the watcher,
 * between its last look at its bell and its wait, may find the old target's
 * word back at the value it expects (clearing FUTEX_WAITERS does not help:
 * that target's new watcher sets it again), and then sleeps there however
 * often its bell rings, while its new target goes unwatched. Waiting on both
 * words, the kernel compares both as it queues the watcher: a bell bumped
 * before the wait makes it return at once, one bumped after wakes it. So the
 * old target's word needs no change when it loses its watcher. Kernels
 * before 5.16 have no futex_waitv: there the watcher waits on its bell only
 * and deaths are found as before, when a process opens the manager,
 * recovers it or calls wl_sweep.
 *
 * The watcher takes no robust lock: its robust list is not glibc's, so a
 * robust mutex (the manager's) that it died holding would never be marked;
 * the sweeper (os/unix/sweep.c) takes the manager's mutex for it. It reads
 * its own record and other owners' life words with atomics only. */
#define _GNU_SOURCE

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../unix/machine.h"

/* futex_waitv (Linux 5.16) has number 449 on every architecture; libc
 * headers older than it (musl 1.2.3's) do not name it. */
#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#ifndef FUTEX2_SIZE_U32
#define FUTEX2_SIZE_U32 0x02
#endif

#define SEQ __ATOMIC_SEQ_CST

typedef struct wl__watch_s wl__watch_t;

struct wl__watch_s {
  wl_manager_t *m;
  wl__owner_t *self; /* this process's owner record */
  wl__sweeper_t sweeper;
  pthread_t watcher;
  uint32_t ready; /* the watcher holds its life word, or failed (rc) */
  int rc;
  uint32_t stop;
  /* The watcher's kernel robust list, while it watches. */
  struct robust_list_head head;
  struct robust_list entry;
};

/* struct futex_waitv (Linux 5.16), whatever the headers have. */
typedef struct {
  uint64_t val;
  uint64_t uaddr;
  uint32_t flags;
  uint32_t reserved;
} wl__waitv_t;

/* Futexes in the region are shared with other processes: no
 * FUTEX_PRIVATE_FLAG. */
static long wl__futex(uint32_t *word, int op, uint32_t val) {
  return syscall(SYS_futex, word, op, val, NULL, NULL, 0);
}

static void wl__wake_all(uint32_t *word) { wl__futex(word, FUTEX_WAKE, INT_MAX); }

/* Sleeps until either word is not its value or is woken: the index of the
 * word that woke it, or -errno. */
static int wl__wait2(uint32_t *a, uint32_t va, uint32_t *b, uint32_t vb) {
  wl__waitv_t w[2] = {{va, (uintptr_t)a, FUTEX2_SIZE_U32, 0},
                      {vb, (uintptr_t)b, FUTEX2_SIZE_U32, 0}};
  long rc = syscall(SYS_futex_waitv, w, 2, 0, NULL, 0);
  return rc < 0 ? -errno : (int)rc;
}

/* A watcher that died (the kernel cleared its TID and set
 * FUTEX_OWNER_DIED), stopped, or never started. */
static int wl__ended(uint32_t life) { return (life & FUTEX_TID_MASK) == 0; }

int wl__os_life_ended(const wl__owner_t *o) {
  return wl__ended(__atomic_load_n(&o->life, SEQ));
}

/* Rung whenever the target changes: whoever changes it stores `watch`,
 * then bumps the bell, then wakes it (wl__watch_loop). */
void wl__os_watch_target(wl_manager_t *m, wl__owner_t *o, wl_off_t target) {
  (void)m;
  __atomic_store_n(&o->watch, target, SEQ);
  __atomic_fetch_add(&o->bell, 1, SEQ);
  wl__wake_all(&o->bell);
}

/* Nothing: futexes leave nothing beside the file. The life word stays as
 * the kernel or the watcher left it, for watchers still acting on it. */
void wl__os_watch_end(wl_manager_t *m, wl__owner_t *o) {
  (void)m;
  (void)o;
}

/* The life word of the owner at t, an offset read from the region without
 * the mutex: NULL for none or for one outside the region (whoever holds the
 * mutex reports the corruption; the watcher just waits for its bell). Checked
 * against the whole region, not this process's limit, which it may not
 * have raised yet to cover a new owner (whose process reserved its page). */
static uint32_t *wl__life_at(const wl__watch_t *w, wl_off_t t) {
  if (t % 8 != 0 || t < sizeof(wl__block_t) ||
      t > w->m->capacity - sizeof(wl__owner_t))
    return NULL;
  return &((wl__owner_t *)(w->m->base + t))->life;
}


/* No wake-up is lost: whoever changes the target stores `watch`, then bumps
 * the bell, then wakes it; the loop reads the bell before `watch`, and the
 * kernel compares the bell with what the loop read as it queues the wait. */
static void wl__watch_loop(wl__watch_t *w) {
  uint32_t *bell = &w->self->bell;
  int paired = 1; /* futex_waitv works */

  for (;;) {
    uint32_t b = __atomic_load_n(bell, SEQ), v;
    uint32_t *life;
    int rc;

    if (__atomic_load_n(&w->stop, SEQ))
      return;
    life = wl__life_at(w, __atomic_load_n(&w->self->watch, SEQ));
    if (life == NULL || !paired) {
      wl__futex(bell, FUTEX_WAIT, b);
      continue;
    }
    v = __atomic_fetch_or(life, FUTEX_WAITERS, SEQ);
    if (wl__ended(v)) {
      /* The sweep mends the ring, which rings the bell. */
      wl__sweeper_ask(&w->sweeper);
      wl__futex(bell, FUTEX_WAIT, b);
      continue;
    }
    rc = wl__wait2(bell, b, life, v | FUTEX_WAITERS);
    if (rc < 0 && rc != -EAGAIN && rc != -EINTR)
      paired = 0;
    else if (rc == 1 && wl__ended(__atomic_load_n(life, SEQ)))
      /* The kernel wakes one waiter for a death: this one, whose bell may
       * have rung meanwhile, reports it all the same. */
      wl__sweeper_ask(&w->sweeper);
  }
}

static void wl__ready(wl__watch_t *w, int rc) {
  w->rc = rc;
  __atomic_store_n(&w->ready, 1, SEQ);
  wl__futex(&w->ready, FUTEX_WAKE_PRIVATE, 1);
}

static void *wl__watcher_main(void *arg) {
  wl__watch_t *w = arg;
  uint32_t *life = &w->self->life, v;
  struct robust_list_head *glibc;
  size_t len;

  wl__thread_name("wl-watch");
  w->entry.next = &w->head.list;
  w->head.list.next = &w->entry;
  w->head.futex_offset = (long)((uintptr_t)life - (uintptr_t)&w->entry);
  w->head.list_op_pending = NULL;
  /* glibc's list comes back before the thread exits, as glibc expects. */
  if (syscall(SYS_get_robust_list, 0, &glibc, &len) != 0 ||
      syscall(SYS_set_robust_list, &w->head, sizeof(w->head)) != 0) {
    wl__ready(w, -errno);
    return NULL;
  }
  /* Keeps the FUTEX_WAITERS of a watcher already waiting on the word (a
   * stale one: the record is not in the ring yet), and wakes it. */
  v = __atomic_load_n(life, SEQ);
  while (!__atomic_compare_exchange_n(
      life, &v, (uint32_t)syscall(SYS_gettid) | (v & FUTEX_WAITERS), 0, SEQ,
      SEQ))
    ;
  wl__wake_all(life);
  wl__ready(w, 0);
  wl__watch_loop(w);
  /* Cleared before the list goes: a process killed in between leaves a word
   * that says its watcher is gone, which the kernel then leaves alone. */
  __atomic_store_n(life, 0, SEQ);
  wl__wake_all(life);
  syscall(SYS_set_robust_list, glibc, len);
  return NULL;
}

int wl__os_watch_start(wl_manager_t *m, wl__owner_t *self,
                       int (*sweep)(wl_manager_t *m)) {
  wl__watch_t *w = calloc(1, sizeof(*w));
  int rc;

  if (w == NULL)
    return WL_ENOMEM;
  w->m = m;
  w->self = self;
  /* A vacant record's word may say its last watcher died: the new one's
   * says nothing until its watcher holds it. */
  __atomic_store_n(&self->life, 0, SEQ);
  if ((rc = wl__sweeper_start(&w->sweeper, m, sweep)) != 0) {
    free(w);
    return rc;
  }
  m->watcher = w;
  if ((rc = wl__thread_start(&w->watcher, wl__watcher_main, w)) != 0) {
    /* Never asked: not waiting for the mutex. */
    wl__sweeper_free(&w->sweeper);
    m->watcher = NULL;
    free(w);
    return rc;
  }
  /* The watcher never waits for the mutex: waiting for it under the mutex
   * is safe. */
  while (!__atomic_load_n(&w->ready, SEQ))
    wl__futex(&w->ready, FUTEX_WAIT_PRIVATE, 0);
  rc = w->rc;
  if (rc != 0)
    wl__os_watch_stop(m);
  return rc;
}

void wl__os_watch_stop_sweeper(wl_manager_t *m) {
  if (m->watcher != NULL)
    wl__sweeper_stop(&m->watcher->sweeper);
}

void wl__os_watch_stop(wl_manager_t *m) {
  wl__watch_t *w = m->watcher;

  if (w == NULL)
    return;
  wl__sweeper_stop(&w->sweeper);
  __atomic_store_n(&w->stop, 1, SEQ);
  __atomic_fetch_add(&w->self->bell, 1, SEQ);
  wl__wake_all(&w->self->bell);
  pthread_join(w->watcher, NULL);
  wl__sweeper_free(&w->sweeper);
  free(w);
  m->watcher = NULL;
}
