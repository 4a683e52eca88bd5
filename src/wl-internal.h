/* Core internals shared by the core's own files and its C tests. */
#ifndef WL_INTERNAL_H
#define WL_INTERNAL_H

#include "wl.h"

#ifdef _WIN32
#include <windows.h>
typedef SRWLOCK wl__mutex_t;
#define WL__MUTEX_INIT SRWLOCK_INIT
#define wl__mutex_lock(m) AcquireSRWLockExclusive(m)
#define wl__mutex_unlock(m) ReleaseSRWLockExclusive(m)
#else
#include <pthread.h>
typedef pthread_mutex_t wl__mutex_t;
#define WL__MUTEX_INIT PTHREAD_MUTEX_INITIALIZER
#define wl__mutex_lock(m) pthread_mutex_lock(m)
#define wl__mutex_unlock(m) pthread_mutex_unlock(m)
#endif

/* A resource name in use: it has queued requests or held locks. It is
 * created on first request and freed as soon as it has neither. */
struct wl__name_s {
  wl__name_t *hnext;       /* hash chain */
  wl__link_t order;        /* in the table's first-use order */
  wl__link_t queue;        /* queued requests, FIFO */
  wl__link_t held;         /* held locks */
  size_t nheld;
  size_t nexclusive;
  uint64_t hash;
  size_t len;
  uint16_t units[];
};

typedef struct {
  wl__name_t **buckets;
  size_t nbuckets; /* 0 or a power of two */
  size_t count;
  wl__link_t order;
} wl__names_t;

uint64_t wl__hash(const uint16_t *units, size_t len);
wl__name_t *wl__names_find(wl__names_t *t, uint64_t hash,
                           const uint16_t *units, size_t len);
/* Returns NULL when out of memory. */
wl__name_t *wl__names_add(wl__names_t *t, uint64_t hash,
                          const uint16_t *units, size_t len);
void wl__names_remove(wl__names_t *t, wl__name_t *n);

/* How many names the manager holds; for tests that check nothing leaks. */
size_t wl__name_count(void);

#endif
