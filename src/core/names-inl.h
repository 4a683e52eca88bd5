/* The manager's table of names: chained hashing over UTF-16 code units with
 * the region's seed (wl__hash, in core/internal.h), grown and shrunk by powers
 * of two, plus a list in first-use order for snapshots. Everything is in the
 * region. Part of the algorithms: core/algorithms-inl.h includes it, to be compiled with
 * them for each kind of manager. */
#include <string.h>

#include "internal.h"

#define WL__MIN_BUCKETS 16

#define WL__NAME(m, off) WL__REC(m, off, wl__name_t)

/* The table's buckets and the mask of their count, read once and checked;
 * NULL if there are none or they are corrupt. */
static wl_off_t *wl__buckets(wl_manager_t *m, uint64_t *mask) {
  uint64_t n = WL__HDR(m)->nbuckets;

  if (WL__MACHINE(m))
    WL__HIDE(n);
  if (n == 0)
    return NULL;
  if (WL__MACHINE(m) &&
      ((n & (n - 1)) != 0 || n > m->limit / sizeof(wl_off_t))) {
    wl__corrupt(m);
    return NULL;
  }
  *mask = n - 1;
  return wl__span(m, WL__HDR(m)->buckets, n * sizeof(wl_off_t));
}

/* Makes the table nbuckets long (a power of two, from the checked count). */
static void wl__names_resize(wl_manager_t *m, uint64_t nbuckets) {
  wl__hdr_t *h = WL__HDR(m);
  uint64_t i, mask = 0, steps = WL__STEPS(m);
  wl_off_t *buckets, *old = wl__buckets(m, &mask), off = 0;

  if (nbuckets <= m->capacity / sizeof(wl_off_t))
    off = wl__alloc(m, WL__ARRAY, nbuckets * sizeof(wl_off_t));
  if (off == 0 || wl__is_corrupt(m))
    return; /* keep the old table: longer chains, still correct */
  buckets = wl__span(m, off, nbuckets * sizeof(wl_off_t));
  if (buckets == NULL)
    return;
  memset(buckets, 0, nbuckets * sizeof(wl_off_t));
  for (i = 0; old != NULL && i <= mask; i++) {
    wl_off_t n = old[i];
    while (n != 0 && wl__step(m, &steps)) {
      wl__name_t *name = WL__NAME(m, n);
      wl_off_t next = name->hnext;
      wl_off_t *b = &buckets[name->hash & (nbuckets - 1)];
      name->hnext = *b;
      *b = n;
      n = next;
    }
  }
  if (h->buckets != 0)
    wl__free(m, h->buckets);
  h->buckets = off;
  h->nbuckets = nbuckets;
}

static wl_off_t wl__names_find(wl_manager_t *m, uint64_t hash,
                               const uint16_t *units, size_t len) {
  uint64_t mask = 0, steps = WL__STEPS(m);
  wl_off_t *buckets = wl__buckets(m, &mask), n;

  if (buckets == NULL)
    return 0;
  for (n = buckets[hash & mask]; n != 0 && wl__step(m, &steps);
       n = WL__NAME(m, n)->hnext) {
    wl__name_t *name = WL__NAME(m, n);
    const uint16_t *have;
    size_t have_len;
    if (name->hash != hash || name->len != len)
      continue;
    if (len == 0)
      return n;
    have = wl__units(m, n, &have_len);
    if (have != NULL && have_len == len &&
        memcmp(have, units, len * sizeof(uint16_t)) == 0)
      return n;
  }
  return 0;
}

static int wl__names_link(wl_manager_t *m, wl_off_t n) {
  wl__hdr_t *h = WL__HDR(m);
  wl__name_t *name = WL__NAME(m, n);
  uint64_t mask = 0;
  wl_off_t *buckets = wl__buckets(m, &mask);

  if (buckets == NULL && !wl__is_corrupt(m))
    wl__names_resize(m, WL__MIN_BUCKETS);
  else if (buckets != NULL && h->count > mask)
    wl__names_resize(m, (mask + 1) * 2);
  buckets = wl__buckets(m, &mask);
  if (buckets == NULL)
    return wl__is_corrupt(m) ? WL_ECORRUPT : WL_ENOMEM;
  name->hnext = buckets[name->hash & mask];
  buckets[name->hash & mask] = n;
  wl__list_append(m, wl__off_of(m, &h->order), n + offsetof(wl__name_t, order));
  h->count++;
  return 0;
}

static wl_off_t wl__names_add(wl_manager_t *m, uint64_t hash,
                              const uint16_t *units, size_t len) {
  wl__name_t *name;
  wl_off_t n;

  if (len > UINT32_MAX)
    return 0;
  n = wl__alloc(m, WL__NAME, sizeof(*name) + len * sizeof(uint16_t));
  if (n == 0)
    return 0;
  name = WL__NAME(m, n);
  wl__list_init(m, n + offsetof(wl__name_t, queue));
  wl__list_init(m, n + offsetof(wl__name_t, held));
  name->hash = hash;
  name->len = (uint32_t)len;
  if (len > 0) {
    uint16_t *to = wl__span(m, n + offsetof(wl__name_t, units),
                            len * sizeof(uint16_t));
    if (to == NULL)
      return 0;
    memcpy(to, units, len * sizeof(uint16_t));
  }
  if (wl__names_link(m, n) != 0) {
    wl__free(m, n);
    return 0;
  }
  return n;
}

static void wl__names_remove(wl_manager_t *m, wl_off_t n) {
  wl__hdr_t *h = WL__HDR(m);
  wl__name_t *name = WL__NAME(m, n);
  uint64_t mask = 0, steps = WL__STEPS(m);
  wl_off_t *buckets = wl__buckets(m, &mask), *p;

  if (buckets == NULL)
    return;
  p = &buckets[name->hash & mask];
  while (*p != n) {
    if (WL__MACHINE(m) && (*p == 0 || !wl__step(m, &steps))) {
      wl__corrupt(m);
      return;
    }
    p = &WL__NAME(m, *p)->hnext;
  }
  *p = name->hnext;
  wl__list_remove(m, n + offsetof(wl__name_t, order));
  wl__free(m, n);
  h->count--;
  /* Shrink lazily (at 1/8 load) so that a burst of names leaves no large
   * table behind and a steady count near a boundary does not thrash. */
  if (mask + 1 > WL__MIN_BUCKETS && h->count < (mask + 1) / 8)
    wl__names_resize(m, (mask + 1) / 2);
}
