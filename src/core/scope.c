/* A machine-wide manager: its region in a file that every process of the
 * scope maps (by default in /dev/shm). The file's first page describes it
 * and holds the manager's mutex (of every process, given up when its
 * holder dies); the region follows. The file itself, its mutex, proof of
 * life, wake-ups and the death watch come from the OS layer (os/machine.h).
 *
 * Creating: the first process makes the file whole (sized, initialised,
 * marked ready) where no one else can see it, then puts it in place, which
 * fails if another process's came first: then it opens that one. So a file
 * at the path is always whole, unless someone else wrote it, and a file
 * that this code did not make whole is never written: one not marked ready
 * (all zero, say, as a user's disk image begins) is refused, never
 * initialised. Other copies and versions of the package are assumed to do
 * the same; one of another layout is refused (ELAYOUT). A file is never
 * trusted for its name alone: it must be of this layout and of the size it
 * says (and the OS layer checks whose it is and that it has one name).
 *
 * The file is sparse: every page is reserved before it is first stored to,
 * so that a full file system (a container's small /dev/shm) is a full
 * manager, never a SIGBUS (wl__reserve).
 *
 * Each open handle is an owner (core/owners.c) whose death other owners
 * notice at once (the death watch): joining starts its watch, closing
 * stops it. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define WL__MAGIC "web-lock"
#define WL__PAGE 4096
/* How much of the region is reserved at a time. */
#define WL__RESERVE_STEP ((uint64_t)64 << 10)
#define WL__READY 0x52454459u /* "READY" */

/* What a process must agree on to share a file: the layout of the records
 * and of the mutex, which is the OS family's (os/machine.h): a process of
 * the other family never takes this one's. On Linux, the C library too:
 * glibc's and musl's mutexes are the same size on x86-64 but keep their
 * futex word in different places (containers of both may share /dev/shm);
 * the POSIX family's mutex is its own words, whatever the C library. */
#if defined(_WIN32)
#define WL__LIBC 4u
#elif WL_OS_POSIX
#define WL__LIBC 3u
#elif defined(__GLIBC__)
#define WL__LIBC 1u
#else
#define WL__LIBC 2u
#endif
#define WL__ABI                                                                \
  ((uint32_t)sizeof(wl__os_file_mutex_t) | ((uint32_t)sizeof(void *) << 8) |   \
   ((uint32_t)sizeof(wl__req_t) << 16) | (WL__LIBC << 24))

typedef struct {
  char magic[8];
  uint32_t layout;
  uint32_t abi;
  uint64_t size;       /* of the whole file */
  uint64_t region_off; /* where the region starts */
  uint32_t ready;      /* WL__READY once initialised */
  uint32_t pad;
  /* At offset 40: test/machine-full-crash.test.js reads its holder there. */
  wl__os_file_mutex_t mutex;
} wl__file_t;

_Static_assert(offsetof(wl__file_t, mutex) == 40,
               "test/machine-full-crash.test.js reads the mutex at offset 40");

static void wl__map_region(wl_manager_t *m) {
  m->base = (char *)m->map + WL__PAGE;
  /* The region's bound comes from the mapping, never from the file; what
   * may be touched of it, from what is reserved (none yet). */
  m->capacity = m->map_size - WL__PAGE;
  m->limit = 0;
  m->steps = m->capacity / 32 + 2;
  m->corrupt = 0;
  m->machine = 1;
  m->file_mutex = &((wl__file_t *)m->map)->mutex;
}

/* Initialises the file's first page and its region. */
static int wl__init_file(wl__file_t *f, uint64_t size) {
  wl_manager_t tmp;
  uint64_t seed;
  int rc;

  memset(f, 0, sizeof(*f));
  memset(&tmp, 0, sizeof(tmp));
  if ((rc = wl__os_file_mutex_init(&f->mutex)) != 0)
    return rc;
  memcpy(f->magic, WL__MAGIC, sizeof(f->magic));
  f->layout = WL_LAYOUT;
  f->abi = WL__ABI;
  f->size = size;
  f->region_off = WL__PAGE;
  /* Unpredictable to other users, who may choose the names. */
  if ((rc = wl__os_draw(&seed)) != 0 ||
      (rc = wl__region_init(&tmp, (char *)f + WL__PAGE, size - WL__PAGE,
                            seed)) != 0)
    return rc;
  /* Everything above reaches the file before any process sees it ready. */
  __atomic_store_n(&f->ready, WL__READY, __ATOMIC_RELEASE);
  return 0;
}

/* Checks what the file's first page says, before anything in it is used. */
static int wl__check_header(const char *path, const wl__file_t *f,
                            uint64_t file_size, char *err, size_t errlen) {
  if (memcmp(f->magic, WL__MAGIC, sizeof(f->magic)) != 0)
    return wl__say(err, errlen, WL_ECORRUPT,
                   "%s is not a web-locks manager file", path);
  if (f->layout != WL_LAYOUT)
    return wl__say(err, errlen, WL_ELAYOUT,
                   "%s has web-locks layout %u; this version of web-locks "
                   "uses layout %u",
                   path, f->layout, WL_LAYOUT);
  if (f->abi != WL__ABI)
    return wl__say(err, errlen, WL_ELAYOUT,
                   "%s was made for another machine architecture, C "
                   "library or build of web-locks (ABI %#x, this process "
                   "has %#x)",
                   path, f->abi, WL__ABI);
  if (__atomic_load_n(&f->ready, __ATOMIC_ACQUIRE) != WL__READY)
    return wl__say(err, errlen, WL_ECORRUPT,
                   "%s is not a whole web-locks manager file (not marked "
                   "ready): web-locks never writes a file it did not make",
                   path);
  if (f->size != file_size || f->region_off != WL__PAGE ||
      file_size < 2 * WL__PAGE)
    return wl__say(err, errlen, WL_ECORRUPT,
                   "%s is corrupt: it says it is %llu bytes with its region "
                   "at %llu, and it is %llu bytes",
                   path, (unsigned long long)f->size,
                   (unsigned long long)f->region_off,
                   (unsigned long long)file_size);
  return 0;
}

/* Checks the region's header against the region's size. */
static int wl__check_region(const char *path, const wl__hdr_t *h,
                            uint64_t size, char *err, size_t errlen) {
  int c;

  if (h->size != size || h->used > size || h->used < sizeof(*h) ||
      h->stamp >= WL__STAMP_MAX)
    return wl__say(err, errlen, WL_ECORRUPT,
                   "%s is corrupt: its region header is inconsistent", path);
  for (c = 0; c < WL__NCLASSES; c++) {
    if (h->free[c] != 0 && (h->free[c] >= h->used || h->free[c] < sizeof(*h)))
      return wl__say(err, errlen, WL_ECORRUPT,
                     "%s is corrupt: a free list points outside the region",
                     path);
  }
  return 0;
}

static uint64_t wl__round_up(uint64_t n, uint64_t step) {
  return (n + step - 1) & ~(step - 1);
}

/* By steps, so that few allocations make a system call; on a file system
 * too full for a step, the pages asked for. */
int wl__reserve(wl_manager_t *m, uint64_t upto) {
  uint64_t end = wl__round_up(upto, WL__RESERVE_STEP);
  uint64_t least = wl__round_up(upto, WL__PAGE);

  if (upto <= m->limit)
    return 0;
  if (upto > m->capacity)
    return WL_ENOMEM;
  if (end > m->capacity)
    end = m->capacity;
  if (least > end)
    least = end;
  return wl__os_file_reserve(m, end) == 0 || wl__os_file_reserve(m, least) == 0
             ? 0
             : WL_ENOMEM;
}

WL__COLD int wl__cover(wl_manager_t *m) {
  return wl__reserve(m, WL__HDR(m)->used) == 0 ? 0 : WL_ECORRUPT;
}

/* Makes the file whole, then puts it at path: 0, or -EEXIST if a file is
 * there already. */
static int wl__create(wl_manager_t *m, const char *path, uint64_t size,
                      unsigned mode, char *err, size_t errlen) {
  int rc = wl__os_file_create(m, path, size, mode, err, errlen);

  if (rc != 0)
    return rc;
  wl__map_region(m);
  if (wl__reserve(m, sizeof(wl__hdr_t)) != 0)
    rc = wl__say(err, errlen, -ENOSPC, "cannot create %s: %s", path,
                 strerror(ENOSPC));
  else if ((rc = wl__init_file(m->map, size)) != 0)
    wl__say(err, errlen, rc, "cannot initialise %s", path);
  else
    rc = wl__os_file_publish(m, path, err, errlen);
  if (rc != 0) {
    wl__os_file_drop(m);
    return rc;
  }
  m->mode = mode;
  return 0;
}

/* Opens an existing file; -ENOENT if it went away meanwhile. */
static int wl__attach(wl_manager_t *m, const char *path, unsigned mode,
                      char *err, size_t errlen) {
  int rc = wl__os_file_attach(m, path, mode, err, errlen);
  const wl__file_t *f;

  if (rc != 0)
    return rc;
  wl__map_region(m);
  f = m->map;
  if ((rc = wl__check_header(path, f, m->map_size, err, errlen)) != 0 ||
      (rc = wl__check_region(path, WL__HDR(m), f->size - WL__PAGE, err,
                             errlen)) != 0) {
    wl__os_file_drop(m);
    return rc;
  }
  /* What other processes have used so far, before this one stores there. */
  if (wl__reserve(m, WL__HDR(m)->used) != 0) {
    wl__os_file_drop(m);
    return wl__say(err, errlen, -ENOSPC, "cannot open %s: %s", path,
                   strerror(ENOSPC));
  }
  return 0;
}

/* Joins the manager as a live owner, and ends the agents of dead ones. */
static int wl__join(wl_manager_t *m, const char *path, char *err,
                    size_t errlen) {
  uint64_t orphans[WL__ORPHANS];
  unsigned norphans;
  int rc = wl__os_file_probe(m, path, err, errlen);

  if (rc != 0)
    return rc;
  norphans = wl__os_wake_orphans(m, orphans, WL__ORPHANS);
  if ((rc = wl__lock(m)) == 0) {
    rc = wl__owner_open(m);
    if (rc == 0) {
      wl__sweep(m);
      wl__os_wake_reap(m, orphans, norphans);
    }
    wl__unlock(m);
  }
  if (rc != 0)
    return wl__say(err, errlen, rc, "cannot join the manager in %s: %s", path,
                   rc == WL_ENOMEM     ? "it is full"
                   : rc == WL_ECORRUPT ? "its state is corrupt"
                                       : strerror(-rc));
  return 0;
}

/* Created by us, or by another process between our two attempts. */
static int wl__create_or_attach(wl_manager_t *m, const char *path,
                                uint64_t size, unsigned mode, char *err,
                                size_t errlen) {
  int rc, tries;

  for (tries = 0; tries < 8; tries++) {
    rc = wl__create(m, path, size, mode, err, errlen);
    if (rc != -EEXIST)
      return rc;
    rc = wl__attach(m, path, mode, err, errlen);
    if (rc != -ENOENT)
      return rc;
  }
  return wl__say(err, errlen, -EAGAIN, "%s keeps appearing and disappearing",
                 path);
}

/* A manager of the file at path (shorter than WL__PATH_MAX), not yet
 * opened: no descriptor yet. NULL when out of memory. */
static wl_manager_t *wl__manager_new(const char *path) {
  wl_manager_t *m = calloc(1, sizeof(*m));

  if (m == NULL)
    return NULL;
  strcpy(m->path, path);
  m->fd = WL__OS_NO_FD;
#ifndef _WIN32
  m->probe_fd = -1;
#endif
  return m;
}

int wl_scope_open(const char *path, uint64_t size, unsigned mode,
                  wl_manager_t **out, char *err, size_t errlen) {
  wl_manager_t *m;
  int rc;

  if (size < 2 * WL__PAGE || size % WL__PAGE != 0 || !WL__MODE_OK(mode))
    return wl__say(err, errlen, WL_EINVAL,
                   "a manager file needs a size of at least %d bytes, in "
                   "whole pages, and permission bits 0600, 0660, 0606 or "
                   "0666",
                   2 * WL__PAGE);
  if (strlen(path) >= WL__PATH_MAX)
    return wl__say(err, errlen, WL_EINVAL, "the path %s is too long", path);
  m = wl__manager_new(path);
  if (m == NULL)
    return wl__say(err, errlen, WL_ENOMEM, "out of memory");
  if (wl__os_mutex_init(&m->agents_mutex) != 0) {
    free(m);
    return wl__say(err, errlen, WL_ENOMEM, "out of memory");
  }
  rc = wl__create_or_attach(m, path, size, mode, err, errlen);
  if (rc == 0) {
    /* Reserved before joining (which may repair), so that no repair asks
     * for memory it may not get: a process that cannot have it cannot open
     * the scope. */
    if (wl__os_work_map(m, wl__work_size(m->capacity)) != 0)
      rc = wl__say(err, errlen, WL_ENOMEM,
                   "cannot open %s: no memory for its repair after a crash",
                   path);
    else if ((rc = wl__join(m, path, err, errlen)) != 0)
      wl__os_work_unmap(m);
    if (rc != 0)
      wl__os_file_close(m);
  }
  if (rc != 0) {
    wl__os_mutex_destroy(&m->agents_mutex);
    free(m);
    return rc;
  }
  *out = m;
  return 0;
}

/* A look (wl_scope_peek): its manager, handle of no owner, and its copy. */
typedef struct {
  wl_manager_t *m;
  wl_snapshot_t *snap;
  int rc;
} wl__look_t;

/* Whether owner o's process lives, as a sweep would judge it (core/owners.c):
 * an entry with no owner has none. */
static int wl__alive(wl_manager_t *m, wl_off_t o) {
  const wl__owner_t *rec;

  if (o == 0)
    return 0;
  rec = WL__REC(m, o, wl__owner_t);
  return !wl__os_life_ended(rec) && wl__os_life_held(m, o);
}

/* Owners already judged during one look: a system call per owner, not per
 * entry, while the look holds everyone's mutex. */
#define WL__ALIVE_CACHE 64
typedef struct {
  wl_off_t owner; /* 0: empty */
  int alive;
} wl__alive_t;

static int wl__alive_cached(wl_manager_t *m, wl__alive_t *cache, wl_off_t o) {
  wl__alive_t *slot = &cache[(o >> WL__MIN_SHIFT) % WL__ALIVE_CACHE];

  if (o != 0 && slot->owner == o)
    return slot->alive;
  slot->owner = o;
  slot->alive = wl__alive(m, o);
  return slot->alive;
}

/* Under the mutex, which the OS layer holds for it. What others used of
 * the region was reserved by them: a look only reads. */
static void wl__look(void *arg) {
  wl__look_t *l = arg;
  wl_manager_t *m = l->m;
  wl__hdr_t *h = WL__HDR(m);
  uint64_t used = h->used;
  wl__alive_t cache[WL__ALIVE_CACHE];
  size_t i;

  WL__HIDE(used);
  /* As wl__check_region checks it: it may have changed since. */
  if (__atomic_load_n(&h->corrupt, __ATOMIC_RELAXED) || used > m->capacity ||
      used < sizeof(*h)) {
    l->rc = WL_ECORRUPT;
    return;
  }
  m->limit = used;
  if ((l->rc = wl__machine_ops.snapshot_copy(m, l->snap)) != 0)
    return;
  memset(cache, 0, sizeof(cache));
  for (i = 0; i < l->snap->nheld; i++)
    l->snap->held[i].alive = wl__alive_cached(m, cache, l->snap->held[i].owner);
  for (i = 0; i < l->snap->npending; i++)
    l->snap->pending[i].alive =
        wl__alive_cached(m, cache, l->snap->pending[i].owner);
  if (wl__is_corrupt(m)) {
    wl_snapshot_free(l->snap);
    l->rc = WL_ECORRUPT;
  }
}

/* The sentence for a look that failed, and its code. */
static int wl__look_failed(const char *path, int rc, char *err,
                           size_t errlen) {
  switch (rc) {
  case WL__EOWNERDEAD:
    return wl__say(err, errlen, WL_EREPAIR,
                   "the manager in %s needs a repair: a process died "
                   "holding its mutex; the next process to open the scope "
                   "repairs it",
                   path);
  case -ETIMEDOUT:
    return wl__say(err, errlen, rc,
                   "the manager in %s stayed busy: another process held its "
                   "mutex throughout the wait (a stopped process?)",
                   path);
  case WL_ENOMEM:
    return wl__say(err, errlen, rc, "cannot look at %s: out of memory",
                   path);
  case WL_ECORRUPT:
    return wl__say(err, errlen, rc, "the manager in %s is corrupt", path);
  default:
    return wl__say(err, errlen, rc, "cannot look at %s: %s", path,
                   strerror(-rc));
  }
}

int wl_scope_peek(const char *path, unsigned mode, unsigned wait_ms,
                  wl_snapshot_t *snap, char *err, size_t errlen) {
  wl_manager_t *m;
  wl__look_t look;
  int rc;

  if (!WL__MODE_OK(mode) || strlen(path) >= WL__PATH_MAX)
    return wl__say(err, errlen, WL_EINVAL,
                   "a manager file needs a path shorter than %d bytes and "
                   "permission bits 0600, 0660, 0606 or 0666",
                   WL__PATH_MAX);
  m = wl__manager_new(path);
  if (m == NULL)
    return wl__say(err, errlen, WL_ENOMEM, "out of memory");
  rc = wl__os_file_attach(m, path, mode, err, errlen);
  if (rc == -ENOENT) {
    free(m);
    return wl__say(err, errlen, rc, "there is no scope's file at %s", path);
  }
  if (rc != 0) {
    free(m);
    return rc;
  }
  wl__map_region(m);
  if ((rc = wl__check_header(path, m->map, m->map_size, err, errlen)) != 0 ||
      (rc = wl__check_region(path, WL__HDR(m), m->map_size - WL__PAGE, err,
                             errlen)) != 0) {
    wl__os_file_drop(m);
    free(m);
    return rc;
  }
  if ((rc = wl__os_file_probe(m, path, err, errlen)) == 0) {
    look.m = m;
    look.snap = snap;
    look.rc = 0;
    rc = wl__os_file_mutex_peek(m, wait_ms, wl__look, &look);
    if (rc == 0)
      rc = look.rc;
    if (rc != 0)
      rc = wl__look_failed(path, rc, err, errlen);
  }
  wl__os_file_close(m);
  free(m);
  return rc;
}

int wl_scope_admit(wl_manager_t *m, unsigned mode, char *err, size_t errlen) {
  if (!WL__MODE_OK(mode))
    return wl__say(err, errlen, WL_EINVAL,
                   "a manager file needs permission bits 0600, 0660, 0606 or "
                   "0666");
  return wl__os_file_admit(m, m->path, mode, err, errlen);
}

int wl_scope_identity(wl_manager_t *m, uint64_t *dev, uint64_t *ino) {
  return wl__os_file_identity(m, dev, ino);
}

int wl_scope_path_identity(const char *path, uint64_t *dev, uint64_t *ino) {
  return wl__os_path_identity(path, dev, ino);
}

void wl_scope_close(wl_manager_t *m) {
  /* The sweeper may be waiting for the mutex: it stops first, and the sweep
   * here answers whatever its watcher asked for since (the system wakes one
   * watcher for a death: this one's, even as it stops). */
  wl__os_watch_stop_sweeper(m);
  if (wl__lock(m) == 0) {
    wl__owner_close(m);
    wl__sweep(m);
    wl__unlock(m);
  }
  wl__os_watch_stop(m);
  wl__os_wakers_close(m);
  wl__os_work_unmap(m);
  wl__os_file_close(m);
  wl__table_free(&m->agents);
  wl__os_mutex_destroy(&m->agents_mutex);
  free(m);
}
