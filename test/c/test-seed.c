/* A new scope file's name-hash seed. Names may come from untrusted input,
 * so the hash is seeded (core/region.c); the seed of a machine-wide region
 * must not be guessable from what an outsider knows (the second the file
 * was made, the creating process's pid). This inverts the finalizer, takes
 * out the second and the pid as a clock-based seed would place them, and
 * measures what stays unknown (a seed of two clock readings whose
 * nanoseconds cancelled left about 15 bits; now the seed is drawn from the
 * system's random numbers). */
#define _GNU_SOURCE

#include <time.h>
#include <unistd.h>

#include "test.h"

static uint64_t unxorshift(uint64_t k) { return k ^ (k >> 33); }

/* The inverse of wl__fmix (each step is a bijection). */
static uint64_t fmix_inverse(uint64_t k) {
  k = unxorshift(k);
  k *= 0x9cb4b2f8129337dbULL; /* inverse of 0xc4ceb9fe1a85ec53 */
  k = unxorshift(k);
  k *= 0x4f74430c22a54005ULL; /* inverse of 0xff51afd7ed558ccd */
  k = unxorshift(k);
  return k;
}

static int bits(uint64_t x) { return x == 0 ? 0 : 64 - __builtin_clzll(x); }

static void test_seed_unknown_bits(void) {
  char path[128];
  int i, most = 0;

  ASSERT_EQ(0x1234567890abcdefULL, fmix_inverse(wl__fmix(0x1234567890abcdefULL)));
  for (i = 0; i < 16; i++) {
    char what[32];
    wl_manager_t *m;
    uint64_t pre, sec, pid = (uint64_t)getpid(), least = UINT64_MAX;
    int s, low;

    snprintf(what, sizeof(what), "seed-%d", i);
    tshm_path(path, sizeof(path), what);
    sec = (uint64_t)time(NULL);
    m = tscope_open(path, 1 << 20);
    /* seed | 1 lost bit 0: both pre-images; the second may have ticked. */
    for (low = 0; low < 2; low++) {
      pre = fmix_inverse((WL__HDR(m)->seed & ~(uint64_t)1) | (uint64_t)low);
      for (s = 0; s < 2; s++) {
        uint64_t t = sec + (uint64_t)s;
        /* What an outsider can compute, placed as either formula (before
         * the split, and now) places it; the rest is what they must guess. */
        uint64_t r1 = pre ^ t ^ (t << 32) ^ (pid << 16); /* now */
        uint64_t r2 = pre ^ t ^ (pid << 32);              /* before */
        if (r1 < least)
          least = r1;
        if (r2 < least)
          least = r2;
      }
    }
    fprintf(stderr, "  open %2d: %2d unknown bits\n", i, bits(least));
    if (bits(least) > most)
      most = bits(least);
    wl_scope_close(m);
    unlink(path);
  }
  fprintf(stderr, "  at most %d unknown bits in 16 seeds\n", most);
  ASSERT(most >= 26);
}

int main(void) {
  RUN(test_seed_unknown_bits);
  return 0;
}
