/* The OS layer (os/os.h) on Linux and macOS. */
#define _DEFAULT_SOURCE  /* MAP_ANONYMOUS, MAP_NORESERVE, madvise (glibc) */
#define _DARWIN_C_SOURCE /* the same on macOS */

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../os.h"

int wl__os_mutex_init(wl__os_mutex_t *mu) {
  return pthread_mutex_init(mu, NULL) == 0 ? 0 : WL_ENOMEM;
}

void wl__os_mutex_destroy(wl__os_mutex_t *mu) { pthread_mutex_destroy(mu); }

void wl__os_once(wl__os_once_t *once, void (*fn)(void)) {
  pthread_once(once, fn);
}

/* MAP_NORESERVE: the pages are backed when first touched, and counted
 * against no commit limit before. */
void *wl__os_reserve(uint64_t *size, uint64_t min, uint64_t *usable) {
  uint64_t s;

  for (s = *size; s >= min; s /= 2) {
    void *base = mmap(NULL, (size_t)s, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base != MAP_FAILED) {
      *size = s;
      *usable = s;
      return base;
    }
  }
  return NULL;
}

/* Nothing to do: wl__os_reserve's reservation is usable as a whole. */
int wl__os_commit(void *base, uint64_t from, uint64_t to) {
  (void)base;
  (void)from;
  (void)to;
  return 0;
}

void wl__os_discard(void *addr, uint64_t len) {
  madvise(addr, (size_t)len, MADV_DONTNEED);
}

uint64_t wl__os_page_size(void) { return (uint64_t)sysconf(_SC_PAGESIZE); }

uint64_t wl__os_now(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + 1;
}

/* Linux's coarse clock: a fifth of CLOCK_MONOTONIC's cost (6.6 against 30
 * ns here), which was a fifth of a scope's request and release in C. */
uint64_t wl__os_now_coarse(void) {
#ifdef CLOCK_MONOTONIC_COARSE
  struct timespec ts;

  /* A system that refuses it (an emulator) gives the precise clock. */
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0)
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + 1;
  return wl__os_now();
#else
  return wl__os_now();
#endif
}

uint32_t wl__os_pid(void) { return (uint32_t)getpid(); }

uint64_t wl__os_entropy(void) {
  struct timespec ts;

  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^
         ((uint64_t)getpid() << 16) ^ (uint64_t)clock();
}
