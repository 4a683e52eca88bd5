/* A manager's region: a header, then blocks handed out from the start by
 * power-of-two size class, each with a small header, reused through one free
 * list per class (wl__alloc and wl__free, inline in wl-internal.h).
 * Everything in it is addressed by offsets from its base.
 *
 * The process-wide manager's region is a large reservation of anonymous
 * memory: the kernel backs its pages only when they are first touched, so it
 * costs what is in use, and it never moves, so no pointer into it goes
 * stale while the mutex is held. */
#define _DEFAULT_SOURCE

#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "wl-internal.h"

int wl__region_init(wl_manager_t *m, void *base, uint64_t size,
                    uint64_t seed) {
  wl__hdr_t *h = base;

  if (size < 4096)
    return WL_EINVAL;
  memset(h, 0, sizeof(*h));
  h->size = size;
  h->used = (sizeof(*h) + 15) & ~(uint64_t)15;
  h->seed = seed | 1;
  m->base = base;
  m->capacity = size;
  m->limit = size;
  m->steps = size / 32 + 2;
  m->damaged = 0;
  wl__list_init(m, wl__off_of(m, &h->order));
  wl__list_init(m, wl__off_of(m, &h->idle));
  wl__list_init(m, wl__off_of(m, &h->owners));
  wl__list_init(m, wl__off_of(m, &h->vacant));
  return 0;
}

/* Whole pages past the one holding a freed block's header and link. */
void wl__return_pages(wl_manager_t *m, wl_off_t rec, uint64_t block) {
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  uint64_t from = (rec + sizeof(wl_off_t) + page - 1) & ~(page - 1);
  uint64_t to = (rec - sizeof(wl__block_t) + block) & ~(page - 1);

  if (to > from && to <= m->limit)
    madvise(m->base + from, to - from, MADV_DONTNEED);
}

WL__COLD void *wl__damaged(wl_manager_t *m) {
  __atomic_store_n(&m->damaged, 1, __ATOMIC_RELAXED);
  memset(&m->scratch, 0, sizeof(m->scratch));
  return &m->scratch;
}

static pthread_mutex_t wl__local_mutex = PTHREAD_MUTEX_INITIALIZER;
static wl_manager_t wl__local_m = {.mutex = &wl__local_mutex, .fd = -1, .probe_fd = -1};
static pthread_once_t wl__local_once = PTHREAD_ONCE_INIT;

/* Reserves as much address space as the system grants, up to 64 GiB. */
static void wl__local_init(void) {
  uint64_t size;

  for (size = (uint64_t)64 << 30; size >= ((uint64_t)64 << 20); size /= 2) {
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base != MAP_FAILED) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      /* Names may come from untrusted input, so the hash is seeded. */
      wl__region_init(&wl__local_m, base, size,
                      wl__fmix((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^
                              (uint64_t)(uintptr_t)base ^ (uint64_t)clock()));
      return;
    }
  }
}

wl_manager_t *wl_local(void) {
  pthread_once(&wl__local_once, wl__local_init);
  return wl__local_m.base != NULL ? &wl__local_m : NULL;
}
