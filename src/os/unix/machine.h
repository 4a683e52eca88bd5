/* What the machine-wide manager's Unix files share (os/unix/: file.c,
 * wake.c, sweep.c), and what each family (os/linux/, os/posix/) supplies to
 * them. Included by those files only. */
#ifndef WL_OS_UNIX_MACHINE_H
#define WL_OS_UNIX_MACHINE_H

#include <pthread.h>
#include <sys/stat.h>

#include "../machine.h"

/* ---- From each family ---------------------------------------------- */

/* m->fd is open on the file whose identity is st, and mapped: the family
 * notes it (the POSIX family: this process's state of the file, m->local).
 * 0 or WL_ENOMEM. */
int wl__os_file_join(wl_manager_t *m, const struct stat *st);
/* Closes m->fd (then -1), joined or not, as the family's locks allow: on
 * Linux at once; in the POSIX family only once no other handle of this
 * process has the file open (os/posix/local.c). */
void wl__os_file_leave(wl_manager_t *m);
/* Closes fd, opened by a name made from a number read from a file (which
 * may name any file beside it: another scope's file, or a hard link to
 * one), as the family's locks allow: on Linux at once; in the POSIX family
 * kept, like a second handle's, when it is of a file that this process has
 * open as a scope (closing it would drop the process's locks on that
 * file: os/posix/posix.h point 3). */
void wl__os_fd_close_foreign(int fd);

/* ---- From os/unix/file.c ---------------------------------------------- */

/* Whether st, of the file now at path, is the file opened (m->fd), with
 * one name: 0, or an error code with a message. */
int wl__os_file_same(wl_manager_t *m, const char *path, const struct stat *st,
                     char *err, size_t errlen);

/* ---- From os/unix/sweep.c --------------------------------------------- */

/* Starts a thread that gets none of the process's signals (they go to its
 * own threads): 0 or an error code. */
int wl__thread_start(pthread_t *thread, void *(*fn)(void *), void *arg);
/* Names the calling thread, where the system shows thread names. */
void wl__thread_name(const char *name);

/* A thread that sweeps a manager (runs sweep(m), which takes its mutex)
 * whenever a watcher asks, and only then: a watcher never takes the
 * mutex itself. Asks that come while it sweeps are answered by one more
 * sweep. */
typedef struct {
  wl_manager_t *m;
  int (*sweep)(wl_manager_t *m);
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cond;
  int asked;   /* under mu: a sweep was asked for since the last began */
  int done;    /* under mu: the thread is to end */
  int running; /* started and not yet joined */
} wl__sweeper_t;

int wl__sweeper_start(wl__sweeper_t *s, wl_manager_t *m,
                      int (*sweep)(wl_manager_t *m));
void wl__sweeper_ask(wl__sweeper_t *s);
/* Ends and joins the thread, if it runs (never under the mutex: it may be
 * waiting for it). A watcher may still ask, for nothing, until the sweeper
 * is freed: the watcher is stopped first. */
void wl__sweeper_stop(wl__sweeper_t *s);
void wl__sweeper_free(wl__sweeper_t *s);

#endif
