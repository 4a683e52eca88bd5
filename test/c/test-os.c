/* The OS layer (os/os.h) and what the core builds on it: error codes out of
 * errno's range, the coarse clock, a region committed as it grows, pages given back and still
 * usable, once-initialisation across threads. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

/* The region's inline functions as the process-wide manager's algorithms
 * have them (core/process.c). */
#define WL__MACHINE(m) 0
#include "test.h"

/* Every platform's errno values and libuv's codes lie above -4096: none of
 * the core's own codes may be taken for one of them, or for another. */
static void test_codes_out_of_errno_range(void) {
  static const int codes[] = {WL_ENOMEM, WL_EINVAL, WL_EACCES, WL_ELAYOUT,
                              WL_ECORRUPT, WL__EOWNERDEAD};
  size_t i, j, n = sizeof(codes) / sizeof(codes[0]);

  for (i = 0; i < n; i++) {
    ASSERT(codes[i] < -4096);
    for (j = i + 1; j < n; j++)
      ASSERT(codes[i] != codes[j]);
  }
  ASSERT(WL_ELAYOUT != -EPROTO && WL_ECORRUPT != -EBADMSG);
}

/* The coarse clock is the monotonic one, never ahead of it: read between
 * two precise reads, it is not after the second, and not a second before
 * the first. */
static void test_coarse_clock_is_the_clock(void) {
  int i;

  for (i = 0; i < 1000; i++) {
    uint64_t before = wl__os_now(), coarse = wl__os_now_coarse(),
             after = wl__os_now();

    ASSERT(coarse != 0 && coarse <= after);
    ASSERT(coarse + 1000000000u > before);
  }
}

/* A region whose first megabyte only is committed, as on Windows: blocks
 * past it commit more, a megabyte at a time, up to the reservation. */
static void test_region_commits_as_it_grows(void) {
  uint64_t size = (uint64_t)64 << 20, usable = 0, mb = (uint64_t)1 << 20;
  char *base = wl__os_reserve(&size, size, &usable);
  wl_manager_t m;
  wl_off_t small, big;

  ASSERT(base != NULL);
  ASSERT_EQ((uint64_t)64 << 20, size);
  ASSERT_EQ(size, usable); /* Linux and macOS back pages when touched */
  memset(&m, 0, sizeof(m));
  ASSERT_EQ(0, wl__region_init(&m, base, size, 1));
  m.limit = mb;
  small = wl__alloc(&m, WL__NAME, 100);
  ASSERT(small != 0);
  ASSERT_EQ(mb, m.limit);
  big = wl__alloc(&m, WL__ARRAY, 3 * mb);
  ASSERT(big != 0);
  ASSERT_EQ(5 * mb, m.limit); /* the block is 4 MiB, from 1 MiB on */
  memset(base + big, 0xa5, 3 * mb);
  /* More than the reservation: refused, and the limit stays. */
  ASSERT_EQ(0, wl__alloc(&m, WL__ARRAY, 48 * mb));
  ASSERT_EQ(5 * mb, m.limit);
  ASSERT_EQ(WL_ENOMEM, wl__commit(&m, size + 1));
  ASSERT_EQ(0, m.corrupt);
}

/* A freed block of a megabyte or more gives its pages back; the block is
 * usable again at once, whatever the pages read meanwhile. */
static void test_discarded_pages_stay_usable(void) {
  uint64_t size = (uint64_t)64 << 20, usable, mb = (uint64_t)1 << 20;
  char *base = wl__os_reserve(&size, size, &usable);
  wl_manager_t m;
  wl_off_t big, again;

  ASSERT(base != NULL);
  memset(&m, 0, sizeof(m));
  ASSERT_EQ(0, wl__region_init(&m, base, size, 1));
  big = wl__alloc(&m, WL__ARRAY, 2 * mb);
  memset(base + big, 0x5a, 2 * mb);
  wl__free(&m, big);
  again = wl__alloc(&m, WL__ARRAY, 2 * mb);
  ASSERT_EQ(big, again);
  memset(base + again, 0x33, 2 * mb);
  ASSERT_EQ(0x33, base[again + 2 * mb - 1]);
  ASSERT_EQ(0x33, base[again + mb]);
}

static wl__os_once_t once = WL__OS_ONCE_INIT;
static int once_runs;

static void once_fn(void) { __atomic_fetch_add(&once_runs, 1, __ATOMIC_RELAXED); }

static void *once_thread(void *arg) {
  wl__os_once(&once, once_fn);
  ASSERT_EQ(1, __atomic_load_n(&once_runs, __ATOMIC_RELAXED));
  return arg;
}

static void test_once_runs_once(void) {
  pthread_t threads[8];
  size_t i;

  for (i = 0; i < 8; i++)
    ASSERT_EQ(0, pthread_create(&threads[i], NULL, once_thread, NULL));
  for (i = 0; i < 8; i++)
    pthread_join(threads[i], NULL);
  ASSERT_EQ(1, once_runs);
}

static wl__os_mutex_t counter_mutex = WL__OS_MUTEX_INIT;
static uint64_t counter;

static void *count_thread(void *arg) {
  int i;

  for (i = 0; i < 100000; i++) {
    ASSERT_EQ(0, wl__os_mutex_lock(&counter_mutex));
    counter++;
    wl__os_mutex_unlock(&counter_mutex);
  }
  return arg;
}

static void test_mutex_excludes(void) {
  pthread_t threads[4];
  size_t i;

  for (i = 0; i < 4; i++)
    ASSERT_EQ(0, pthread_create(&threads[i], NULL, count_thread, NULL));
  for (i = 0; i < 4; i++)
    pthread_join(threads[i], NULL);
  ASSERT_EQ(400000, counter);
}

int main(void) {
  RUN(test_codes_out_of_errno_range);
  RUN(test_coarse_clock_is_the_clock);
  RUN(test_region_commits_as_it_grows);
  RUN(test_discarded_pages_stay_usable);
  RUN(test_once_runs_once);
  RUN(test_mutex_excludes);
  return 0;
}
