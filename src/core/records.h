/* The layout of a manager's region (its header and the records in it) and
 * the manager: what the core and the OS layer share. Types and constants
 * only: nothing here calls anything. */
#ifndef WL_RECORDS_H
#define WL_RECORDS_H

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
  WL__VACANT = 6 /* an owner record no process uses (core/owners.c) */
};

/* A process that has a machine-wide manager open (core/owners.c). Its proof
 * of life is the OS layer's (os/machine.h: a lock on a byte of the file
 * named by the record's offset). Its death watch uses watch and the words
 * after it, which are the OS family's: on Linux, `life` is a robust futex
 * of its watcher thread, which the kernel marks when the process dies, and
 * `bell` is rung when watch changes (os/linux/watch.c); in the POSIX family
 * `wake` names its watcher's FIFO, written to when watch changes
 * (os/posix/watch.c). Other processes' watchers use them without the mutex:
 * they are read and written with atomics only. */
typedef struct {
  wl__link_t link;   /* in the region's owners, or vacant records */
  wl__link_t agents; /* its agents */
  wl_off_t watch;    /* the owner whose life its watcher watches, or 0 */
#ifndef _WIN32
  uint32_t pid; /* its process's, shown in snapshots (never trusted) */
  uint32_t pad;
#endif
#ifdef _WIN32
  /* Its process's identity, pid and creation time (0: none), which names
   * it to the death watch only: its proof of life is a byte lock
   * (os/win/life.c). `wake` names its watcher's bell, an event set when
   * watch changes (os/win/watch.c). */
  uint32_t pid;
  uint32_t pad;
  uint64_t created;
  uint64_t wake;
#else
  union {
    struct {
      uint32_t life; /* its watcher's TID, or FUTEX_OWNER_DIED; 0: none */
      uint32_t bell; /* bumped, and woken, whenever watch changes */
    };
    uint64_t wake; /* its watcher's FIFO's number; 0: none */
  };
#endif
} wl__owner_t;

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
  /* Its FIFO's number, drawn at random (os/unix/wake.c); 0 while it has
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
  /* Its stamp when made (wl__stamp), negated for a steal: its place in its
   * name's queue (a steal goes first), as |qkey| in its agent's (request
   * order), and its serial (wl_request_serial). */
  int64_t qkey;
  /* Its fencing token: the manager's grant counter when it was granted,
   * so also its place in the held set (grant order); 0 until then. */
  uint64_t token;
  uint64_t mkey; /* place in its agent's mail (a stamp) */
  /* The serial of its agent's lock inside whose hold it was made, or 0
   * (wl_request_t.parent): shown in snapshots only, never trusted. Its size
   * keeps the record in the 128-byte class, which has no room left. */
  uint64_t parent;
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

/* Order keys (wl__stamp) stay below 2^53: serials reach JS as numbers, and
 * a key never turns negative as an int64. A file that says more is corrupt. */
#define WL__STAMP_MAX ((uint64_t)1 << 53)

/* The region's header, at offset 0. */
typedef struct {
  uint64_t size; /* bytes the region may use */
  uint64_t used; /* bytes handed out so far, from the start */
  wl_off_t free[WL__NCLASSES];
  uint64_t seed;  /* of the names' hash, shared by every user of the region */
  uint64_t stamp; /* the last order key handed out (wl__stamp) */
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

/* An open write end of another process's agent's wake-up: a FIFO
 * (os/unix/wake.c) or an event (os/win/wake.c). */
#define WL__WAKERS 32
typedef struct {
  uint64_t wake; /* the wake-up's number: no other agent ever has it */
#ifdef _WIN32
  void *event; /* its HANDLE, or NULL */
#else
  int fd1; /* its descriptor + 1; 0 when none */
#endif
} wl__waker_t;

/* A machine-wide manager's file, as the OS opened it: a descriptor, or on
 * Windows a HANDLE. */
#ifdef _WIN32
typedef void *wl__os_fd_t;
#define WL__OS_NO_FD NULL
#else
typedef int wl__os_fd_t;
#define WL__OS_NO_FD (-1)
#endif

struct wl_manager_s {
  wl__os_mutex_t *mutex; /* the process-wide manager's */
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
   * their FIFOs (os/unix/wake.c). */
  wl_off_t self;
  /* This process's agents of a machine-wide manager, by the index their records
   * carry. Changed under the manager's mutex (a corrupt manager's agent
   * leaving waits for it too) and agents_mutex; read under either: notify
   * holds the mutex, and a corrupt manager's agents are told under
   * agents_mutex alone (wl__tell_agents). */
  wl__table_t agents;
  wl__os_mutex_t agents_mutex;
  /* A machine-wide manager's mutex, in its file, and the OS layer's state
   * of that file that this process's handles of it share, where its family
   * keeps one (os/machine.h). */
  struct wl__os_file_mutex_s *file_mutex;
  struct wl__os_local_s *local;
#ifndef _WIN32
  int probe_fd; /* a second open file, to test other owners' locks (Linux) */
#endif
  struct wl__watch_s *watcher; /* its watcher and sweeper threads */
  /* Its file's permission bits and group (read once, when it was opened),
   * for the agents' FIFOs. */
  unsigned mode;
  uint32_t gid;
  char path[WL__PATH_MAX];
  /* The temporary name of a file being made, until it is in place (the OS
   * layer's; empty where it has none). */
  char tmp[WL__PATH_MAX + 32];
  /* A machine-wide manager's mapping of its file (os/unix/file.c). */
  void *map;
  uint64_t map_size;
  /* Its repair's work memory, reserved with the mapping (wl__work_size). */
  void *work;
  uint64_t work_size;
  wl__os_fd_t fd;
  wl__waker_t wakers[WL__WAKERS]; /* used under the mutex */
  /* Under the mutex, while wl_request() runs: the time (us) it read before
   * taking it, which its stamps use (wl__stamp); else 0. */
  uint64_t now;
};

#define WL__HDR(m) ((wl__hdr_t *)(m)->base)
#define wl__off_of(m, ptr) ((wl_off_t)((char *)(ptr) - (m)->base))

/* Rare paths, out of the way of the common ones. */
#define WL__COLD __attribute__((cold, noinline))
#define WL__UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Keeps a value read from a shared region as read: the compiler may not read
 * the region again for it, where another process may have changed it since
 * it was checked (as the Linux kernel's OPTIMIZER_HIDE_VAR). Every value
 * that a check lets through is read once, into a variable, and hidden. */
#define WL__HIDE(v) __asm__("" : "+r"(v))

#endif
