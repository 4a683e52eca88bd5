/* Proof of life on Linux (os/machine.h): an open-file-description (OFD)
 * write lock on one byte of the scope's file, at WL__LIVE_BASE + the owner
 * record's offset, taken through the file the process mapped. The kernel
 * releases it when the process dies, however it dies, once its memory is
 * torn down (about 100 ms per GiB: the death watch, os/linux/watch.c, is
 * sooner). Others test it through a second open of the file (m->probe_fd):
 * an OFD lock never conflicts with its own file description. An OFD lock
 * belongs to its open file description: closing another descriptor of the
 * file (a test's, or another handle's) drops none of them. */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "../unix/machine.h"

#define WL__LIVE_BASE ((uint64_t)1 << 48)

static int wl__life_lock(int fd, int cmd, short type, wl_off_t owner,
                         struct flock *fl) {
  memset(fl, 0, sizeof(*fl));
  fl->l_type = type;
  fl->l_whence = SEEK_SET;
  fl->l_start = (off_t)(WL__LIVE_BASE + owner);
  fl->l_len = 1;
  return fcntl(fd, cmd, fl);
}

int wl__os_life_take(wl_manager_t *m, wl_off_t owner) {
  struct flock fl;

  return wl__life_lock(m->fd, F_OFD_SETLK, F_WRLCK, owner, &fl) == 0 ? 0
                                                                     : -errno;
}

void wl__os_life_give(wl_manager_t *m, wl_off_t owner) {
  struct flock fl;

  wl__life_lock(m->fd, F_OFD_SETLK, F_UNLCK, owner, &fl);
}

/* When in doubt (no probe, or the test fails), it is held. */
int wl__os_life_held(wl_manager_t *m, wl_off_t owner) {
  struct flock fl;

  if (m->probe_fd < 0 ||
      wl__life_lock(m->probe_fd, F_OFD_GETLK, F_WRLCK, owner, &fl) != 0)
    return 1;
  return fl.l_type != F_UNLCK;
}

/* A second open of the same file (by the path, not the descriptor: the file
 * at the path must be the one mapped). */
int wl__os_file_probe(wl_manager_t *m, const char *path, char *err,
                      size_t errlen) {
  struct stat st;
  int rc;

  m->probe_fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (m->probe_fd < 0 || fstat(m->probe_fd, &st) != 0)
    rc = wl__say(err, errlen, WL_ECORRUPT,
                 "%s was replaced while it was being opened", path);
  else
    rc = wl__os_file_same(m, path, &st, err, errlen);
  if (rc != 0 && m->probe_fd >= 0) {
    close(m->probe_fd);
    m->probe_fd = -1;
  }
  return rc;
}
