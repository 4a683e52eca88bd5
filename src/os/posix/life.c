/* Proof of life in the POSIX family (os/machine.h; os/posix/posix.h): a
 * write lock of the owner's process on one byte of the scope's file, at
 * WL__LIFE_AT + the owner record's offset, which the system releases when
 * the process dies. Others test it with F_GETLK through the file's one
 * descriptor in their process: a process never sees its own locks that
 * way, so its own owners are listed in its state of the file (under the
 * file's mutex, as every call here is made) and never tested. */
#define _GNU_SOURCE
#define _DARWIN_C_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "posix.h"

int wl__os_life_take(wl_manager_t *m, wl_off_t owner) {
  wl__os_local_t *l = m->local;
  wl__os_owner_t *o = malloc(sizeof(*o));

  if (o == NULL)
    return WL_ENOMEM;
  if (wl__posix_lock(l->fd, F_SETLK, F_WRLCK, WL__LIFE_AT + (off_t)owner) !=
      0) {
    free(o);
    return -errno;
  }
  o->off = owner;
  o->next = l->owners;
  l->owners = o;
  return 0;
}

void wl__os_life_give(wl_manager_t *m, wl_off_t owner) {
  wl__os_local_t *l = m->local;
  wl__os_owner_t **at, *o;

  for (at = &l->owners; *at != NULL && (*at)->off != owner; at = &(*at)->next)
    ;
  if ((o = *at) != NULL) {
    *at = o->next;
    free(o);
  }
  wl__posix_lock(l->fd, F_SETLK, F_UNLCK, WL__LIFE_AT + (off_t)owner);
}

pid_t wl__posix_holder(wl_manager_t *m, wl_off_t o) {
  struct flock fl;

  memset(&fl, 0, sizeof(fl));
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = WL__LIFE_AT + (off_t)o;
  fl.l_len = 1;
  if (fcntl(m->local->fd, F_GETLK, &fl) != 0)
    return 0;
  return fl.l_type == F_UNLCK ? -1 : fl.l_pid > 0 ? fl.l_pid : 0;
}

/* When in doubt (the test fails), it is held. */
int wl__os_life_held(wl_manager_t *m, wl_off_t owner) {
  const wl__os_owner_t *o;

  for (o = m->local->owners; o != NULL; o = o->next) {
    if (o->off == owner)
      return 1;
  }
  return wl__posix_holder(m, owner) != -1;
}

/* Nothing to open: every test goes through the one descriptor, so the file
 * at the path is only stat'ed (posix.h, point 3). */
int wl__os_file_probe(wl_manager_t *m, const char *path, char *err,
                      size_t errlen) {
  struct stat st;

  if (lstat(path, &st) != 0)
    return wl__say(err, errlen, WL_ECORRUPT,
                   "%s was replaced while it was being opened", path);
  return wl__os_file_same(m, path, &st, err, errlen);
}

/* The system marks no word of the POSIX family at a death: only the lock
 * says whether its owner lives. */
int wl__os_life_ended(const wl__owner_t *o) {
  (void)o;
  return 0;
}
