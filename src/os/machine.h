/* What a machine-wide manager asks of the OS, beside os.h: stated as
 * guarantees, as SQLite's os.h states its xShm* methods. The core
 * (core/scope.c, core/owners.c, core/recover.c, the algorithms) calls these
 * and nothing else of the system for it. Three families keep them, each in
 * a folder of its own; the first two on what they share in os/unix/ (the
 * file, wake-ups by FIFO, the sweeper thread: os/unix/machine.h):
 *   os/linux/  Linux: a robust process-shared pthread mutex in the file, OFD
 *              locks for proof of life, robust futexes for the death watch;
 *   os/posix/  macOS, and Linux when asked (WL_OS_POSIX=1, for its tests):
 *              process-associated fcntl locks for the mutex and for proof of
 *              life, pidfd or kqueue for the death watch (os/posix/posix.h);
 *   os/win/    Windows: LockFileEx byte-range locks for the mutex and for
 *              proof of life, process handles for the death watch, named
 *              events for wake-ups (os/win/machine.h).
 * They call nothing of the core: what they need of a record comes to them as
 * arguments, and the sweep they start as a function.
 *
 * Every function here is given a manager whose region is mapped from a file
 * that other processes, of other users and other versions of the package,
 * may map and write: nothing read from it is trusted. Where a message is
 * asked for (err, errlen), a failure writes one that names the file. */
#ifndef WL_OS_MACHINE_H
#define WL_OS_MACHINE_H

#include "../core/records.h"

/* The family: os/posix/ off Linux and Windows, or on Linux when the build
 * asks for it. */
#ifndef WL_OS_POSIX
#if defined(__linux__) || defined(_WIN32)
#define WL_OS_POSIX 0
#else
#define WL_OS_POSIX 1
#endif
#endif

/* ---- The file -------------------------------------------------------- */

/* The permission bits a scope's file may have: read and write for its
 * owner, and for its group and for others either both or neither. A user
 * who may only read the file, or only write it, could still hold locks on
 * it (a read lock needs only a descriptor opened for reading, a write
 * lock one opened for writing) and so stall every process of the scope,
 * without being one of them. */
#define WL__MODE_OK(bits)                                                    \
  (((bits) & ~0666u) == 0 && ((bits) & 0600u) == 0600u &&                    \
   ((bits) & 0060u) % 0060u == 0 && ((bits) & 0006u) % 0006u == 0)

/* Makes a file of `size` bytes for path, with exactly the permission bits `mode`, where no other process can open
 * it yet, and maps it (m->map, m->map_size, m->fd, m->gid): 0 or an error
 * code. Its bytes read as zeroes; the caller makes it whole, then puts it
 * in place (wl__os_file_publish), or drops it (wl__os_file_drop). */
int wl__os_file_create(wl_manager_t *m, const char *path, uint64_t size,
                       unsigned mode, char *err, size_t errlen);
/* Puts the file made by wl__os_file_create at path, with one name at every
 * moment: 0; -EEXIST, with no message, if another process's is there. */
int wl__os_file_publish(wl_manager_t *m, const char *path, char *err,
                        size_t errlen);
/* Opens and maps the file at path (m->map, m->map_size, m->fd, m->mode,
 * m->gid): -ENOENT, with no message, if there is none. Only a regular file
 * that is ours, or another user's that both that user's permission bits
 * and `mode` open to others, and of at least one page, is mapped. */
int wl__os_file_attach(wl_manager_t *m, const char *path, unsigned mode,
                       char *err, size_t errlen);
/* Whether the open file passes attach's test of its owner and bits for
 * `mode` (of this process's user: a private scope trusts no other user's
 * file): 0, or WL_EACCES with a sentence. */
int wl__os_file_admit(wl_manager_t *m, const char *path, unsigned mode,
                      char *err, size_t errlen);
/* Unmaps and closes what create (removing the unpublished file) or attach
 * opened. */
void wl__os_file_drop(wl_manager_t *m);
/* Has the file system keep the region's bytes [m->limit, upto) (from the
 * file's start, with the first reservation): a store there never faults
 * (SIGBUS) for want of room. 0, or WL_ENOMEM when it cannot. A file system
 * that cannot reserve at all keeps the old behaviour (0). */
int wl__os_file_reserve(wl_manager_t *m, uint64_t upto);
/* Checks that the file at path is still the one opened (m->fd), with one
 * name (a hard link would give its agents two sets of wake-up names), and
 * readies the test of other processes' proof of life (a second open of
 * it: on Linux m->probe_fd, on Windows a handle of its own). 0 or an error
 * code, with a message. */
int wl__os_file_probe(wl_manager_t *m, const char *path, char *err,
                      size_t errlen);
/* The file's device and inode, for a process's table of open scopes. */
int wl__os_file_identity(wl_manager_t *m, uint64_t *dev, uint64_t *ino);
/* The same of the file at path, if it is a regular file with one name,
 * not reached through a symbolic link: 0, or -1. */
int wl__os_path_identity(const char *path, uint64_t *dev, uint64_t *ino);
/* Closes what wl__os_file_probe opened, then what create or attach did. */
void wl__os_file_close(wl_manager_t *m);
/* The memory a repair works in (m->work, m->work_size = size): address
 * space that costs nothing until touched. 0 or WL_ENOMEM. */
int wl__os_work_map(wl_manager_t *m, uint64_t size);
void wl__os_work_unmap(wl_manager_t *m);

/* ---- The mutex in the file ------------------------------------------- */

/* A mutex of every thread of every process that maps the file (its words
 * at offset 40 of the file, m->file_mutex), which the system gives up when
 * its holder dies, and whose next taker learns so. Its layout is the
 * family's, and part of the file's ABI (core/scope.c). */
#if defined(_WIN32) || WL_OS_POSIX
/* Its words, guarded by a byte-range lock (os/holder.h). */
struct wl__os_file_mutex_s {
  uint32_t holder; /* the holder's pid while it is held, else 0 */
  uint32_t broken; /* 1 once it is unusable for good */
};
#else
struct wl__os_file_mutex_s {
  pthread_mutex_t mu; /* process-shared and robust */
};
#endif
typedef struct wl__os_file_mutex_s wl__os_file_mutex_t;

/* Initialises it in a new file: 0 or an error code. */
int wl__os_file_mutex_init(wl__os_file_mutex_t *mu);
/* Takes m's: 0; WL__EOWNERDEAD when its last holder died holding it (it is
 * then held, and the state it guards is to be repaired); WL_ECORRUPT when
 * it can no longer be taken (it is then not held). Once the state is
 * repaired, the taker marks it consistent; a taker that gives it back
 * without doing so leaves it unusable for good (every later lock fails
 * with WL_ECORRUPT), as LMDB's mdb_mutex_failed does. */
int wl__os_file_mutex_lock(wl_manager_t *m);
void wl__os_file_mutex_unlock(wl_manager_t *m);
void wl__os_file_mutex_consistent(wl_manager_t *m);
/* For a look that leaves the file as found (wl_scope_peek): runs look(arg) with m's mutex held, and returns 0; or, without
 * running it, WL__EOWNERDEAD when its last holder died holding it (left so,
 * for the next taker to repair), WL_ECORRUPT when it can no longer be
 * taken, -ETIMEDOUT when another holds it for wait_ms milliseconds. Linux
 * takes it from a thread of its own: one that finds its holder dead ends
 * holding it, and the system marks it so again. */
int wl__os_file_mutex_peek(wl_manager_t *m, unsigned wait_ms,
                           void (*look)(void *arg), void *arg);

/* ---- Proof of life ----------------------------------------------------- */

/* A mark of a live process that the system removes when the process dies,
 * however it dies, and that any process of the scope can test: one per
 * owner record (its offset `owner`). Take: 0, or an error code if another
 * process holds it (a dead owner's, until the system has let go of it).
 * Held: 1 while any process holds it, and when in doubt. */
int wl__os_life_take(wl_manager_t *m, wl_off_t owner);
void wl__os_life_give(wl_manager_t *m, wl_off_t owner);
int wl__os_life_held(wl_manager_t *m, wl_off_t owner);

/* ---- Wake-ups ------------------------------------------------------------ */

/* A number no one can predict, never 0, or an error code: for the names of
 * an agent's wake-up and of a file being made. */
int wl__os_draw(uint64_t *number);
/* Makes and opens an agent's wake-up, named by a number drawn for it,
 * which is stored at *stored (its record: a sweep after this process dies
 * at any point here finds it) before the wake-up exists: 0 and in *on what
 * its thread waits on (a descriptor its event loop polls, an event), or an
 * error code; the number in *wake, 0 if none. Under the mutex. */
int wl__os_wake_open(wl_manager_t *m, uint64_t *stored, uint64_t *wake,
                     wl_wait_t *on);
/* Closes `on` (if not WL_WAIT_NONE) and removes the wake-up of that
 * number, if it is one (the number may come from the file). */
void wl__os_wake_close(wl_manager_t *m, uint64_t wake, wl_wait_t on);
/* Wakes the agent whose wake-up has that number: what its thread waits on
 * is signalled. `slot` (the agent's record) keeps a recently woken
 * agent's wake-up open. Under the mutex. */
void wl__os_wake(wl_manager_t *m, wl_off_t slot, uint64_t wake);
/* Closes what wl__os_wake keeps open. */
void wl__os_wakers_close(wl_manager_t *m);
/* Wake-ups of this process's user for the scope that no process reads
 * (agents that died): up to max numbers, gathered without the mutex; then,
 * under it, those that still have no reader are removed. */
#define WL__ORPHANS 64
unsigned wl__os_wake_orphans(const wl_manager_t *m, uint64_t *wake,
                             unsigned max);
void wl__os_wake_reap(wl_manager_t *m, const uint64_t *wake, unsigned n);

/* ---- The death watch --------------------------------------------------- */

/* Starts, under the mutex, what notices promptly that the owner `self`
 * watches has died, and then calls sweep(m) from a thread of its own,
 * without the mutex held (sweep takes it). `self`'s life word says its
 * process is alive when it returns 0. */
int wl__os_watch_start(wl_manager_t *m, wl__owner_t *self,
                       int (*sweep)(wl_manager_t *m));
/* Stops the sweeping thread (never under the mutex: it may be waiting for
 * it), then the watching one, which lets go of its life word. */
void wl__os_watch_stop_sweeper(wl_manager_t *m);
void wl__os_watch_stop(wl_manager_t *m);
/* Under the mutex: owner o watches the owner at `target` (0: none) from now
 * on, and its watcher learns so. */
void wl__os_watch_target(wl_manager_t *m, wl__owner_t *o, wl_off_t target);
/* Under the mutex: owner o has ended (its process died, or it closed); what
 * its death watch left beside the file, if anything, is removed. */
void wl__os_watch_end(wl_manager_t *m, wl__owner_t *o);
/* Whether an owner's life word says its process has died, or its watcher
 * has stopped. */
int wl__os_life_ended(const wl__owner_t *o);

#endif
