/* This process's state of each scope file it has open (os/posix/posix.h,
 * points 1 to 4): found by the file's device and inode, shared by every
 * handle of the file in the process, and the keeper of every descriptor of
 * the file that this layer opened, closed only once no handle of the
 * process has the file open (closing one drops all the process's locks on
 * the file). */
#define _GNU_SOURCE
#define _DARWIN_C_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "posix.h"

static pthread_mutex_t wl__locals_mu = PTHREAD_MUTEX_INITIALIZER;
static wl__os_local_t *wl__locals; /* under wl__locals_mu */
static pid_t wl__locals_pid;       /* the process they are of */

int wl__posix_lock(int fd, int cmd, short type, off_t at) {
  struct flock fl;

  memset(&fl, 0, sizeof(fl));
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = at;
  fl.l_len = 1;
  return fcntl(fd, cmd, &fl);
}

/* Under wl__locals_mu: the state of the file (dev, ino), or NULL. A forked
 * child forgets its parent's states: it holds none of their locks. */
static wl__os_local_t *wl__find(uint64_t dev, uint64_t ino) {
  wl__os_local_t *l;

  if (wl__locals_pid != getpid()) {
    wl__locals = NULL;
    wl__locals_pid = getpid();
  }
  for (l = wl__locals; l != NULL; l = l->next) {
    if (l->dev == dev && l->ino == ino)
      return l;
  }
  return NULL;
}

/* Keeps fd with l, to be closed with its last handle; without the memory
 * to keep it, it stays open for good rather than drop the locks. */
static void wl__keep(wl__os_local_t *l, int fd) {
  if (l->nkept == l->capkept) {
    size_t cap = l->capkept == 0 ? 4 : 2 * l->capkept;
    int *kept = realloc(l->kept, cap * sizeof(*kept));
    if (kept == NULL)
      return;
    l->kept = kept;
    l->capkept = cap;
  }
  l->kept[l->nkept++] = fd;
}

int wl__os_file_join(wl_manager_t *m, const struct stat *st) {
  wl__os_local_t *l;
  int rc = 0;

  pthread_mutex_lock(&wl__locals_mu);
  l = wl__find((uint64_t)st->st_dev, (uint64_t)st->st_ino);
  if (l == NULL) {
    l = calloc(1, sizeof(*l));
    if (l == NULL || pthread_mutex_init(&l->mu, NULL) != 0) {
      free(l);
      l = NULL;
      rc = WL_ENOMEM;
    } else {
      l->pid = wl__locals_pid;
      l->dev = (uint64_t)st->st_dev;
      l->ino = (uint64_t)st->st_ino;
      l->fd = m->fd;
      l->next = wl__locals;
      wl__locals = l;
    }
  }
  if (l != NULL) {
    l->refs++;
    m->local = l;
  }
  pthread_mutex_unlock(&wl__locals_mu);
  return rc;
}

static void wl__free_local(wl__os_local_t *l) {
  wl__os_local_t **at;
  size_t i;

  for (at = &wl__locals; *at != NULL && *at != l; at = &(*at)->next)
    ;
  if (*at != NULL)
    *at = l->next;
  for (i = 0; i < l->nkept; i++)
    close(l->kept[i]);
  while (l->owners != NULL) {
    wl__os_owner_t *o = l->owners;
    l->owners = o->next;
    free(o);
  }
  pthread_mutex_destroy(&l->mu);
  free(l->kept);
  free(l);
}

/* Under wl__locals_mu: closes fd, a descriptor that no handle took its
 * locks through, unless it is of a file that a handle has (found by its
 * identity): then it is kept with the file's state. One whose identity
 * cannot be had stays open. */
static void wl__close_or_keep(int fd) {
  wl__os_local_t *l;
  struct stat st;

  if (fstat(fd, &st) != 0)
    return;
  l = wl__find((uint64_t)st.st_dev, (uint64_t)st.st_ino);
  if (l == NULL)
    close(fd);
  else
    wl__keep(l, fd);
}

/* A descriptor of a handle that has not joined (a failed open) may be of a
 * file that another handle has. */
void wl__os_file_leave(wl_manager_t *m) {
  wl__os_local_t *l = m->local;

  if (m->fd < 0)
    return;
  pthread_mutex_lock(&wl__locals_mu);
  if (l == NULL) {
    wl__close_or_keep(m->fd);
  } else if (--l->refs > 0) {
    wl__keep(l, m->fd);
  } else {
    close(m->fd);
    wl__free_local(l);
  }
  pthread_mutex_unlock(&wl__locals_mu);
  m->local = NULL;
  m->fd = -1;
}

void wl__os_fd_close_foreign(int fd) {
  pthread_mutex_lock(&wl__locals_mu);
  wl__close_or_keep(fd);
  pthread_mutex_unlock(&wl__locals_mu);
}
