/* The OS layer's types on Windows (os/os.h): an SRWLOCK and an INIT_ONCE,
 * each one pointer, without <windows.h> in every file of the core. Its
 * functions are os/win/os.c's. */
#ifndef WL_OS_WIN_H
#define WL_OS_WIN_H

typedef struct {
  void *ptr;
} wl__os_mutex_t;
typedef struct {
  void *ptr;
} wl__os_once_t;
#define WL__OS_MUTEX_INIT {0}
#define WL__OS_ONCE_INIT {0}

#define WL__OS_MUTEX_INLINE 0

#endif
