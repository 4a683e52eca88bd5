/* The POSIX family of the machine-wide manager's OS layer (os/machine.h):
 * macOS's, and Linux's when a build asks for it (WL_OS_POSIX=1), so that
 * all of it but a few lines runs in this project's tests. Its files:
 * local.c (this process's state of each file), mutex.c, life.c, watch.c.
 *
 * Its locks are process-associated fcntl byte-range locks (POSIX record
 * locks) on bytes of the scope's file far past its end (a lock needs no
 * data there): the mutex's byte at WL__MUTEX_AT, and each owner's proof of
 * life at WL__LIFE_AT + its record's offset. The system releases a
 * process's locks when it exits, however it dies: Linux as it closes its
 * files (after tearing down its memory), macOS in proc_exit's fdfree
 * (before it posts NOTE_EXIT). What the design rests on, and what it does
 * about each property of these locks:
 *
 * 1. They are the process's, not a thread's: threads of one process never
 *    exclude each other with them. So the mutex is two: a pthread mutex of
 *    this process, then the byte. Every handle of one file in a process
 *    (the binding maps a file once per process; a program may open it
 *    twice) shares that pthread mutex and the rest of this process's state
 *    of the file (wl__os_local_t), found by the file's device and inode.
 *    ASSUMED: one copy of this code per process opens a given file. Two
 *    copies of the addon loaded in one process (two installed copies of
 *    the package) each keep a state of their own, and would neither exclude
 *    each other nor see each other's owners alive.
 * 2. A process's locks never conflict with its own: F_GETLK never reports
 *    them. So this process's owners of the file are listed in its state,
 *    and never tested through their byte (life.c).
 * 3. Closing ANY descriptor of the file drops ALL of the process's locks on
 *    it. So no descriptor of a file that a handle of this process has open
 *    is ever closed while one does: a failed second open's and a closed
 *    handle's are kept in the file's state and closed with the last handle
 *    (wl__os_file_leave), and the check of the file at the path opens
 *    nothing (a stat). A FIFO's name made from a number in a file may name
 *    a scope's file (os/unix/wake.c): what is at it is looked at before it
 *    is opened, and a descriptor that turns out to be of a file that this
 *    process has open as a scope (swapped in between) is kept the same way
 *    (wl__os_fd_close_foreign): one more descriptor, until the file's last
 *    handle closes, per swap won. ASSUMED: nothing else in a process that
 *    has a scope open opens and closes the scope's file (a test that reads
 *    it does so from a process of its own). One that does drops the
 *    process's locks without a word: its owners look dead to the other
 *    processes, which end their agents at their next sweep, and the mutex's
 *    byte is let go while a thread may hold it (test/c/test-posix.c shows
 *    the loss).
 * 4. A forked child has none of its parent's locks. So a child forgets its
 *    parent's states of files (by pid); a handle opened before a fork is
 *    not to be used in the child (nor is one on Linux: the robust mutex's
 *    holder is a thread).
 * 5. A blocking wait (F_SETLKW) is checked for a cycle of processes each
 *    waiting for the next (EDEADLK), processes and not threads, across
 *    every file: a process whose thread waits for one scope's mutex while
 *    another of its threads holds a second scope's looks, to a process
 *    asking for the second, like a cycle. No holder of a mutex's byte
 *    waits for any lock (the death watch never waits for one: watch.c), so
 *    EDEADLK is never a true cycle, and the taker asks again (mutex.c).
 * 6. exec releases the process's locks too (its descriptors of the file are
 *    close-on-exec), and the process lives on: the death watch watches
 *    for an exec as for an exit (watch.c; on Linux not while a child
 *    forked before it shares its open of the file).
 *
 * The mutex's words in the file (wl__os_file_mutex_t) say "held" (holder:
 * the holder's pid, set after taking both locks, cleared before giving
 * them back) and "unusable" (broken). Taking both locks and finding holder
 * set means its holder died holding it: a live one would hold the byte, or
 * this process's pthread mutex (mutex.c). */
#ifndef WL_OS_POSIX_H
#define WL_OS_POSIX_H

#include <sys/types.h>

#include "../unix/machine.h"

/* Far past any file's end (a region is at most 2^40 bytes). */
#define WL__MUTEX_AT ((off_t)1 << 47)
#define WL__LIFE_AT ((off_t)1 << 48)

/* One of this process's owners of the file. */
typedef struct wl__os_owner_s {
  struct wl__os_owner_s *next;
  wl_off_t off;
} wl__os_owner_t;

/* This process's state of a file that it has open, shared by its handles of
 * the file (local.c). */
typedef struct wl__os_local_s {
  struct wl__os_local_s *next;
  uint64_t dev, ino;
  pid_t pid;     /* this process's (getpid() is a system call) */
  unsigned refs; /* handles; under the table's mutex (local.c) */
  int fd;        /* what every lock is taken through: the first handle's */
  int *kept;     /* the other descriptors of the file, closed with the last */
  size_t nkept, capkept;
  pthread_mutex_t mu; /* the file's mutex among this process's threads */
  /* Under mu (so under the file's mutex): */
  int dead;                /* taken after its holder died, not repaired */
  wl__os_owner_t *owners; /* this process's owners of the file */
} wl__os_local_t;

/* Takes or gives back a write lock of this process on the byte at `at`
 * (cmd: F_SETLK or F_SETLKW; type: F_WRLCK or F_UNLCK) through fd: 0, or
 * -1 with errno set. */
int wl__posix_lock(int fd, int cmd, short type, off_t at);
/* The pid of the process that holds owner o's proof of life, as this
 * process names it: > 0; 0 when the system cannot name it here (Linux:
 * another pid namespace) or cannot say; -1 when no other process holds it
 * (life.c). */
pid_t wl__posix_holder(wl_manager_t *m, wl_off_t o);

#endif
