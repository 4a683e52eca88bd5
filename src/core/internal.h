/* Core internals shared by the core's own files and its C tests: the
 * region's layout (its header and the records in it) and the manager. */
#ifndef WL_INTERNAL_H
#define WL_INTERNAL_H

#include <string.h>

#include "../os/os.h"

/* GCC's builtins (atomics, branch hints, bit scans) are used throughout:
 * every compiler the package is built with (GCC, Clang, Zig's and
 * MinGW's) has them. On Windows the package is prebuilt. */
#if !defined(__GNUC__)
#error "web-locks builds with GCC or Clang"
#endif

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
  WL__VACANT = 6 /* an owner record no process uses (os/linux/life.c) */
};

/* A process that has a machine-wide manager open (os/linux/life.c). It holds an OFD
 * write lock on one byte of the file, at WL__LIVE_BASE + its record's
 * offset, which the kernel releases when the process dies, once its memory
 * is torn down. Sooner than that, the kernel marks `life` (a robust futex of
 * its watcher thread) and wakes the owner that watches it (os/linux/watch.c).
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

/* The longest path of a machine-wide manager's file. */
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
  wl__link_t olink;  /* in its owner's agents (a machine-wide manager's) */
  /* Its wl_agent_t: an index into its process's table (wl_manager_t.agents);
   * in the process-wide manager, the address (see HANDLE_OF, core/algorithms-inl.h). */
  uint64_t local;
  wl_off_t owner;    /* its owner's record; 0 in the process-wide manager */
  /* Its FIFO's number, drawn at random (os/linux/wake.c); 0 while it has
   * none, and in the process-wide manager. */
  uint64_t wake;
  uint32_t closing;  /* wl_agent_close() runs: no mail, no notify */
  uint32_t client_id_len;
  char client_id[WL_CLIENT_ID_MAX];
} wl__agent_t;

/* A request's state. IDLE: made (not yet queued), or unavailable. */
enum { WL__IDLE = 0, WL__QUEUED = 1, WL__HELD = 2, WL__STOLEN = 3 };

/* The ground truth of a machine-wide manager: its request records. Every list
 * that links them can be rebuilt from their state, names, agents and keys
 * (core/recover.c), which are written before the state that publishes them. */
typedef struct {
  wl__link_t qlink; /* in its name's queue when queued, held list when held */
  wl__link_t alink; /* in its agent's queued, held or stolen list */
  wl__link_t mlink; /* in its agent's mail when it has events */
  wl_off_t agent;
  wl_off_t name;
  /* Its wl_request_t: an index into its agent's table (wl_agent_t.requests);
   * in the process-wide manager, the address. */
  uint64_t local;
  /* Its stamp when made, negated for a steal: its place in its name's queue
   * (a steal goes first), and as |qkey| in its agent's (request order). */
  int64_t qkey;
  /* Its fencing token: the manager's grant counter when it was granted,
   * so also its place in the held set (grant order); 0 until then. */
  uint64_t token;
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
  /* The last fencing token handed out, one per grant. Released grants leave
   * no record to derive it from: recovery keeps it, and only raises it. */
  uint64_t grants;
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
  wl__link_t owners; /* of a machine-wide manager */
  /* Owner records no process uses, kept for owners only: a watcher that
   * still acts on one it watched writes only into an owner's life word. */
  wl__link_t vacant;
  /* Set once any process finds the region corrupt: every process then
   * refuses it (WL_ECORRUPT), never working on lists another found bad. */
  uint32_t corrupt;
} wl__hdr_t;

/* An open write end of another process's agent's FIFO (os/linux/wake.c). */
#define WL__WAKERS 32
typedef struct {
  uint64_t wake; /* the FIFO's number: no other agent ever has it */
  int fd1;       /* its descriptor + 1; 0 when none */
} wl__waker_t;

struct wl_manager_s {
  wl__os_mutex_t *mutex; /* the process's own, or in a shared file */
  char *base;             /* the region */
  /* Of types that no store into the region (uint64_t, uint32_t) can alias,
   * so that the compiler keeps them in registers across those stores. */
  /* Its size, as checked when it was mapped. */
  unsigned long long capacity;
  /* How much of it may be touched: for the process-wide manager, what the
   * OS layer has committed (all of it, but on Windows: wl__commit); for a
   * shared one, what this process has had reserved (wl__reserve),
   * which covers every block, so that no access under the mutex, whatever
   * offset the file holds, faults on a page a full file system could not
   * give. Raised under the mutex. */
  unsigned long long limit;
  unsigned long long steps; /* capacity / 32 + 2: see WL__STEPS */
  /* An offset pointed outside it, or the mutex was found unusable. Set
   * with or without the mutex, read without it, by any thread (a sweeper's
   * included): only through wl__mark_corrupt and wl__is_corrupt. */
  _Bool corrupt;
  _Bool announced; /* the corruption was told to the agents (wl__announce) */
  /* Mapped by other processes too: its offsets are checked. The process's
   * own region is written by this code alone and is not. */
  _Bool machine;
  uint64_t scratch[64];   /* what a bad offset reads and writes instead */
  /* This process's owner record (0 in the process-wide manager): it tells
   * its agents, notified directly, from other processes', woken through
   * their FIFOs (os/linux/wake.c). */
  wl_off_t self;
  /* This process's agents of a machine-wide manager, by the index their records
   * carry. Changed under the manager's mutex (a corrupt manager's agent
   * leaving waits for it too) and agents_mutex; read under either: notify
   * holds the mutex, and a corrupt manager's agents are told under
   * agents_mutex alone (wl__tell_agents). */
  wl__table_t agents;
  wl__os_mutex_t agents_mutex;
  int probe_fd; /* a second open file, to test other owners' locks */
  struct wl__watch_s *watcher; /* its watcher and sweeper threads */
  /* Its file's permission bits and group (read once, when it was opened),
   * for the agents' FIFOs. */
  unsigned mode;
  uint32_t gid;
  char path[WL__PATH_MAX];
  /* A machine-wide manager's mapping of its file (os/linux/file.c). */
  void *map;
  uint64_t map_size;
  /* Its repair's work memory, reserved with the mapping (wl__work_size). */
  void *work;
  uint64_t work_size;
  int fd;
  wl__waker_t wakers[WL__WAKERS]; /* used under the mutex */
};

#define WL__HDR(m) ((wl__hdr_t *)(m)->base)
#define wl__off_of(m, ptr) ((wl_off_t)((char *)(ptr) - (m)->base))

/* Every offset read from a shared region goes through here. One that points
 * outside the region (a corrupt or hostile file) marks the manager corrupt
 * and yields a blank scratch record instead, so that the operation ends
 * without a stray access and reports WL_ECORRUPT. */
#define WL__COLD __attribute__((cold, noinline))
#define WL__UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Keeps a value read from a shared region as read: the compiler may not read
 * the region again for it, where another process may have changed it since
 * it was checked (as the Linux kernel's OPTIMIZER_HIDE_VAR). Every value
 * that a check lets through is read once, into a variable, and hidden. */
#define WL__HIDE(v) __asm__("" : "+r"(v))

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

/* One unsigned compare: off in [16, limit - bytes] (a region is always
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
 * manager's facilities (the os/linux/ files), made only for a machine-wide
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
 * (os/linux/file.c): 0, or WL_ENOMEM when it has no room left. */
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
 * find in other processes, then wl__tell_agents (os/linux/life.c). */
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
static inline int wl__lock(wl_manager_t *m) {
  int rc;

  if (WL__MACHINE(m) && WL__UNLIKELY(wl__is_corrupt(m)))
    return WL_ECORRUPT;
  rc = wl__os_mutex_lock(m->mutex);
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
  wl__os_mutex_unlock(m->mutex);
}
int wl__recover(wl_manager_t *m);
/* How much memory wl__recover works in, for a region of `capacity` bytes:
 * reserved when a machine-wide manager is opened (os/linux/file.c), so that a
 * repair never asks for memory that it may not get. */
uint64_t wl__work_size(uint64_t capacity);
/* Marks a machine-wide manager's robust mutex consistent again, once its state is
 * repaired (os/linux/file.c). */
void wl__mutex_consistent(wl_manager_t *m);
/* A number no one can predict, never 0 (no FIFO), or an error code: for the
 * names of FIFOs and of a file being made (os/linux/wake.c). */
int wl__draw(uint64_t *number);
/* An agent's FIFO (os/linux/wake.c), named by a number drawn at random and
 * kept in its record (`wake`), which no other agent has: made and opened
 * for reading (the fd, or an error code; the number in *wake, 0 if none),
 * closed and removed, and written to wake its thread. */
int wl__wake_open(wl_manager_t *m, wl_off_t agent, uint64_t *wake);
void wl__wake_close(wl_manager_t *m, uint64_t wake, int fd);
void wl__wake(wl_manager_t *m, wl_off_t agent);
/* FIFOs of this process's user beside the file, left by agents that died:
 * up to max numbers of those that no process reads, gathered without the
 * mutex; then, under it, those that still have no reader are removed. */
#define WL__ORPHANS 64
unsigned wl__wake_orphans(const wl_manager_t *m, uint64_t *wake,
                          unsigned max);
void wl__wake_reap(wl_manager_t *m, const uint64_t *wake, unsigned n);
/* Closes the write ends that wl__wake keeps open. */
void wl__wakers_close(wl_manager_t *m);

/* This process's owner record, under the mutex (os/linux/life.c). Opening starts
 * its watcher (wl__watch_start); closing stops it, so the sweeper must be
 * stopped first (wl__watch_stop_sweeper, without the mutex). */
int wl__owner_open(wl_manager_t *m);
void wl__owner_close(wl_manager_t *m);
/* Ends, as spec 2.6 says, every agent of every owner that has died. */
void wl__sweep(wl_manager_t *m);

/* Prompt notice of deaths (os/linux/watch.c). Starts, under the mutex, the
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

#endif
