/* A manager's region: a header, then blocks handed out from the start by
 * power-of-two size class, each with a small header, reused through one free
 * list per class (wl__alloc and wl__free, inline in core/internal.h).
 * Everything in it is addressed by offsets from its base.
 *
 * The process-wide manager's region is a large reservation of address space
 * (wl__os_reserve): it costs only the pages in use, backed when first
 * touched, or committed as the region grows where the system has no
 * overcommit; and it never moves, so no pointer into it goes stale while
 * the mutex is held. */
#include <string.h>

#include "internal.h"

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
  m->corrupt = 0;
  wl__list_init(m, wl__off_of(m, &h->order));
  wl__list_init(m, wl__off_of(m, &h->idle));
  wl__list_init(m, wl__off_of(m, &h->owners));
  wl__list_init(m, wl__off_of(m, &h->vacant));
  return 0;
}

/* Whole pages past the one holding a freed block's header and link. */
void wl__return_pages(wl_manager_t *m, wl_off_t rec, uint64_t block) {
  uint64_t page = wl__os_page_size();
  uint64_t from = (rec + sizeof(wl_off_t) + page - 1) & ~(page - 1);
  uint64_t to = (rec - sizeof(wl__block_t) + block) & ~(page - 1);

  if (to > from && to <= m->limit)
    wl__os_discard(m->base + from, to - from);
}

WL__COLD void *wl__corrupt(wl_manager_t *m) {
  wl__mark_corrupt(m);
  memset(&m->scratch, 0, sizeof(m->scratch));
  return &m->scratch;
}

/* A megabyte at a time: one system call per megabyte the region grows. */
#define WL__COMMIT_STEP ((uint64_t)1 << 20)

int wl__commit(wl_manager_t *m, uint64_t upto) {
  uint64_t to = (upto + WL__COMMIT_STEP - 1) & ~(WL__COMMIT_STEP - 1);

  if (to > m->capacity)
    to = m->capacity;
  if (upto > to || wl__os_commit(m->base, m->limit, to) != 0)
    return WL_ENOMEM;
  m->limit = to;
  return 0;
}

static wl__os_mutex_t wl__process_mutex = WL__OS_MUTEX_INIT;
static wl_manager_t wl__process_m = {.mutex = &wl__process_mutex, .fd = WL__OS_NO_FD};
static wl__os_once_t wl__process_once = WL__OS_ONCE_INIT;

/* Reserves as much address space as the system grants, up to 64 GiB, and
 * commits its first pages, where the header goes. */
static void wl__process_init(void) {
  uint64_t size = (uint64_t)64 << 30, usable;
  char *base = wl__os_reserve(&size, (uint64_t)64 << 20, &usable);

  if (base == NULL)
    return;
  if (usable < WL__COMMIT_STEP &&
      wl__os_commit(base, usable, WL__COMMIT_STEP) != 0)
    return;
  if (usable < WL__COMMIT_STEP)
    usable = WL__COMMIT_STEP;
  /* Names may come from untrusted input, so the hash is seeded. */
  wl__region_init(&wl__process_m, base, size,
                  wl__fmix(wl__os_entropy() ^ (uint64_t)(uintptr_t)base));
  wl__process_m.limit = usable;
}

wl_manager_t *wl_process(void) {
  wl__os_once(&wl__process_once, wl__process_init);
  return wl__process_m.base != NULL ? &wl__process_m : NULL;
}
