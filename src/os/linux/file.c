/* A manager shared by processes: its region in a file mapped by each of
 * them (by default in /dev/shm). The file's first page describes it and
 * holds the manager's mutex (process-shared and robust); the region follows.
 *
 * Creating: the first process makes the file whole (sized, initialised,
 * marked ready) where no one else can see it (O_TMPFILE, or a temporary
 * name no one can predict), then links it into place (linkat, or renameat2
 * with RENAME_NOREPLACE), which fails if another process's came first: then
 * it opens that one. So a file at the path is always whole, unless someone
 * else wrote it, and a file that this code did not make whole is never
 * written: one not marked ready (all zero, say, as a user's disk image
 * begins) is refused, never initialised. Other copies and versions of the
 * package are assumed to do the same; one of another layout is refused
 * (ELAYOUT). A file is never trusted for its name alone: it must be a
 * regular file with one name (a hard link would give its agents two sets
 * of FIFO names, os/linux/wake.c), of this layout, of the size it says, and
 * either ours or another user's that both that user's permission bits and
 * ours (the mode asked for) open to others.
 *
 * The file is sparse: every page is reserved (fallocate) before it is
 * first stored to, so that a full file system (a container's small
 * /dev/shm) is a full manager, never a SIGBUS (wl__reserve).
 *
 * Each open handle is an owner (os/linux/life.c) with two threads of its own that
 * notice other owners' deaths (os/linux/watch.c): joining starts them, closing
 * stops them. */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../../core/internal.h"

#define WL__MAGIC "web-lock"
#define WL__PAGE 4096
/* How much of the region is reserved at a time. */
#define WL__RESERVE_STEP ((uint64_t)64 << 10)
#define WL__READY 0x52454459u /* "READY" */
/* The kernel's (linux/fs.h), where the C library does not say it (musl). */
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

/* What a process must agree on to share a file: the layout of the records
 * and of the mutex. */
#if defined(__GLIBC__)
#define WL__LIBC 1u
#else
#define WL__LIBC 2u
#endif
/* The C library too: glibc's and musl's mutexes are the same size on x86-64
 * but keep their futex word in different places (containers of both may
 * share /dev/shm). */
#define WL__ABI                                                                \
  ((uint32_t)sizeof(pthread_mutex_t) | ((uint32_t)sizeof(void *) << 8) |       \
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
  pthread_mutex_t mutex;
} wl__file_t;

_Static_assert(offsetof(wl__file_t, mutex) == 40,
               "test/machine-full-crash.test.js reads the mutex at offset 40");

static int wl__fail(char *err, size_t errlen, int rc, const char *fmt, ...) {
  va_list ap;

  if (errlen > 0) {
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return rc;
}

/* Initialises the file's first page and its region. */
static int wl__init_file(wl__file_t *seg, uint64_t size) {
  pthread_mutexattr_t attr;
  struct timespec ts;
  wl_manager_t tmp;
  int rc;

  memset(seg, 0, sizeof(*seg));
  memset(&tmp, 0, sizeof(tmp));
  if ((rc = pthread_mutexattr_init(&attr)) != 0)
    return -rc;
  if ((rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED)) == 0 &&
      (rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST)) == 0)
    rc = pthread_mutex_init(&seg->mutex, &attr);
  pthread_mutexattr_destroy(&attr);
  if (rc != 0)
    return -rc;
  memcpy(seg->magic, WL__MAGIC, sizeof(seg->magic));
  seg->layout = WL_LAYOUT;
  seg->abi = WL__ABI;
  seg->size = size;
  seg->region_off = WL__PAGE;
  clock_gettime(CLOCK_REALTIME, &ts);
  rc = wl__region_init(&tmp, (char *)seg + WL__PAGE, size - WL__PAGE,
                       wl__fmix((uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec ^
                                ((uint64_t)getpid() << 32)));
  if (rc != 0)
    return rc;
  /* Everything above reaches the file before any process sees it ready. */
  __atomic_store_n(&seg->ready, WL__READY, __ATOMIC_RELEASE);
  return 0;
}

/* Checks what the file's first page says, before anything in it is used. */
static int wl__check_header(const char *path, const wl__file_t *seg,
                            uint64_t file_size, char *err, size_t errlen) {
  if (memcmp(seg->magic, WL__MAGIC, sizeof(seg->magic)) != 0)
    return wl__fail(err, errlen, WL_ECORRUPT,
                    "%s is not a web-locks manager file", path);
  if (seg->layout != WL_LAYOUT)
    return wl__fail(err, errlen, WL_ELAYOUT,
                    "%s has web-locks layout %u; this version of web-locks "
                    "uses layout %u",
                    path, seg->layout, WL_LAYOUT);
  if (seg->abi != WL__ABI)
    return wl__fail(err, errlen, WL_ELAYOUT,
                    "%s was made for another machine architecture or C "
                    "library (ABI %#x, this process has %#x)",
                    path, seg->abi, WL__ABI);
  if (__atomic_load_n(&seg->ready, __ATOMIC_ACQUIRE) != WL__READY)
    return wl__fail(err, errlen, WL_ECORRUPT,
                    "%s is not a whole web-locks manager file (not marked "
                    "ready): web-locks never writes a file it did not make",
                    path);
  if (seg->size != file_size || seg->region_off != WL__PAGE ||
      file_size < 2 * WL__PAGE)
    return wl__fail(err, errlen, WL_ECORRUPT,
                    "%s is corrupt: it says it is %llu bytes with its region "
                    "at %llu, and it is %llu bytes",
                    path, (unsigned long long)seg->size,
                    (unsigned long long)seg->region_off,
                    (unsigned long long)file_size);
  return 0;
}

/* Checks the region's header against the region's size. */
static int wl__check_region(const char *path, const wl__hdr_t *h,
                            uint64_t size, char *err, size_t errlen) {
  int c;

  if (h->size != size || h->used > size || h->used < sizeof(*h))
    return wl__fail(err, errlen, WL_ECORRUPT,
                    "%s is corrupt: its region header is inconsistent", path);
  for (c = 0; c < WL__NCLASSES; c++) {
    if (h->free[c] != 0 && (h->free[c] >= h->used || h->free[c] < sizeof(*h)))
      return wl__fail(err, errlen, WL_ECORRUPT,
                      "%s is corrupt: a free list points outside the region",
                      path);
  }
  return 0;
}

/* Owned by us, or another user's file that both that user (its permission
 * bits) and we (the mode asked for: a private scope trusts no other user,
 * who could write anything in it) open to others on purpose. */
static int wl__check_owner(const char *path, const struct stat *st,
                           unsigned mode, char *err, size_t errlen) {
  if (!S_ISREG(st->st_mode))
    return wl__fail(err, errlen, WL_ECORRUPT, "%s is not a regular file",
                    path);
  if (st->st_uid != geteuid() && (st->st_mode & 0066) == 0)
    return wl__fail(err, errlen, WL_EACCES,
                    "%s belongs to another user (uid %u) who has not granted "
                    "access to it",
                    path, (unsigned)st->st_uid);
  if (st->st_uid != geteuid() && (mode & 0066) == 0)
    return wl__fail(err, errlen, WL_EACCES,
                    "%s belongs to another user (uid %u), and this scope was "
                    "opened as private (mode %#o): open it with a mode that "
                    "shares it to trust another user's file",
                    path, (unsigned)st->st_uid, mode);
  return 0;
}

/* Reserves the file's pages up to `end` bytes of the region, and the first
 * page with the first reservation. A file system that cannot reserve
 * (EOPNOTSUPP) is used as before. */
static int wl__fallocate(wl_manager_t *m, uint64_t end) {
  uint64_t from = m->limit == 0 ? 0 : WL__PAGE + m->limit;

  while (fallocate(m->fd, 0, (off_t)from, (off_t)(WL__PAGE + end - from)) !=
         0) {
    if (errno == EOPNOTSUPP)
      break;
    if (errno != EINTR)
      return -errno;
  }
  m->limit = end;
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
  return wl__fallocate(m, end) == 0 || wl__fallocate(m, least) == 0
             ? 0
             : WL_ENOMEM;
}

WL__COLD int wl__cover(wl_manager_t *m) {
  return wl__reserve(m, WL__HDR(m)->used) == 0 ? 0 : WL_ECORRUPT;
}

static int wl__map(wl_manager_t *m, int fd, uint64_t size) {
  void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

  if (map == MAP_FAILED)
    return -errno;
  m->map = map;
  m->map_size = size;
  m->base = (char *)map + WL__PAGE;
  /* The region's bound comes from the mapping, never from the file; what
   * may be touched of it, from what is reserved (none yet). */
  m->capacity = size - WL__PAGE;
  m->limit = 0;
  m->steps = m->capacity / 32 + 2;
  m->corrupt = 0;
  m->machine = 1;
  m->mutex = &((wl__file_t *)map)->mutex;
  return 0;
}

/* A new file in the directory of path that no other process can open yet:
 * O_TMPFILE where the file system has it, else a temporary name that no
 * other user can take first (drawn at random, again if taken; in *tmp,
 * which the caller removes). */
static int wl__open_unlinked(const char *path, unsigned mode, char *tmp,
                             size_t tmplen) {
  char dir[WL__PATH_MAX];
  const char *slash = strrchr(path, '/');
  uint64_t r;
  int fd, tries;

  tmp[0] = '\0';
  if (slash != NULL && (size_t)(slash - path) < sizeof(dir)) {
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash == path ? 1 : slash - path] = '\0';
    if (slash == path)
      dir[0] = '/';
    fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, mode);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
      return fd;
  }
  for (tries = 0; tries < 4; tries++) {
    if (wl__draw(&r) != 0)
      return -1;
    snprintf(tmp, tmplen, "%s.new-%016llx", path, (unsigned long long)r);
    fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd >= 0 || errno != EEXIST)
      break;
  }
  if (fd < 0)
    tmp[0] = '\0';
  return fd;
}

/* Puts the whole file in place, with one name at every moment (a rename,
 * not a link then an unlink): 0, -EEXIST if another process's came first,
 * or -errno. */
static int wl__publish(int fd, const char *tmp, const char *path) {
  char proc[64];

  WL__FAULT("create");
  if (tmp[0] != '\0')
    return syscall(SYS_renameat2, AT_FDCWD, tmp, AT_FDCWD, path,
                   RENAME_NOREPLACE) == 0
               ? 0
               : -errno;
  snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
  return linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0
             ? 0
             : -errno;
}

/* Makes the file whole, then puts it at path: 0, or -EEXIST if a file is
 * there already. */
static int wl__create(wl_manager_t *m, const char *path, uint64_t size,
                      unsigned mode, char *err, size_t errlen) {
  char tmp[WL__PATH_MAX + 32];
  struct stat st;
  int fd, rc;

  if (access(path, F_OK) == 0 || errno != ENOENT)
    return -EEXIST;
  fd = wl__open_unlinked(path, mode, tmp, sizeof(tmp));
  if (fd < 0)
    return wl__fail(err, errlen, -errno, "cannot create %s: %s", path,
                    strerror(errno));
  m->fd = fd;
  /* Exactly the bits asked for, whatever the umask. */
  if (fchmod(fd, mode) != 0 || ftruncate(fd, (off_t)size) != 0 ||
      fstat(fd, &st) != 0) {
    rc = wl__fail(err, errlen, -errno, "cannot create %s: %s", path,
                  strerror(errno));
  } else if ((rc = wl__map(m, fd, size)) != 0) {
    wl__fail(err, errlen, rc, "cannot map %s: %s", path, strerror(-rc));
  } else if ((rc = wl__reserve(m, sizeof(wl__hdr_t))) != 0) {
    rc = wl__fail(err, errlen, -ENOSPC, "cannot create %s: %s", path,
                  strerror(ENOSPC));
    munmap(m->map, size);
  } else if ((rc = wl__init_file(m->map, size)) != 0) {
    wl__fail(err, errlen, rc, "cannot initialise %s", path);
    munmap(m->map, size);
  } else if ((rc = wl__publish(fd, tmp, path)) != 0) {
    if (rc != -EEXIST)
      wl__fail(err, errlen, rc, "cannot create %s: %s", path, strerror(-rc));
    munmap(m->map, size);
  }
  if (rc != 0) {
    if (tmp[0] != '\0')
      unlink(tmp);
    close(fd);
    return rc;
  }
  m->mode = mode;
  m->gid = st.st_gid;
  return 0;
}

/* Opens an existing file; -ENOENT if it went away meanwhile. */
static int wl__attach(wl_manager_t *m, const char *path, unsigned mode,
                      char *err, size_t errlen) {
  int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  struct stat st;
  wl__file_t *seg;
  int rc;

  if (fd < 0)
    return errno == ENOENT ? -ENOENT
                           : wl__fail(err, errlen, -errno, "cannot open %s: %s",
                                      path, strerror(errno));
  m->fd = fd;
  if (fstat(fd, &st) != 0) {
    rc = wl__fail(err, errlen, -errno, "cannot open %s: %s", path,
                  strerror(errno));
    goto fail;
  }
  if ((rc = wl__check_owner(path, &st, mode, err, errlen)) != 0)
    goto fail;
  if ((uint64_t)st.st_size < WL__PAGE) {
    rc = wl__fail(err, errlen, WL_ECORRUPT,
                  "%s is corrupt: %llu bytes is too short for a web-locks "
                  "manager file",
                  path, (unsigned long long)st.st_size);
    goto fail;
  }
  if ((rc = wl__map(m, fd, (uint64_t)st.st_size)) != 0) {
    wl__fail(err, errlen, rc, "cannot map %s: %s", path, strerror(-rc));
    goto fail;
  }
  seg = m->map;
  if ((rc = wl__check_header(path, seg, (uint64_t)st.st_size, err, errlen)) !=
          0 ||
      (rc = wl__check_region(path, WL__HDR(m), seg->size - WL__PAGE, err,
                             errlen)) != 0)
    goto unmap;
  /* What other processes have used so far, before this one stores there. */
  if (wl__reserve(m, WL__HDR(m)->used) != 0) {
    rc = wl__fail(err, errlen, -ENOSPC, "cannot open %s: %s", path,
                  strerror(ENOSPC));
    goto unmap;
  }
  m->mode = st.st_mode & 0777;
  m->gid = st.st_gid;
  return 0;
unmap:
  munmap(m->map, m->map_size);
fail:
  close(fd);
  return rc;
}

/* Reserves the memory that a repair after a crash works in (core/recover.c),
 * before joining (which may repair), so that no repair asks for memory it
 * may not get: a process that cannot have it cannot open the scope. It is
 * address space until a repair touches it (MAP_NORESERVE), which gives it
 * back after. */
static int wl__work_open(wl_manager_t *m, const char *path, char *err,
                         size_t errlen) {
  uint64_t size = wl__work_size(m->capacity);
  void *work = size > SIZE_MAX ? MAP_FAILED
                               : mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
                                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                                      -1, 0);

  if (work == MAP_FAILED)
    return wl__fail(err, errlen, WL_ENOMEM,
                    "cannot open %s: no memory for its repair after a crash",
                    path);
  m->work = work;
  m->work_size = size;
  return 0;
}

/* Joins the manager as a live owner, and ends the agents of dead ones. The
 * probe is a second open of the same file: it must be the same file, with
 * one name (agents of processes that opened it by two names would look for
 * each other's FIFOs under different names). */
static int wl__join(wl_manager_t *m, const char *path, char *err,
                    size_t errlen) {
  uint64_t orphans[WL__ORPHANS];
  struct stat a, b;
  unsigned norphans;
  int rc;

  m->probe_fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (m->probe_fd < 0 || fstat(m->fd, &a) != 0 || fstat(m->probe_fd, &b) != 0 ||
      a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
    if (m->probe_fd >= 0)
      close(m->probe_fd);
    return wl__fail(err, errlen, WL_ECORRUPT,
                    "%s was replaced while it was being opened", path);
  }
  if (a.st_nlink != 1) {
    close(m->probe_fd);
    return wl__fail(err, errlen, -EMLINK,
                    "%s has %llu names (hard links); a scope's file must "
                    "have one: remove the others",
                    path, (unsigned long long)a.st_nlink);
  }
  norphans = wl__wake_orphans(m, orphans, WL__ORPHANS);
  if ((rc = wl__lock(m)) == 0) {
    rc = wl__owner_open(m);
    if (rc == 0) {
      wl__sweep(m);
      wl__wake_reap(m, orphans, norphans);
    }
    wl__unlock(m);
  }
  if (rc != 0) {
    close(m->probe_fd);
    return wl__fail(err, errlen, rc, "cannot join the manager in %s: %s", path,
                    rc == WL_ENOMEM     ? "it is full"
                    : rc == WL_ECORRUPT ? "its state is corrupt"
                                        : strerror(-rc));
  }
  return 0;
}

int wl_scope_open(const char *path, uint64_t size, unsigned mode,
                    wl_manager_t **out, char *err, size_t errlen) {
  wl_manager_t *m;
  int rc, tries;

  if (size < 2 * WL__PAGE || size % WL__PAGE != 0 || (mode & ~0666u) != 0)
    return wl__fail(err, errlen, WL_EINVAL,
                    "a manager file needs a size of at least %d bytes, in "
                    "whole pages, and permission bits within 0666",
                    2 * WL__PAGE);
  if (strlen(path) >= WL__PATH_MAX)
    return wl__fail(err, errlen, WL_EINVAL, "the path %s is too long", path);
  m = calloc(1, sizeof(*m));
  if (m == NULL)
    return wl__fail(err, errlen, WL_ENOMEM, "out of memory");
  if (wl__os_mutex_init(&m->agents_mutex) != 0) {
    free(m);
    return wl__fail(err, errlen, WL_ENOMEM, "out of memory");
  }
  strcpy(m->path, path);
  /* Created by us, or by another process between our two attempts. */
  for (tries = 0;; tries++) {
    if (tries == 8) {
      rc = wl__fail(err, errlen, -EAGAIN,
                    "%s keeps appearing and disappearing", path);
      break;
    }
    rc = wl__create(m, path, size, mode, err, errlen);
    if (rc != -EEXIST)
      break;
    rc = wl__attach(m, path, mode, err, errlen);
    if (rc != -ENOENT)
      break;
  }
  if (rc == 0) {
    rc = wl__work_open(m, path, err, errlen);
    if (rc == 0 && (rc = wl__join(m, path, err, errlen)) != 0)
      munmap(m->work, m->work_size);
    if (rc != 0) {
      munmap(m->map, m->map_size);
      close(m->fd);
    }
  }
  if (rc != 0) {
    wl__os_mutex_destroy(&m->agents_mutex);
    free(m);
    return rc;
  }
  *out = m;
  return 0;
}

void wl__mutex_consistent(wl_manager_t *m) {
  pthread_mutex_consistent(m->mutex);
}

int wl_scope_identity(wl_manager_t *m, uint64_t *dev, uint64_t *ino) {
  struct stat st;

  if (fstat(m->fd, &st) != 0)
    return -errno;
  *dev = st.st_dev;
  *ino = st.st_ino;
  return 0;
}

void wl_scope_close(wl_manager_t *m) {
  /* The sweeper may be waiting for the mutex: it stops first, and the sweep
   * here answers whatever its watcher asked for since (the kernel wakes one
   * watcher for a death: this one's, even as it stops). */
  wl__watch_stop_sweeper(m);
  if (wl__lock(m) == 0) {
    wl__owner_close(m);
    wl__sweep(m);
    wl__unlock(m);
  }
  wl__watch_stop(m);
  wl__wakers_close(m);
  munmap(m->work, m->work_size);
  munmap(m->map, m->map_size);
  close(m->probe_fd);
  close(m->fd);
  wl__table_free(&m->agents);
  wl__os_mutex_destroy(&m->agents_mutex);
  free(m);
}
