/* The OS layer: what the core asks of the system, stated as guarantees
 * rather than system calls (as SQLite's os.h). One file per OS family keeps
 * them: os/unix/os.c (Linux and macOS) and os/win/os.c (Windows). The
 * machine-wide manager's facilities (map a file, a mutex in it, lock a byte
 * for proof of life, wait for a death, wake an agent) exist on Linux and
 * macOS, declared in os/machine.h. */
#ifndef WL_OS_H
#define WL_OS_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "../core/wl.h"

/* The holder of a machine-wide manager's mutex died holding it
 * (wl__os_file_mutex_lock, os/machine.h): one of the core's own codes,
 * never returned to callers. */
#define WL__EOWNERDEAD (-30100)

/* The types, and what is inline, per platform. */
#if defined(_WIN32)
#include "win/os.h"
#else
#include "unix/os.h"
#endif

/* A mutex of this process's threads. Initialising one: 0 or WL_ENOMEM.
 * Taking one returns 0 (WL_ECORRUPT if the system fails it). */
int wl__os_mutex_init(wl__os_mutex_t *mu);
void wl__os_mutex_destroy(wl__os_mutex_t *mu);
/* Inline where the platform's header says so (os/unix/os.h): every
 * operation of the core takes and gives back a mutex. */
#if !WL__OS_MUTEX_INLINE
int wl__os_mutex_lock(wl__os_mutex_t *mu);
void wl__os_mutex_unlock(wl__os_mutex_t *mu);
#endif

/* Runs fn once per process, whichever threads call it at once; every caller
 * returns after fn has. */
void wl__os_once(wl__os_once_t *once, void (*fn)(void));

/* Reserves address space for a region: the largest power of two from
 * *size down to min that the system grants, readable and writable once
 * committed. Sets *size to it and *usable to how much of it, from its
 * start, is committed already: all of it where the system backs pages when
 * first touched (Linux, macOS), none where it commits only what is asked
 * (Windows, which has no overcommit). NULL when nothing can be reserved. */
void *wl__os_reserve(uint64_t *size, uint64_t min, uint64_t *usable);

/* Commits [from, to) of a reservation (page-aligned offsets from its base),
 * so that touching it cannot fail: 0, or WL_ENOMEM when the system has no
 * memory to promise. */
int wl__os_commit(void *base, uint64_t from, uint64_t to);

/* Gives the memory of whole pages back to the system. They stay committed
 * and usable; what they read afterwards is unspecified (Linux reads zeroes,
 * macOS and Windows may keep the old bytes): the core writes every byte of
 * a block before it reads it. */
void wl__os_discard(void *addr, uint64_t len);

uint64_t wl__os_page_size(void);

/* Nanoseconds of a monotonic clock that every process of the machine
 * reads alike (not since any set point), never 0. */
uint64_t wl__os_now(void);
/* The same clock, read more cheaply where the system can, at the
 * resolution of its scheduler's tick: for the times that records keep
 * (wl__stamp), which every request reads and which are only shown, never
 * waited on. It may be behind wl__os_now() by a tick or more (when ticks
 * are deferred), never ahead. */
uint64_t wl__os_now_coarse(void);
/* This process's id. */
uint32_t wl__os_pid(void);

/* Bits that differ from process to process and from run to run, to seed
 * the hash of names, which may come from untrusted input. */
uint64_t wl__os_entropy(void);

/* Writes a message into err (unless errlen is 0) and returns rc: how the
 * machine-wide manager's opening says what went wrong, in its words and
 * the OS layer's. */
__attribute__((format(printf, 4, 5))) static inline int
wl__say(char *err, size_t errlen, int rc, const char *fmt,
                          ...) {
  va_list ap;

  if (errlen > 0) {
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return rc;
}

#endif
