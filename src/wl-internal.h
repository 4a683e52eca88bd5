/* Core internals shared by the core's own files and its C tests: the
 * region's layout (its header and the records in it) and the manager. */
#ifndef WL_INTERNAL_H
#define WL_INTERNAL_H

#include <pthread.h>

#include "wl.h"

/* Size classes of region blocks: class c holds 2^(c + WL__MIN_SHIFT) bytes,
 * its 16-byte header included. */
#define WL__MIN_SHIFT 5
#define WL__NCLASSES 40

/* Every block starts with this header; a record follows it. */
typedef struct {
  uint16_t cls;  /* size class */
  uint16_t kind; /* WL__FREE or the record's kind */
  uint32_t gen;  /* bumped on every free: stale handles see the change */
} wl__block_t;

enum {
  WL__FREE = 0,
  WL__NAME = 1,
  WL__AGENT = 2,
  WL__REQUEST = 3,
  WL__ARRAY = 4,
  WL__OWNER = 5,
  WL__VACANT = 6 /* an owner record no process uses (wl-live.c) */
};

/* A process that has a shared manager open (wl-live.c). It holds an OFD
 * write lock on one byte of the file, at WL__LIVE_BASE + its record's
 * offset, which the kernel releases when the process dies, once its memory
 * is torn down. Sooner than that, the kernel marks `life` (a robust futex of
 * its watcher thread) and wakes the owner that watches it (wl-watch.c).
 * Other processes' watchers use watch, life and bell without the mutex:
 * they are read and written with atomics only. */
typedef struct {
  wl__link_t link;   /* in the region's owners, or vacant records */
  wl__link_t agents; /* its agents */
  wl_off_t watch;    /* the owner whose life its watcher watches, or 0 */
  uint32_t life;     /* its watcher's TID, or FUTEX_OWNER_DIED; 0: none */
  uint32_t bell;     /* bumped, and woken, whenever watch changes */
} wl__owner_t;

#define WL__LIVE_BASE ((uint64_t)1 << 48)

/* The longest path of a shared manager's file. */
#define WL__PATH_MAX 1024

/* A resource name: created on first request; once it has no queued request
 * and no held lock, idle, and dropped when WL__IDLE_NAMES newer ones are or
 * when the region needs the room. */
#define WL__IDLE_NAMES 1024
typedef struct {
  wl_off_t hnext;   /* hash chain */
  wl__link_t order; /* in the table's first-use order */
  wl__link_t ilink; /* in the region's idle names while it has no entry */
  wl__link_t queue; /* queued requests, FIFO */
  wl__link_t held;  /* held locks */
  uint64_t hash;
  uint32_t nheld;
  uint32_t nexclusive;
  uint32_t len;
  uint16_t units[];
} wl__name_t;

typedef struct {
  wl__link_t queued; /* its queued requests, in request order */
  wl__link_t held;   /* its held locks, in grant order (the held set's) */
  wl__link_t stolen; /* its stolen requests, until it releases them */
  wl__link_t mail;   /* its requests with undelivered events */
  wl__link_t olink;  /* in its owner's agents (a shared manager's) */
  uint64_t handle;   /* its wl_agent_t, in the process that owns it */
  wl_off_t owner;    /* its owner's record; 0 in the process-wide manager */
  uint32_t closing;  /* wl_agent_close() runs: no mail, no notify */
  uint32_t client_id_len;
  char client_id[WL_CLIENT_ID_MAX];
} wl__agent_t;

/* A request's state. IDLE: made (not yet queued), or unavailable. */
enum { WL__IDLE = 0, WL__QUEUED = 1, WL__HELD = 2, WL__STOLEN = 3 };

/* The ground truth of a shared manager: its request records. Every list
 * that links them can be rebuilt from their state, names, agents and keys
 * (wl-recover.c), which are written before the state that publishes them. */
typedef struct {
  wl__link_t qlink; /* in its name's queue when queued, held list when held */
  wl__link_t alink; /* in its agent's queued, held or stolen list */
  wl__link_t mlink; /* in its agent's mail when it has events */
  wl_off_t agent;
  wl_off_t name;
  uint64_t handle; /* its wl_request_t, in the process that owns it */
  /* Its stamp when made, negated for a steal: its place in its name's queue
   * (a steal goes first), and as |qkey| in its agent's (request order). */
  int64_t qkey;
  uint64_t hkey; /* place in the held set (grant order) */
  uint64_t mkey; /* place in its agent's mail */
  /* Not char-sized: a store through a char type may alias anything. */
  uint16_t mode;
  uint16_t state;
  uint16_t events;
} wl__req_t;

/* Publishes a record's state after the fields it makes meaningful, so that a
 * process killed between two stores leaves either the old or the new state
 * in place, never a state without its keys. */
#define WL__PUBLISH(field, value) __atomic_store_n(&(field), (value), __ATOMIC_RELEASE)

/* Named points where a test build (WL_FAULTS) can kill the process, to
 * prove that the next process to take the mutex finds a consistent state. */
#ifdef WL_FAULTS
extern void (*wl__fault_hook)(const char *point);
#define WL__FAULT(point) (wl__fault_hook != NULL ? wl__fault_hook(point) : (void)0)
#else
#define WL__FAULT(point) ((void)0)
#endif

/* The region's header, at offset 0. */
typedef struct {
  uint64_t size; /* bytes the region may use */
  uint64_t used; /* bytes handed out so far, from the start */
  wl_off_t free[WL__NCLASSES];
  uint64_t seed;  /* of the names' hash, shared by every user of the region */
  uint64_t stamp; /* the last order key handed out */
  /* The table of names: chained hashing, plus first-use order. */
  wl_off_t buckets; /* a WL__ARRAY block of nbuckets offsets, or 0 */
  uint64_t nbuckets;
  uint64_t count;
  wl__link_t order;
  /* Names with no entry left, kept (the oldest dropped first, all of them
   * when the region is full) so that a name used again and again costs no
   * table work; no algorithm can tell. */
  wl__link_t idle;
  uint64_t nidle;
  wl__link_t owners; /* of a shared manager */
  /* Owner records no process uses, kept for owners only: a watcher that
   * still acts on one it watched writes only into an owner's life word. */
  wl__link_t vacant;
} wl__hdr_t;

/* An open write end of another process's agent's FIFO (wl-wake.c). */
#define WL__WAKERS 32
typedef struct {
  wl_off_t agent;
  int fd1; /* its descriptor + 1; 0 when none */
} wl__waker_t;

struct wl_manager_s {
  pthread_mutex_t *mutex; /* the process's own, or in a shared file */
  char *base;             /* the region */
  /* Of types that no store into the region (uint64_t, uint32_t) can alias,
   * so that the compiler keeps them in registers across those stores. */
  unsigned long long limit; /* its size, as checked when it was mapped */
  unsigned long long steps; /* limit / 32 + 2: see WL__STEPS */
  /* An offset pointed outside it. Set under the mutex; read without it
   * (wl__is_damaged) while other threads may set it, a sweeper's included. */
  _Bool damaged;
  /* Mapped by other processes too: its offsets are checked. The process's
   * own region is written by this code alone and is not. */
  _Bool shared;
  uint64_t scratch[64];   /* what a bad offset reads and writes instead */
  /* This process's owner record (0 in the process-wide manager): it tells
   * its agents, notified directly, from other processes', woken through
   * their FIFOs (wl-wake.c). */
  wl_off_t self;
  int probe_fd; /* a second open file, to test other owners' locks */
  struct wl__watch_s *watcher; /* its watcher and sweeper threads */
  unsigned mode; /* its permission bits, for the agents' FIFOs */
  char path[WL__PATH_MAX];
  /* A shared manager's mapping of its file (wl-segment.c). */
  void *map;
  uint64_t map_size;
  int fd;
  wl__waker_t wakers[WL__WAKERS]; /* used under the mutex */
};

#define WL__HDR(m) ((wl__hdr_t *)(m)->base)
#define wl__off_of(m, ptr) ((wl_off_t)((char *)(ptr) - (m)->base))

/* Every offset read from a shared region goes through here. One that points
 * outside the region (a damaged or hostile file) marks the manager damaged
 * and yields a blank scratch record instead, so that the operation ends
 * without a stray access and reports WL_ECORRUPT. */
#if defined(__GNUC__)
#define WL__COLD __attribute__((cold, noinline))
#define WL__UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define WL__COLD
#define WL__UNLIKELY(x) (x)
#endif

WL__COLD void *wl__damaged(wl_manager_t *m);
static inline int wl__is_damaged(wl_manager_t *m) {
  return __atomic_load_n(&m->damaged, __ATOMIC_RELAXED);
}

/* One unsigned compare: off in [16, limit - bytes]; a region is always
 * larger than a record plus its block header. */
static inline void *wl__rec(wl_manager_t *m, wl_off_t off, uint64_t bytes) {
  if (m->shared && WL__UNLIKELY(off - sizeof(wl__block_t) >
                                m->limit - sizeof(wl__block_t) - bytes))
    return wl__damaged(m);
  return m->base + off;
}

/* The same for a span longer than the scratch record (a bucket array, a
 * name's units): NULL when it is outside the region. */
static inline void *wl__span(wl_manager_t *m, wl_off_t off, uint64_t bytes) {
  if (m->shared && (off < sizeof(wl__block_t) || bytes > m->limit ||
                    off > m->limit - bytes)) {
    wl__damaged(m);
    return NULL;
  }
  return m->base + off;
}

#define WL__REC(m, off, type) ((type *)wl__rec(m, off, sizeof(type)))
#define WL__LINK(m, off) WL__REC(m, off, wl__link_t)

/* How many steps any walk may take: more than the region can hold records
 * (limit / 32 + 2, set with limit), so a longer walk is a damaged list. */
#define WL__STEPS(m) ((m)->steps)

static inline void wl__list_init(wl_manager_t *m, wl_off_t head) {
  wl__link_t *h = WL__LINK(m, head);
  h->prev = head;
  h->next = head;
}

static inline int wl__list_empty(wl_manager_t *m, wl_off_t head) {
  return WL__LINK(m, head)->next == head;
}

static inline int wl__linked(wl_manager_t *m, wl_off_t node) {
  return WL__LINK(m, node)->next != 0;
}

static inline void wl__list_insert_after(wl_manager_t *m, wl_off_t at,
                                         wl_off_t node) {
  wl__link_t *a = WL__LINK(m, at), *n = WL__LINK(m, node);
  n->prev = at;
  n->next = a->next;
  WL__LINK(m, a->next)->prev = node;
  a->next = node;
}

static inline void wl__list_append(wl_manager_t *m, wl_off_t head,
                                   wl_off_t node) {
  wl__list_insert_after(m, WL__LINK(m, head)->prev, node);
}

static inline void wl__list_prepend(wl_manager_t *m, wl_off_t head,
                                    wl_off_t node) {
  wl__list_insert_after(m, head, node);
}

static inline void wl__list_remove(wl_manager_t *m, wl_off_t node) {
  wl__link_t *n = WL__LINK(m, node);
  WL__LINK(m, n->prev)->next = n->next;
  WL__LINK(m, n->next)->prev = n->prev;
  n->prev = 0;
  n->next = 0;
}

/* One more step of a walk: 0 when the manager is damaged or the walk's
 * budget is spent (then it is damaged: no list is that long). */
static inline int wl__step(wl_manager_t *m, uint64_t *steps) {
  if (!m->shared)
    return 1;
  if (m->damaged)
    return 0;
  if (*steps == 0) {
    wl__damaged(m);
    return 0;
  }
  --*steps;
  return 1;
}

/* For loops that empty a list one record at a time. */
static inline int wl__more(wl_manager_t *m, wl_off_t head, uint64_t *steps) {
  return !wl__list_empty(m, head) && wl__step(m, steps);
}

/* Region blocks (wl-region.c). wl__alloc returns the offset of `bytes` of
 * zeroed record space of the given kind, or 0 when the region is full. */
int wl__region_init(wl_manager_t *m, void *base, uint64_t size,
                    uint64_t seed);
wl_off_t wl__alloc(wl_manager_t *m, uint32_t kind, uint64_t bytes);
void wl__free(wl_manager_t *m, wl_off_t off);
wl__block_t *wl__block(wl_manager_t *m, wl_off_t off);

/* Takes and gives back the manager's mutex. Taking it repairs a shared
 * manager whose previous holder died (wl-recover.c); returns 0 or an error
 * code, and then the mutex is not held. */
WL__COLD int wl__lock_slow(wl_manager_t *m, int rc);
static inline int wl__lock(wl_manager_t *m) {
  int rc;

  if (WL__UNLIKELY(wl__is_damaged(m)))
    return WL_ECORRUPT;
  rc = pthread_mutex_lock(m->mutex);
  return WL__UNLIKELY(rc != 0) ? wl__lock_slow(m, rc) : 0;
}

static inline void wl__unlock(wl_manager_t *m) { pthread_mutex_unlock(m->mutex); }
int wl__recover(wl_manager_t *m);
/* An agent's FIFO (wl-wake.c): made and opened for reading (the fd, or an
 * error code), closed and removed, and written to wake its thread. */
int wl__wake_open(wl_manager_t *m, wl_off_t agent);
void wl__wake_close(wl_manager_t *m, wl_off_t agent, int fd);
void wl__wake(wl_manager_t *m, wl_off_t agent);
/* Closes the write ends that wl__wake keeps open. */
void wl__wakers_close(wl_manager_t *m);

/* This process's owner record, under the mutex (wl-live.c). Opening starts
 * its watcher (wl__watch_start); closing stops it, so the sweeper must be
 * stopped first (wl__watch_stop_sweeper, without the mutex). */
int wl__owner_open(wl_manager_t *m);
void wl__owner_close(wl_manager_t *m);
/* Ends, as spec 2.6 says, every agent of every owner that has died. */
void wl__sweep(wl_manager_t *m);

/* Prompt notice of deaths (wl-watch.c). Starts, under the mutex, the
 * threads that watch for the owner after `self` to die and sweep then;
 * `self`'s life holds the watcher's TID when it returns 0. */
int wl__watch_start(wl_manager_t *m, wl_off_t self);
/* Stops the sweeper (never under the mutex: it may be waiting for it), then
 * the watcher, which lets go of its life word; either may run first. */
void wl__watch_stop_sweeper(wl_manager_t *m);
void wl__watch_stop(wl_manager_t *m);
/* Under the mutex: each owner watches the next, the last the first; `all`
 * rings every bell, after a recovery. */
void wl__ring(wl_manager_t *m, int all);
/* Whether an owner's life word says its watcher is gone. */
int wl__life_ended(wl_manager_t *m, wl_off_t o);
/* Ends an agent's requests and locks and frees its record (spec 2.6). */
void wl__close_agent(wl_manager_t *m, wl_off_t a);
/* Wakes an agent's thread: its notify callback in this process, its FIFO
 * in another. */
void wl__notify(wl_manager_t *m, wl_off_t a);
/* Takes every held lock of a name for a steal request (4.1 step 6.2). */
void wl__steal(wl_manager_t *m, wl_off_t n);
/* Process a name's queue (4.4), as every algorithm ends. */
void wl__process(wl_manager_t *m, wl_off_t n);

/* The table of names (wl-names.c). */
uint64_t wl__fmix(uint64_t k); /* a 64-bit finalizer, for seeds and hashes */
uint64_t wl__hash(wl_manager_t *m, const uint16_t *units, size_t len);
wl_off_t wl__names_find(wl_manager_t *m, uint64_t hash, const uint16_t *units,
                        size_t len);
/* A name's units, checked against the region; NULL if they are outside it. */
const uint16_t *wl__units(wl_manager_t *m, wl_off_t n);
/* Puts a name record (its hash and units set) in the table: 0 or
 * WL_ENOMEM. */
int wl__names_link(wl_manager_t *m, wl_off_t n);
/* Returns 0 when the region is full. */
wl_off_t wl__names_add(wl_manager_t *m, uint64_t hash, const uint16_t *units,
                       size_t len);
void wl__names_remove(wl_manager_t *m, wl_off_t n);

/* How many names the manager holds; for tests that check nothing leaks. */
size_t wl__name_count(wl_manager_t *m);

#endif
