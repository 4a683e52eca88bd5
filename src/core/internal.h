/* Core internals shared by the core's own files and its C tests: the
 * functions on a region and its records (core/records.h), and the
 * machine-wide manager's parts. */
#ifndef WL_INTERNAL_H
#define WL_INTERNAL_H

#include <string.h>

#include "records.h"
/* What the machine-wide manager asks of the OS: its file, its mutex, proof
 * of life, wake-ups and the death watch. */
#include "../os/machine.h"

/* wl__corrupt is called under the mutex: its scratch record is the mutex
 * holder's. Without the mutex, the manager is only marked (wl__mark_corrupt),
 * since another thread may be using the scratch record meanwhile. */
WL__COLD void *wl__corrupt(wl_manager_t *m);
static inline void wl__mark_corrupt(wl_manager_t *m) {
  __atomic_store_n(&m->corrupt, 1, __ATOMIC_RELAXED);
}
static inline int wl__is_corrupt(wl_manager_t *m) {
  return __atomic_load_n(&m->corrupt, __ATOMIC_RELAXED);
}

/* WL__MACHINE(m): whether m is shared by processes, as a constant. The
 * algorithms are compiled once for each kind of manager: with 0 for the
 * process-wide one (core/process.c), whose region only this code writes, so that
 * nothing read from it is checked, and with 1 for shared ones (core/machine.c).
 * Every other file serves machine-wide managers, or tests, and uses 1. */
#ifndef WL__MACHINE
#define WL__MACHINE(m) 1
#endif

/* Every offset read from a shared region goes through here. One that points
 * outside the region (a corrupt or hostile file) marks the manager corrupt
 * and yields a blank scratch record instead, so that the operation ends
 * without a stray access and reports WL_ECORRUPT.
 * One unsigned compare: off in [16, limit - bytes] (a region is always
 * larger than a record plus its block header), and 8-aligned, as every
 * record and link is (a misaligned atomic faults on some processors). */
static inline void *wl__rec(wl_manager_t *m, wl_off_t off, uint64_t bytes) {
  if (WL__MACHINE(m)) {
    WL__HIDE(off);
    if (WL__UNLIKELY((off - sizeof(wl__block_t) >
                      m->limit - sizeof(wl__block_t) - bytes) |
                     (off & 7)))
      return wl__corrupt(m);
  }
  return m->base + off;
}

/* The same for a span longer than the scratch record (a bucket array, a
 * name's units): NULL when it is outside the region. */
static inline void *wl__span(wl_manager_t *m, wl_off_t off, uint64_t bytes) {
  if (WL__MACHINE(m)) {
    WL__HIDE(off);
    WL__HIDE(bytes);
    if (off < sizeof(wl__block_t) || bytes > m->limit ||
        off > m->limit - bytes) {
      wl__corrupt(m);
      return NULL;
    }
  }
  return m->base + off;
}

#define WL__REC(m, off, type) ((type *)wl__rec(m, off, sizeof(type)))
#define WL__LINK(m, off) WL__REC(m, off, wl__link_t)

/* How many steps any walk may take: more than the region can hold records
 * (capacity / 32 + 2), so a longer walk is a corrupt list. */
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

/* One more step of a walk: 0 when the manager is corrupt or the walk's
 * budget is spent (then it is corrupt: no list is that long). */
static inline int wl__step(wl_manager_t *m, uint64_t *steps) {
  if (!WL__MACHINE(m))
    return 1;
  if (wl__is_corrupt(m))
    return 0;
  if (*steps == 0) {
    wl__corrupt(m);
    return 0;
  }
  --*steps;
  return 1;
}

/* For loops that empty a list one record at a time. */
static inline int wl__more(wl_manager_t *m, wl_off_t head, uint64_t *steps) {
  return !wl__list_empty(m, head) && wl__step(m, steps);
}

/* Makes an empty region of `size` bytes at base, m's (core/region.c). */
int wl__region_init(wl_manager_t *m, void *base, uint64_t size,
                    uint64_t seed);

/* Region blocks. These functions are inline, as is everything that the
 * algorithms call in the region, so that each kind of manager gets its own
 * copy (WL__MACHINE). */

/* Blocks this large give their pages back to the kernel when freed, so that
 * a burst of long names leaves no memory behind (core/region.c). */
#define WL__RETURN_BYTES ((uint64_t)1 << 20)
void wl__return_pages(wl_manager_t *m, wl_off_t rec, uint64_t block);

/* How much of a new record wl__alloc zeroes: every record's fixed part. */
#define WL__ZERO_BYTES 256

static inline wl__block_t *wl__block(wl_manager_t *m, wl_off_t rec) {
  return WL__REC(m, rec - sizeof(wl__block_t), wl__block_t);
}

static inline int wl__class_of(uint64_t bytes) {
  uint64_t total = bytes + sizeof(wl__block_t);
  int shift;

  if (bytes > ((uint64_t)1 << (WL__NCLASSES + WL__MIN_SHIFT - 2)))
    return -1;
  shift = total <= ((uint64_t)1 << WL__MIN_SHIFT)
              ? WL__MIN_SHIFT
              : 64 - __builtin_clzll(total - 1);
  return shift - WL__MIN_SHIFT;
}

/* WL__MACHINE_ONLY(m, call, otherwise): a call into the machine-wide
 * manager's facilities (os/machine.h), made only for a machine-wide
 * manager, and compiled only into builds that have them, so that a build
 * without them links at any optimisation level. */
#if WL_MACHINE_MANAGER
#define WL__MACHINE_ONLY(m, call, otherwise) (WL__MACHINE(m) ? (call) : (otherwise))
#else
#define WL__MACHINE_ONLY(m, call, otherwise) (otherwise)
#endif

/* Commits the process-wide manager's region up to `upto` bytes and raises
 * the limit to it (core/region.c): 0, or WL_ENOMEM. */
int wl__commit(wl_manager_t *m, uint64_t upto);
/* Has the file system reserve a machine-wide manager's region up to `upto`
 * bytes, before anything is stored there, and raises the limit to it
 * (core/scope.c): 0, or WL_ENOMEM when it has no room left. */
int wl__reserve(wl_manager_t *m, uint64_t upto);
/* Makes room for the region to use `upto` bytes, whichever its kind. */
static inline int wl__grow(wl_manager_t *m, uint64_t upto) {
  return WL__MACHINE_ONLY(m, wl__reserve(m, upto), wl__commit(m, upto));
}
/* Under the mutex: raises the limit to what other processes have used
 * since, whose pages they reserved; 0, or WL_ECORRUPT for a region that
 * says it uses more than it has, or pages that no one reserved. */
WL__COLD int wl__cover(wl_manager_t *m);

/* Returns the offset of `bytes` of zeroed record space of the given kind,
 * or 0 when the region is full. Crash-safe order: a block is carved (its
 * header written, then `used` moved past it) or taken off its free list
 * before it gets its kind, and it gets its kind only once its record's fixed
 * part is zero, so a process killed anywhere in between leaves a FREE block
 * or a blank record, never a stale one that recovery could mistake for
 * live. */
static inline wl_off_t wl__alloc(wl_manager_t *m, uint32_t kind,
                                 uint64_t bytes) {
  wl__hdr_t *h = WL__HDR(m);
  int c = wl__class_of(bytes);
  uint64_t zero = bytes < WL__ZERO_BYTES ? bytes : WL__ZERO_BYTES;
  wl__block_t *b;
  wl_off_t rec;

  if (c < 0)
    return 0;
  rec = h->free[c];
  if (rec != 0) {
    h->free[c] = *WL__REC(m, rec, wl_off_t);
    b = wl__block(m, rec);
    if (WL__MACHINE(m) && (b->cls != (uint32_t)c || wl__is_corrupt(m)))
      return 0; /* a corrupt free list: reported, and nothing handed out */
  } else {
    uint64_t block = (uint64_t)1 << (c + WL__MIN_SHIFT), used = h->used;
    if (used > m->capacity || block > m->capacity - used)
      return 0;
    if (used + block > m->limit && wl__grow(m, used + block) != 0)
      return 0;
    rec = used + sizeof(wl__block_t);
    b = wl__block(m, rec);
    b->cls = (uint16_t)c;
    b->kind = WL__FREE;
    b->gen = 0;
    WL__PUBLISH(h->used, used + block);
  }
  WL__FAULT("alloc");
  memset(wl__rec(m, rec, zero), 0, zero);
  WL__PUBLISH(b->kind, kind);
  return rec;
}

static inline void wl__free(wl_manager_t *m, wl_off_t rec) {
  wl__hdr_t *h = WL__HDR(m);
  wl__block_t *b = wl__block(m, rec);
  uint16_t cls = b->cls;
  uint64_t block;

  if (WL__MACHINE(m)) {
    WL__HIDE(cls);
    if (cls >= WL__NCLASSES || wl__is_corrupt(m)) {
      wl__corrupt(m);
      return;
    }
  }
  block = (uint64_t)1 << (cls + WL__MIN_SHIFT);
  WL__PUBLISH(b->kind, WL__FREE);
  b->gen++;
  WL__FAULT("free");
  *WL__REC(m, rec, wl_off_t) = h->free[cls];
  h->free[cls] = rec;
  if (WL__UNLIKELY(block >= WL__RETURN_BYTES))
    wl__return_pages(m, rec, block);
}

/* Tells everyone that a machine-wide manager is corrupt, once, under its mutex:
 * marks its region corrupt for every process and wakes every agent it can
 * find in other processes, then wl__tell_agents (core/owners.c). */
WL__COLD void wl__announce(wl_manager_t *m);
/* Notifies every agent of this process, with or without the mutex: the
 * corruption reaches them through wl_agent_status(). */
WL__COLD void wl__tell_agents(wl_manager_t *m);

/* Takes and gives back the manager's mutex. Taking it repairs a shared
 * manager whose previous holder died (core/recover.c), covers what other
 * processes have used since (wl__cover), and refuses one that any process
 * has found corrupt; returns 0 or an error code, and then the mutex is not
 * held. */
WL__COLD int wl__lock_slow(wl_manager_t *m, int rc);
WL__COLD int wl__lock_check(wl_manager_t *m);
/* Whether m's mutex is the one in its file (os/machine.h) rather than the
 * process's own: a constant in each copy of the algorithms; other files,
 * which tests call with either kind of manager, ask m. */
#if WL_MACHINE_MANAGER
#define WL__FILE_MUTEX(m) (WL__MACHINE(m) && (m)->machine)
#else
#define WL__FILE_MUTEX(m) 0
#endif
static inline int wl__lock(wl_manager_t *m) {
  int rc;

  if (WL__MACHINE(m) && WL__UNLIKELY(wl__is_corrupt(m)))
    return WL_ECORRUPT;
  rc = WL__FILE_MUTEX(m) ? wl__os_file_mutex_lock(m)
                         : wl__os_mutex_lock(m->mutex);
#if WL_MACHINE_MANAGER
  if (WL__UNLIKELY(rc != 0))
    return wl__lock_slow(m, rc);
  if (WL__MACHINE(m) &&
      WL__UNLIKELY(__atomic_load_n(&WL__HDR(m)->corrupt, __ATOMIC_RELAXED) ||
                   WL__HDR(m)->used > m->limit))
    return wl__lock_check(m);
  return 0;
#else
  return rc;
#endif
}

static inline void wl__unlock(wl_manager_t *m) {
#if WL_MACHINE_MANAGER
  if (WL__MACHINE(m) && WL__UNLIKELY(wl__is_corrupt(m) && !m->announced))
    wl__announce(m);
#endif
  if (WL__FILE_MUTEX(m))
    wl__os_file_mutex_unlock(m);
  else
    wl__os_mutex_unlock(m->mutex);
}
int wl__recover(wl_manager_t *m);
/* How much memory wl__recover works in, for a region of `capacity` bytes:
 * reserved when a machine-wide manager is opened (core/scope.c), so that a
 * repair never asks for memory that it may not get. */
uint64_t wl__work_size(uint64_t capacity);

/* Wakes an agent of another process (core/owners.c). */
void wl__wake(wl_manager_t *m, wl_off_t agent);
/* This process's owner record, under the mutex (core/owners.c). Opening
 * starts its death watch; closing stops it, so the sweeper must be stopped
 * first (wl__os_watch_stop_sweeper, without the mutex). */
int wl__owner_open(wl_manager_t *m);
void wl__owner_close(wl_manager_t *m);
/* Ends, as spec 2.6 says, every agent of every owner that has died. */
void wl__sweep(wl_manager_t *m);
/* Under the mutex: each owner watches the next, the last the first; `all`
 * tells every watcher again, after a recovery. */
void wl__ring(wl_manager_t *m, int all);

/* A 64-bit finalizer, for seeds and hashes. */
static inline uint64_t wl__fmix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

static inline uint64_t wl__rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

/* A name's hash: its UTF-16 code units with the region's seed, which every
 * user of the region shares. */
static inline uint64_t wl__hash(wl_manager_t *m, const uint16_t *units,
                                size_t len) {
  const unsigned char *p = (const unsigned char *)units;
  size_t bytes = len * sizeof(uint16_t);
  uint64_t h = WL__HDR(m)->seed ^ (bytes * 0x9e3779b97f4a7c15ULL);
  uint64_t k;

  for (; bytes >= 8; bytes -= 8, p += 8) {
    memcpy(&k, p, 8);
    k *= 0x87c37b91114253d5ULL;
    k = wl__rotl(k, 31);
    k *= 0x4cf5ad432745937fULL;
    h ^= k;
    h = wl__rotl(h, 27) * 5 + 0x52dce729;
  }
  k = 0;
  if (bytes > 0)
    memcpy(&k, p, bytes);
  h ^= k * 0x87c37b91114253d5ULL;
  return wl__fmix(h);
}

/* A name's units, checked against the region; NULL if they are outside it.
 * Their count is read once, into *len: the region may change meanwhile, and
 * the count checked is the count the caller uses. */
static inline const uint16_t *wl__units(wl_manager_t *m, wl_off_t n,
                                        size_t *len) {
  uint64_t units = WL__REC(m, n, wl__name_t)->len;

  if (WL__MACHINE(m))
    WL__HIDE(units);
  *len = (size_t)units;
  if (WL__MACHINE(m) && units > m->limit / sizeof(uint16_t)) {
    wl__corrupt(m);
    return NULL;
  }
  return wl__span(m, n + offsetof(wl__name_t, units), units * sizeof(uint16_t));
}

/* The algorithms (core/algorithms-inl.h, with the table of names, core/names-inl.h) as
 * compiled for one kind of manager; the public functions dispatch once to
 * the manager's kind (core/api.c). */
typedef struct {
  int (*agent_init)(wl_manager_t *m, wl_agent_t *agent, const char *client_id,
                    size_t client_id_len, wl_notify_cb notify);
  void (*agent_close)(wl_agent_t *agent);
  wl_request_t *(*agent_next)(wl_agent_t *agent, unsigned *events);
  int (*request)(wl_agent_t *agent, wl_request_t *req, const uint16_t *name,
                 size_t name_len, wl_mode_t mode, unsigned flags);
  int (*release)(wl_request_t *req);
  int (*abort)(wl_request_t *req);
  int (*agent_waits)(wl_agent_t *agent);
  int (*snapshot)(wl_manager_t *m, wl_snapshot_t *snap);
  /* The snapshot's copy, under the mutex, storing nothing into the region
   * (wl_scope_peek): 0, WL_ENOMEM, or WL_ECORRUPT (m marked so). */
  int (*snapshot_copy)(wl_manager_t *m, wl_snapshot_t *snap);
  /* For recovery, sweeps and tests, under the mutex. Ends an agent's
   * requests and locks and frees its record (spec 2.6); processes a name's
   * queue (4.4); finds a name; puts a name record (its hash and units set) in
   * the table: 0 or WL_ENOMEM. */
  void (*close_agent)(wl_manager_t *m, wl_off_t a);
  void (*process)(wl_manager_t *m, wl_off_t n);
  /* Takes every held lock of a name for a steal (4.1 step 6.2), and wakes
   * an agent's thread: its notify callback in this process, its FIFO in
   * another. */
  void (*steal)(wl_manager_t *m, wl_off_t n);
  void (*notify)(wl_manager_t *m, wl_off_t a);
  wl_off_t (*names_find)(wl_manager_t *m, uint64_t hash, const uint16_t *units,
                         size_t len);
  int (*names_link)(wl_manager_t *m, wl_off_t n);
} wl__ops_t;

extern const wl__ops_t wl__process_ops;
extern const wl__ops_t wl__machine_ops;

static inline const wl__ops_t *wl__ops(const wl_manager_t *m) {
#if WL_MACHINE_MANAGER
  return m->machine ? &wl__machine_ops : &wl__process_ops;
#else
  (void)m;
  return &wl__process_ops;
#endif
}

/* How many names the manager holds; for tests that check nothing leaks. */
size_t wl__name_count(wl_manager_t *m);

/* |q| of a request's order key (wl__req_t.qkey), read from the region:
 * without the overflow of -q for a forged INT64_MIN. */
static inline uint64_t wl__order_of(int64_t q) {
  return q < 0 ? 0 - (uint64_t)q : (uint64_t)q;
}

#endif
