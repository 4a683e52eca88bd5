/* The OS layer (os/os.h) on Windows. */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>

#include "../os.h"

_Static_assert(sizeof(wl__os_mutex_t) == sizeof(SRWLOCK), "an SRWLOCK");
_Static_assert(sizeof(wl__os_once_t) == sizeof(INIT_ONCE), "an INIT_ONCE");

int wl__os_mutex_init(wl__os_mutex_t *mu) {
  InitializeSRWLock((SRWLOCK *)mu);
  return 0;
}

/* An SRWLOCK holds nothing to free. */
void wl__os_mutex_destroy(wl__os_mutex_t *mu) { (void)mu; }

int wl__os_mutex_lock(wl__os_mutex_t *mu) {
  AcquireSRWLockExclusive((SRWLOCK *)mu);
  return 0;
}

void wl__os_mutex_unlock(wl__os_mutex_t *mu) {
  ReleaseSRWLockExclusive((SRWLOCK *)mu);
}

static BOOL CALLBACK wl__os_once_cb(INIT_ONCE *once, void *fn, void **ctx) {
  (void)once;
  (void)ctx;
  ((void (*)(void))fn)();
  return TRUE;
}

void wl__os_once(wl__os_once_t *once, void (*fn)(void)) {
  InitOnceExecuteOnce((INIT_ONCE *)once, wl__os_once_cb, (void *)fn, NULL);
}

/* Windows has no overcommit: reserved pages are committed as the region
 * grows (wl__os_commit), never all at once. */
void *wl__os_reserve(uint64_t *size, uint64_t min, uint64_t *usable) {
  uint64_t s;

  for (s = *size; s >= min; s /= 2) {
    void *base = VirtualAlloc(NULL, (SIZE_T)s, MEM_RESERVE, PAGE_NOACCESS);
    if (base != NULL) {
      *size = s;
      *usable = 0;
      return base;
    }
  }
  return NULL;
}

int wl__os_commit(void *base, uint64_t from, uint64_t to) {
  return VirtualAlloc((char *)base + from, (SIZE_T)(to - from), MEM_COMMIT,
                      PAGE_READWRITE) != NULL
             ? 0
             : WL_ENOMEM;
}

/* MEM_RESET: the pages' contents are no longer needed, and they stay
 * committed, so that no later access needs them committed again. */
void wl__os_discard(void *addr, uint64_t len) {
  VirtualAlloc(addr, (SIZE_T)len, MEM_RESET, PAGE_READWRITE);
}

uint64_t wl__os_page_size(void) {
  SYSTEM_INFO si;

  GetSystemInfo(&si);
  return si.dwPageSize;
}

/* The performance counter is the system's, alike in every process. */
uint64_t wl__os_now(void) {
  static LARGE_INTEGER freq;
  LARGE_INTEGER now;
  uint64_t f;

  if (freq.QuadPart == 0)
    QueryPerformanceFrequency(&freq);
  f = (uint64_t)freq.QuadPart;
  QueryPerformanceCounter(&now);
  return (uint64_t)now.QuadPart / f * 1000000000u +
         (uint64_t)now.QuadPart % f * 1000000000u / f + 1;
}

/* Windows's cheap tick count is another clock, whose times could be ahead
 * of the performance counter's: the same clock. */
uint64_t wl__os_now_coarse(void) { return wl__os_now(); }

uint32_t wl__os_pid(void) { return (uint32_t)GetCurrentProcessId(); }

uint64_t wl__os_entropy(void) {
  LARGE_INTEGER now;

  QueryPerformanceCounter(&now);
  return (uint64_t)now.QuadPart ^ ((uint64_t)GetCurrentProcessId() << 32) ^
         (uint64_t)GetTickCount64();
}
