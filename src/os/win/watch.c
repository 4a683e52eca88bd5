/* Prompt notice of a process's death in the Windows family (os/machine.h;
 * the design: os/win/machine.h, point 5). As in the other families, owners
 * watch each other in a ring (core/owners.c): each process's watcher thread
 * watches the owner after its own, and a death it notices has its
 * process's sweeper thread sweep.
 *
 * The target's byte (os/win/life.c) says whether it lives; the identity in
 * its record (pid and creation time) only names a process to wait for: its
 * handle is signalled once it has ended, however it ended. A record's
 * identity is not trusted: the process it names is waited for only while
 * the byte is held, and the byte is asked again once that process has
 * ended, every few milliseconds (Windows gives a dead process's locks up
 * as its handles close, which may come after its handle is signalled)
 * until it is let go or the bell rings.
 *
 * A watcher learns of a new target through its bell: an auto-reset event
 * of its own (os/win/wake.c), named by the owner record's `wake`, which
 * whoever changes `watch` sets after the change. The watcher reads `watch`
 * after a wait that its bell ended: a change after that read leaves the
 * bell set, which ends the next wait at once.
 *
 * Where the record names no process that can be opened (another user's:
 * access denied; one that has ended and is gone, or whose pid another has
 * taken, while its byte is still held; a forged identity), the watcher
 * asks for the byte again as after a process's end: a watcher that comes
 * to a target after its process's end (its first look, or a look after its
 * bell rang) would otherwise never notice the byte let go.
 *
 * The watcher takes no lock but the probe handle's (a leaf, never held
 * while waiting): it reads its record with atomics, asks for bytes without
 * waiting, and asks the sweeper, so that it can be stopped, and waited
 * for, under the mutex. */
#include <stdlib.h>

#include "machine.h"

#define SEQ __ATOMIC_SEQ_CST

typedef struct wl__watch_s wl__watch_t;

struct wl__watch_s {
  wl_manager_t *m;
  wl__owner_t *self; /* this process's owner record */
  int (*sweep)(wl_manager_t *m);
  HANDLE bell;    /* the watcher's event (its number: wake) */
  uint64_t wake;
  HANDLE ask;     /* an auto-reset event: a sweep is asked for */
  HANDLE watcher; /* the threads, until joined */
  HANDLE sweeper;
  uint32_t stop;       /* the watcher is to end */
  uint32_t stop_sweep; /* the sweeper is to end */
};

/* Asks that come while it sweeps leave `ask` set: one more sweep. */
static DWORD WINAPI wl__sweeper_main(void *arg) {
  wl__watch_t *w = arg;

  for (;;) {
    if (WaitForSingleObject(w->ask, INFINITE) != WAIT_OBJECT_0 ||
        __atomic_load_n(&w->stop_sweep, SEQ))
      return 0;
    w->sweep(w->m);
  }
}

/* The target's offset, if it is one at which an owner record can be, in
 * the whole region, else 0: read without the mutex, a bad one is the mutex
 * holder's to report. */
static wl_off_t wl__target(const wl__watch_t *w) {
  wl_off_t t = __atomic_load_n(&w->self->watch, SEQ);

  WL__HIDE(t);
  return t == 0 || wl__win_owner(w->m, t) == NULL ? 0 : t;
}

#define WL__DIED 1
#define WL__AGAIN 0
#define WL__CANNOT (-1)

/* Waits for the bell: WL__AGAIN, or WL__CANNOT if the wait fails (the
 * watcher then ends, and deaths are found by the next sweep, as where a
 * process cannot be watched). */
static int wl__bell(wl__watch_t *w) {
  return WaitForSingleObject(w->bell, INFINITE) == WAIT_OBJECT_0 ? WL__AGAIN
                                                                 : WL__CANNOT;
}

/* After its process has ended: until its byte is let go (WL__DIED) or the
 * bell rings (WL__AGAIN), looking again after 1, 2, 4 ... up to 64 ms. */
static int wl__let_go(wl__watch_t *w, wl_off_t t) {
  DWORD delay = 1, r;

  while (wl__win_held(w->m, t)) {
    WL__WATCH_STEP("watch-again", 0);
    if ((r = WaitForSingleObject(w->bell, delay)) != WAIT_TIMEOUT)
      return r == WAIT_OBJECT_0 ? WL__AGAIN : WL__CANNOT;
    if (delay < 64)
      delay *= 2;
  }
  return WL__DIED;
}

/* The process that a record's identity names, if this user can open it
 * and it is that one (its creation time), else NULL. */
static HANDLE wl__process(uint32_t pid, uint64_t created) {
  HANDLE h = pid == 0
                 ? NULL
                 : OpenProcess(SYNCHRONIZE | PROCESS_QUERY_LIMITED_INFORMATION,
                               FALSE, pid);
  uint64_t c;

  if (h != NULL && (wl__win_created(h, &c) != 0 || c != created)) {
    CloseHandle(h);
    h = NULL;
  }
  return h;
}

/* Until the target changes (its bell is set) or its byte is let go:
 * WL__DIED if it was, WL__AGAIN, or WL__CANNOT. */
static int wl__watch_one(wl__watch_t *w, wl_off_t t, const wl__owner_t *o) {
  uint32_t pid = __atomic_load_n(&o->pid, SEQ);
  uint64_t created = __atomic_load_n(&o->created, SEQ);
  HANDLE h[2];
  DWORD r;

  WL__HIDE(pid);
  WL__HIDE(created);
  if (!wl__win_held(w->m, t))
    return WL__DIED;
  h[0] = w->bell;
  h[1] = wl__process(pid, created);
  if (h[1] == NULL) {
    WL__WATCH_STEP("watch-no-process", pid);
    return wl__let_go(w, t);
  }
  WL__WATCH_STEP("watch-process", pid);
  r = WaitForMultipleObjects(2, h, FALSE, INFINITE);
  CloseHandle(h[1]);
  if (r == WAIT_OBJECT_0 + 1)
    return wl__let_go(w, t);
  return r == WAIT_OBJECT_0 ? WL__AGAIN : wl__bell(w);
}

static DWORD WINAPI wl__watcher_main(void *arg) {
  wl__watch_t *w = arg;
  int rc = WL__AGAIN;

  while (rc != WL__CANNOT && !__atomic_load_n(&w->stop, SEQ)) {
    wl_off_t t = wl__target(w);
    if (t == 0) {
      rc = wl__bell(w);
    } else if ((rc = wl__watch_one(w, t, wl__win_owner(w->m, t))) ==
               WL__DIED) {
      /* The sweep mends the ring, which sets the bell. */
      SetEvent(w->ask);
      rc = wl__bell(w);
    }
  }
  return 0;
}

static void wl__join(HANDLE *thread) {
  if (*thread == NULL)
    return;
  WaitForSingleObject(*thread, INFINITE);
  CloseHandle(*thread);
  *thread = NULL;
}

static void wl__free(wl_manager_t *m, wl__watch_t *w) {
  if (__atomic_load_n(&w->self->wake, SEQ) == w->wake)
    __atomic_store_n(&w->self->wake, 0, SEQ);
  wl__os_wake_close(m, w->wake, w->bell);
  if (w->ask != NULL)
    CloseHandle(w->ask);
  free(w);
}

/* Its bell's number is in its record before the bell exists. */
int wl__os_watch_start(wl_manager_t *m, wl__owner_t *self,
                       int (*sweep)(wl_manager_t *m)) {
  wl__watch_t *w = calloc(1, sizeof(*w));
  int rc;

  if (w == NULL)
    return WL_ENOMEM;
  w->m = m;
  w->self = self;
  w->sweep = sweep;
  if ((rc = wl__os_wake_open(m, &self->wake, &w->wake, &w->bell)) != 0) {
    free(w);
    return rc;
  }
  w->ask = CreateEventW(NULL, FALSE, FALSE, NULL);
  if (w->ask != NULL)
    w->sweeper = CreateThread(NULL, 0, wl__sweeper_main, w, 0, NULL);
  if (w->sweeper != NULL)
    w->watcher = CreateThread(NULL, 0, wl__watcher_main, w, 0, NULL);
  if (w->watcher != NULL) {
    m->watcher = w;
    return 0;
  }
  rc = wl__win_errno(GetLastError());
  if (w->sweeper != NULL) {
    __atomic_store_n(&w->stop_sweep, 1, SEQ);
    SetEvent(w->ask);
    wl__join(&w->sweeper);
  }
  wl__free(m, w);
  return rc;
}

void wl__os_watch_stop_sweeper(wl_manager_t *m) {
  wl__watch_t *w = m->watcher;

  if (w == NULL || w->sweeper == NULL)
    return;
  __atomic_store_n(&w->stop_sweep, 1, SEQ);
  SetEvent(w->ask);
  wl__join(&w->sweeper);
}

/* The watcher is stopped by its own bell. */
void wl__os_watch_stop(wl_manager_t *m) {
  wl__watch_t *w = m->watcher;

  if (w == NULL)
    return;
  wl__os_watch_stop_sweeper(m);
  __atomic_store_n(&w->stop, 1, SEQ);
  SetEvent(w->bell);
  wl__join(&w->watcher);
  wl__free(m, w);
  m->watcher = NULL;
}

/* Sets the bell after the change (see above). */
void wl__os_watch_target(wl_manager_t *m, wl__owner_t *o, wl_off_t target) {
  __atomic_store_n(&o->watch, target, SEQ);
  wl__os_wake(m, wl__off_of(m, o), __atomic_load_n(&o->wake, SEQ));
}

/* Its bell went with its process's handles: its number is only cleared. */
void wl__os_watch_end(wl_manager_t *m, wl__owner_t *o) {
  (void)m;
  __atomic_store_n(&o->wake, 0, SEQ);
}
