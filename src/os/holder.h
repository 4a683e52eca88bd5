/* The words of a mutex in the file that a family guards with a byte-range
 * lock the system gives up when its holder dies (os/posix/mutex.c,
 * os/win/mutex.c): `holder` says "held" (the holder's pid, set once the
 * byte is taken, cleared before it is given back), `broken` "unusable for
 * good" (LMDB's rule). A taker that got the byte and finds `holder` set
 * follows a holder that died holding it: a live one would hold the byte,
 * or the taker's process's own lock of the file.
 *
 * A process killed at any instruction (each step has a fault point):
 *   - before `holder` is set ("mutex-locked", the family's): the next taker
 *     finds it 0; the dead process had changed nothing yet;
 *   - once it is set ("mutex-held"), until it is cleared: the next taker
 *     finds it set and repairs (WL__EOWNERDEAD), a repair that dies too
 *     included;
 *   - once it is cleared ("mutex-freed"): nothing to repair;
 *   - a taker that found its holder dead gives it back without marking it
 *     consistent: `broken` is set ("mutex-broken") before `holder` is
 *     cleared, so every later taker finds it unusable (WL_ECORRUPT).
 * Included by the families' mutex.c only. */
#ifndef WL_OS_HOLDER_H
#define WL_OS_HOLDER_H

#include "machine.h"

/* Once the byte is taken: 0; WL__EOWNERDEAD (and *dead set) when the last
 * holder died holding it; WL_ECORRUPT when it is unusable (the caller then
 * gives the byte back). */
static inline int wl__holder_enter(wl__os_file_mutex_t *mu, uint32_t pid,
                                   int *dead) {
  uint32_t was;

  if (__atomic_load_n(&mu->broken, __ATOMIC_SEQ_CST) != 0)
    return WL_ECORRUPT;
  was = __atomic_exchange_n(&mu->holder, pid, __ATOMIC_SEQ_CST);
  WL__FAULT("mutex-held");
  if (__builtin_expect(was == 0, 1))
    return 0;
  *dead = 1;
  return WL__EOWNERDEAD;
}

/* Before the byte is given back. */
static inline void wl__holder_leave(wl__os_file_mutex_t *mu, int *dead) {
  if (*dead) {
    __atomic_store_n(&mu->broken, 1, __ATOMIC_SEQ_CST);
    WL__FAULT("mutex-broken");
    *dead = 0;
  }
  __atomic_store_n(&mu->holder, 0, __ATOMIC_SEQ_CST);
  WL__FAULT("mutex-freed");
}

#endif
