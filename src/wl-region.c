/* A manager's region: a header, then blocks handed out from the start by
 * power-of-two size class, each with a small header, reused through one free
 * list per class. Everything in it is addressed by offsets from its base.
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

/* Blocks this large give their pages back to the kernel when freed, so that
 * a burst of long names leaves no memory behind. */
#define WL__RETURN_BYTES ((uint64_t)1 << 20)

/* How much of a new record wl__alloc zeroes: every record's fixed part. */
#define WL__ZERO_BYTES 256

#define WL__BLOCK(m, rec) WL__REC(m, (rec) - sizeof(wl__block_t), wl__block_t)

static int wl__class_of(uint64_t bytes) {
  uint64_t total = bytes + sizeof(wl__block_t);
  int shift;

  if (bytes > ((uint64_t)1 << (WL__NCLASSES + WL__MIN_SHIFT - 2)))
    return -1;
  shift = total <= ((uint64_t)1 << WL__MIN_SHIFT)
              ? WL__MIN_SHIFT
              : 64 - __builtin_clzll(total - 1);
  return shift - WL__MIN_SHIFT;
}

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
  m->limit = size;
  m->steps = size / 32 + 2;
  m->damaged = 0;
  wl__list_init(m, wl__off_of(m, &h->order));
  wl__list_init(m, wl__off_of(m, &h->idle));
  wl__list_init(m, wl__off_of(m, &h->owners));
  wl__list_init(m, wl__off_of(m, &h->vacant));
  return 0;
}

/* Crash-safe order: a block is carved (its header written, then `used`
 * moved past it) or taken off its free list before it gets its kind, and it
 * gets its kind only once its record's fixed part is zero, so a process
 * killed anywhere in between leaves a FREE block or a blank record, never a
 * stale one that recovery could mistake for live. */
wl_off_t wl__alloc(wl_manager_t *m, uint32_t kind, uint64_t bytes) {
  wl__hdr_t *h = WL__HDR(m);
  int c = wl__class_of(bytes);
  wl__block_t *b;
  wl_off_t rec;

  if (c < 0)
    return 0;
  rec = h->free[c];
  if (rec != 0) {
    h->free[c] = *WL__REC(m, rec, wl_off_t);
    b = WL__BLOCK(m, rec);
    if (b->cls != (uint32_t)c || m->damaged)
      return 0; /* a damaged free list: reported, and nothing handed out */
  } else {
    uint64_t block = (uint64_t)1 << (c + WL__MIN_SHIFT);
    if (h->used > m->limit || block > m->limit - h->used)
      return 0;
    rec = h->used + sizeof(wl__block_t);
    b = WL__BLOCK(m, rec);
    b->cls = (uint16_t)c;
    b->kind = WL__FREE;
    b->gen = 0;
    WL__PUBLISH(h->used, h->used + block);
  }
  WL__FAULT("alloc");
  memset(wl__rec(m, rec, bytes < WL__ZERO_BYTES ? bytes : WL__ZERO_BYTES), 0,
         bytes < WL__ZERO_BYTES ? bytes : WL__ZERO_BYTES);
  WL__PUBLISH(b->kind, kind);
  return rec;
}

void wl__free(wl_manager_t *m, wl_off_t rec) {
  wl__hdr_t *h = WL__HDR(m);
  wl__block_t *b = WL__BLOCK(m, rec);
  uint64_t block;

  if (b->cls >= WL__NCLASSES || m->damaged) {
    wl__damaged(m);
    return;
  }
  block = (uint64_t)1 << (b->cls + WL__MIN_SHIFT);

  WL__PUBLISH(b->kind, WL__FREE);
  b->gen++;
  WL__FAULT("free");
  *WL__REC(m, rec, wl_off_t) = h->free[b->cls];
  h->free[b->cls] = rec;
  if (block >= WL__RETURN_BYTES) {
    /* Whole pages past the one holding the block's header and link. */
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t from = (rec + sizeof(wl_off_t) + page - 1) & ~(page - 1);
    uint64_t to = (rec - sizeof(wl__block_t) + block) & ~(page - 1);
    if (to > from && to <= m->limit)
      madvise(m->base + from, to - from, MADV_DONTNEED);
  }
}

wl__block_t *wl__block(wl_manager_t *m, wl_off_t rec) {
  return WL__BLOCK(m, rec);
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
