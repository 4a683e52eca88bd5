/* The OS layer's types on Linux and macOS (os/os.h), and its mutex, inline:
 * a pthread mutex of the process (a machine-wide manager's, in its file, is
 * os/machine.h's). */
#ifndef WL_OS_UNIX_H
#define WL_OS_UNIX_H

#include <pthread.h>

typedef pthread_mutex_t wl__os_mutex_t;
typedef pthread_once_t wl__os_once_t;
#define WL__OS_MUTEX_INIT PTHREAD_MUTEX_INITIALIZER
#define WL__OS_ONCE_INIT PTHREAD_ONCE_INIT

#define WL__OS_MUTEX_INLINE 1

static inline int wl__os_mutex_lock(wl__os_mutex_t *mu) {
  int rc = pthread_mutex_lock(mu);

  if (__builtin_expect(rc == 0, 1))
    return 0;
  return WL_ECORRUPT;
}

static inline void wl__os_mutex_unlock(wl__os_mutex_t *mu) {
  pthread_mutex_unlock(mu);
}

#endif
