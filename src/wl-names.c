/* The manager's table of names: chained hashing over UTF-16 code units with
 * a per-process seed, grown and shrunk by powers of two, plus a list in
 * first-use order for snapshots. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wl-internal.h"

#define WL__MIN_BUCKETS 16

static _Atomic uint64_t wl__seed;

static uint64_t wl__fmix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

/* Names may come from untrusted input, so the hash is seeded per process. */
static uint64_t wl__get_seed(void) {
  uint64_t seed = atomic_load_explicit(&wl__seed, memory_order_relaxed);
  if (seed == 0) {
    uint64_t fresh = wl__fmix((uint64_t)time(NULL) ^
                              (uint64_t)(uintptr_t)&fresh ^
                              ((uint64_t)clock() << 32)) | 1;
    if (!atomic_compare_exchange_strong(&wl__seed, &seed, fresh))
      return seed;
    seed = fresh;
  }
  return seed;
}

static uint64_t wl__rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

uint64_t wl__hash(const uint16_t *units, size_t len) {
  const unsigned char *p = (const unsigned char *)units;
  size_t bytes = len * sizeof(uint16_t);
  uint64_t h = wl__get_seed() ^ (bytes * 0x9e3779b97f4a7c15ULL);
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

static void wl__names_resize(wl__names_t *t, size_t nbuckets) {
  wl__name_t **buckets = calloc(nbuckets, sizeof(*buckets));
  size_t i;

  if (buckets == NULL)
    return; /* keep the old table: longer chains, still correct */
  for (i = 0; i < t->nbuckets; i++) {
    wl__name_t *n = t->buckets[i];
    while (n != NULL) {
      wl__name_t *next = n->hnext;
      wl__name_t **b = &buckets[n->hash & (nbuckets - 1)];
      n->hnext = *b;
      *b = n;
      n = next;
    }
  }
  free(t->buckets);
  t->buckets = buckets;
  t->nbuckets = nbuckets;
}

wl__name_t *wl__names_find(wl__names_t *t, uint64_t hash,
                           const uint16_t *units, size_t len) {
  wl__name_t *n;

  if (t->nbuckets == 0)
    return NULL;
  for (n = t->buckets[hash & (t->nbuckets - 1)]; n != NULL; n = n->hnext) {
    if (n->hash == hash && n->len == len &&
        (len == 0 || memcmp(n->units, units, len * sizeof(uint16_t)) == 0))
      return n;
  }
  return NULL;
}

wl__name_t *wl__names_add(wl__names_t *t, uint64_t hash,
                          const uint16_t *units, size_t len) {
  wl__name_t *n;
  wl__name_t **b;

  if (len > (SIZE_MAX - sizeof(*n)) / sizeof(uint16_t))
    return NULL;
  if (t->nbuckets == 0) {
    wl__names_resize(t, WL__MIN_BUCKETS);
    if (t->nbuckets == 0)
      return NULL;
  } else if (t->count >= t->nbuckets) {
    wl__names_resize(t, t->nbuckets * 2);
  }
  n = malloc(sizeof(*n) + len * sizeof(uint16_t));
  if (n == NULL)
    return NULL;
  memset(n, 0, sizeof(*n));
  wl__list_init(&n->queue);
  wl__list_init(&n->held);
  n->hash = hash;
  n->len = len;
  if (len > 0)
    memcpy(n->units, units, len * sizeof(uint16_t));
  b = &t->buckets[hash & (t->nbuckets - 1)];
  n->hnext = *b;
  *b = n;
  wl__list_append(&t->order, &n->order);
  t->count++;
  return n;
}

void wl__names_remove(wl__names_t *t, wl__name_t *n) {
  wl__name_t **p = &t->buckets[n->hash & (t->nbuckets - 1)];

  while (*p != n)
    p = &(*p)->hnext;
  *p = n->hnext;
  wl__list_remove(&n->order);
  free(n);
  t->count--;
  /* Shrink lazily (at 1/8 load) so that a burst of names leaves no large
   * table behind and a steady count near a boundary does not thrash. */
  if (t->nbuckets > WL__MIN_BUCKETS && t->count < t->nbuckets / 8)
    wl__names_resize(t, t->nbuckets / 2);
}
