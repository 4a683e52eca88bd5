/* Wake-ups across processes, as both families make them: every agent of a
 * machine-wide manager (and, in the POSIX family, every owner's watcher:
 * os/posix/watch.c) has a FIFO beside the manager's file, named by the
 * manager's path and a number drawn at random for it (getentropy) and kept
 * in its record. Other users of a shared directory (/dev/shm and /tmp are
 * sticky and world-writable) can list names but cannot predict the next: a name that is taken already (mkfifo fails)
 * is drawn again, and no file this process did not make is ever removed
 * but a dead agent's FIFO, by the number in its record. That number, like
 * everything in the file, may have been written by anyone who can write the
 * file: it is only ever formatted into a name here (never used as bytes of
 * a path), and such a name can only be beside the manager's file; what is
 * at it is opened only if it is a FIFO (wl__fifo_open).
 * The directory is assumed to keep other users from removing this user's
 * files (sticky, as /dev/shm is): one who could remove an agent's FIFO
 * would leave it unwoken. How FIFOs are named is part of the layout
 * (WL_LAYOUT): a version of the package that names them otherwise uses
 * another, and refuses this one's file, so no process looks for a FIFO
 * under a name that its agent's process did not give it.
 * Its thread watches the read end (an event loop polls it, as libuv's
 * uv_poll does); whichever process makes the agent's mailbox non-empty
 * writes one byte to it. Measured on this project's machine: about 3 us one
 * way, no thread of its own, no CPU while idle. A byte written while one is
 * already pending is dropped (EAGAIN on a full FIFO is fine), and a FIFO
 * nobody reads any more (ENXIO: its process is gone) is ignored: the sweep
 * ends its agent and removes its FIFO.
 *
 * The write ends of recently woken agents' FIFOs stay open, so that a
 * wake-up is one write instead of an open, a write and a close. One whose
 * FIFO lost its reader (the agent closed, or its process died) fails with
 * EPIPE and is opened again by name. Writers never see SIGPIPE: Node
 * ignores it. */
#define _GNU_SOURCE      /* getentropy (glibc) */
#define _DARWIN_C_SOURCE /* the same on macOS */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "machine.h"

#define WL__FIFO_PATH_MAX (WL__PATH_MAX + 24)
/* Names drawn before giving up: each is taken with odds of 2^-64 unless
 * something is wrong with the directory or the random numbers. */
#define WL__FIFO_TRIES 4

static int wl__fifo_path(const wl_manager_t *m, uint64_t wake, char *buf,
                         size_t len) {
  int n = snprintf(buf, len, "%s.%016llx", m->path, (unsigned long long)wake);
  return n < 0 || (size_t)n >= len ? WL_EINVAL : 0;
}

int wl__os_draw(uint64_t *wake) {
  do {
    if (getentropy(wake, sizeof(*wake)) != 0)
      return -errno;
  } while (*wake == 0);
  return 0;
}

/* The FIFO just made must be ours (where others may remove files, another
 * could be at its name by now). It gets the manager file's group where
 * this process may give it, and write permission (only: a reader could
 * take wake-ups) for everyone the file admits, whatever the umask and this
 * process's group. A process outside the file's group has been admitted by
 * the file's bits for others: its FIFO keeps its own group, and then both
 * its group and others may write to it when the file is open to anyone but
 * its owner. */
static int wl__fifo_own(const wl_manager_t *m, int fd) {
  unsigned bits = 0600 | (m->mode & 0022);
  struct stat st;

  if (fstat(fd, &st) != 0)
    return -errno;
  if (!S_ISFIFO(st.st_mode) || st.st_uid != geteuid())
    return -EEXIST;
  if (st.st_gid != m->gid && fchown(fd, (uid_t)-1, m->gid) != 0) {
    if (errno != EPERM)
      return -errno;
    bits = 0600 | ((m->mode & 0066) != 0 ? 0022 : 0);
  }
  return fchmod(fd, bits) == 0 ? 0 : -errno;
}

/* Under the mutex. The number is in the record before the FIFO exists, so
 * that a sweep after this process dies at any point here removes it. */
int wl__os_wake_open(wl_manager_t *m, uint64_t *stored, uint64_t *wake,
                     wl_wait_t *on) {
  char path[WL__FIFO_PATH_MAX];
  int fd, rc = -EEXIST, tries;

  for (tries = 0; tries < WL__FIFO_TRIES && rc == -EEXIST; tries++) {
    if ((rc = wl__os_draw(wake)) != 0)
      return rc;
    __atomic_store_n(stored, *wake, __ATOMIC_RELAXED);
    if ((rc = wl__fifo_path(m, *wake, path, sizeof(path))) != 0)
      return rc;
    rc = mkfifo(path, 0600) == 0 ? 0 : -errno;
  }
  if (rc != 0) {
    __atomic_store_n(stored, 0, __ATOMIC_RELAXED);
    *wake = 0;
    return rc;
  }
  /* Read and write: never blocks, and never reports an end of file. */
  fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    rc = -errno;
  else if ((rc = wl__fifo_own(m, fd)) != 0)
    wl__os_fd_close_foreign(fd);
  if (rc != 0) {
    unlink(path);
    return rc;
  }
  *on = fd;
  return 0;
}

/* Only a FIFO is removed: the number may come from the file (a dead
 * agent's record), which anyone who may write it can set, and
 * "<path>.<16 hex digits>" is also the name of another scope's file (scope
 * "s.0123456789abcdef" beside scope "s"). Not only one that no process
 * reads: a killed process's lock on the file is released (and its agents
 * swept) before its FIFOs are closed. In a sticky directory no other user
 * can put another file at the name in between. */
void wl__os_wake_close(wl_manager_t *m, uint64_t wake, wl_wait_t fd) {
  char path[WL__FIFO_PATH_MAX];
  struct stat st;

  if (fd >= 0)
    close(fd);
  if (wake != 0 && wl__fifo_path(m, wake, path, sizeof(path)) == 0 &&
      lstat(path, &st) == 0 && S_ISFIFO(st.st_mode))
    unlink(path);
}

/* Opens the FIFO at name (in dir, or AT_FDCWD), to write to: a name made
 * from a number read from the file, which its owner (whoever may write the
 * file, in the same directory) may have made any file, such as a hard link
 * to another scope's. Only a FIFO is opened: what is at the name is looked
 * at first, and what was opened again (the name's owner may have swapped
 * it in between); a descriptor of what is no FIFO is closed as the family
 * allows (wl__os_fd_close_foreign). A FIFO is never a scope's file (a
 * regular file), so a FIFO's is closed with close(). The fd, or -errno
 * (-EEXIST: not a FIFO). */
static int wl__fifo_open(int dir, const char *name) {
  struct stat st;
  int fd;

  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
    return -errno;
  if (!S_ISFIFO(st.st_mode))
    return -EEXIST;
  WL__FAULT("fifo-open");
  fd = openat(dir, name, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return -errno;
  if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) {
    wl__os_fd_close_foreign(fd);
    return -EEXIST;
  }
  return fd;
}

/* Whether the FIFO at name has no reader (ENXIO): only those are gathered,
 * so that live agents' FIFOs, however many, take no place among the
 * WL__ORPHANS; wl__os_wake_reap asks again under the mutex. */
static int wl__unread(int dir, const char *name) {
  int fd = wl__fifo_open(dir, name);

  if (fd >= 0)
    close(fd);
  return fd == -ENXIO;
}

/* A FIFO that no process reads is an agent's that died. The sweep removes
 * those of the agents it ends, by the numbers in their records, but in a
 * sticky directory (/dev/shm) only a file's owner (or root) may remove it:
 * one left by another user's process stays until a process of that user
 * opens the scope, which removes every FIFO of its own beside the file that
 * has no reader. The names are gathered without the mutex (a directory may
 * be long), and tested and removed under it, when no agent of this file is
 * between making its FIFO and opening it. */
unsigned wl__os_wake_orphans(const wl_manager_t *m, uint64_t *wake,
                             unsigned max) {
  char dir[WL__PATH_MAX];
  const char *slash = strrchr(m->path, '/'), *base;
  struct dirent *e;
  struct stat st;
  size_t baselen;
  unsigned n = 0;
  DIR *d;

  if (slash == NULL)
    return 0;
  base = slash + 1;
  baselen = strlen(base);
  memcpy(dir, m->path, (size_t)(slash - m->path));
  dir[slash - m->path] = '\0';
  d = opendir(slash == m->path ? "/" : dir);
  if (d == NULL)
    return 0;
  while (n < max && (e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, base, baselen) != 0 || e->d_name[baselen] != '.' ||
        strlen(e->d_name + baselen + 1) != 16 ||
        strspn(e->d_name + baselen + 1, "0123456789abcdef") != 16)
      continue;
    wake[n] = strtoull(e->d_name + baselen + 1, NULL, 16);
    if (wake[n] != 0 &&
        fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISFIFO(st.st_mode) && st.st_uid == geteuid() &&
        wl__unread(dirfd(d), e->d_name))
      n++;
  }
  closedir(d);
  return n;
}

/* Under the mutex. */
void wl__os_wake_reap(wl_manager_t *m, const uint64_t *wake, unsigned n) {
  char path[WL__FIFO_PATH_MAX];
  unsigned i;
  int fd;

  for (i = 0; i < n; i++) {
    if (wl__fifo_path(m, wake[i], path, sizeof(path)) != 0)
      continue;
    fd = wl__fifo_open(AT_FDCWD, path);
    if (fd >= 0)
      close(fd);
    else if (fd == -ENXIO)
      unlink(path);
  }
}

/* 0, or -errno; EAGAIN means a byte is pending already, which is all a
 * wake-up needs. */
static int wl__knock(int fd) {
  while (write(fd, "w", 1) < 0) {
    if (errno != EINTR)
      return errno == EAGAIN ? 0 : -errno;
  }
  return 0;
}

void wl__os_wake(wl_manager_t *m, wl_off_t slot, uint64_t wake) {
  wl__waker_t *w = &m->wakers[(slot >> 4) % WL__WAKERS];
  char path[WL__FIFO_PATH_MAX];
  int fd;

  if (w->fd1 != 0 && w->wake == wake && wl__knock(w->fd1 - 1) == 0)
    return;
  if (wake == 0 || wl__fifo_path(m, wake, path, sizeof(path)) != 0)
    return;
  fd = wl__fifo_open(AT_FDCWD, path);
  if (fd < 0)
    return;
  wl__knock(fd);
  if (w->fd1 != 0)
    close(w->fd1 - 1);
  w->wake = wake;
  w->fd1 = fd + 1;
}

void wl__os_wakers_close(wl_manager_t *m) {
  size_t i;

  for (i = 0; i < WL__WAKERS; i++) {
    if (m->wakers[i].fd1 != 0)
      close(m->wakers[i].fd1 - 1);
    m->wakers[i].fd1 = 0;
  }
}

wl_wait_t wl_agent_wake_fd(const wl_agent_t *agent) {
  return agent->wake_fd;
}

void wl_agent_woken(const wl_agent_t *agent) {
  char buf[64];

  while (read(agent->wake_fd, buf, sizeof(buf)) > 0)
    ;
}
