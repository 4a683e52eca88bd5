/* Wake-ups across processes: every agent of a shared manager has a FIFO
 * beside the manager's file, named by the file's nonce and its record's
 * offset and generation (which no other agent has: a record's generation
 * changes when it is freed, and a file made anew has another nonce), so
 * that nothing done by that name can reach another agent's FIFO.
 * Its thread watches the read end (an event loop polls it, as libuv's
 * uv_poll does); whichever process makes the agent's mailbox non-empty
 * writes one byte to it. Measured on this project's machine: about 3 us one
 * way, no thread of its own, no CPU while idle. A byte written while one is
 * already pending is dropped (EAGAIN on a full FIFO is fine), and a FIFO
 * nobody reads any more (ENXIO: its process is gone) is ignored: the sweep
 * ends its agent.
 *
 * The write ends of recently woken agents' FIFOs stay open, so that a
 * wake-up is one write instead of an open, a write and a close. One whose
 * FIFO lost its reader (the agent closed, or its process died) fails with
 * EPIPE and is opened again by name. Writers never see SIGPIPE: Node
 * ignores it. */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wl-internal.h"

#define WL__FIFO_PATH_MAX (WL__PATH_MAX + 48)

static int wl__fifo_path(const wl_manager_t *m, wl_off_t agent, uint32_t gen,
                         char *buf, size_t len) {
  int n = snprintf(buf, len, "%s.%llx.%llx.%x", m->path,
                   (unsigned long long)m->nonce, (unsigned long long)agent,
                   (unsigned)gen);
  return n < 0 || (size_t)n >= len ? WL_EINVAL : 0;
}

/* The FIFO just made must be ours, and gets the manager file's group and
 * permission bits exactly, whatever the umask and this process's group:
 * every process that may open the manager must be able to wake the agent. */
static int wl__fifo_own(const wl_manager_t *m, int fd) {
  struct stat st;

  if (fstat(fd, &st) != 0)
    return -errno;
  if (!S_ISFIFO(st.st_mode) || st.st_uid != geteuid())
    return -EEXIST;
  if ((st.st_gid != m->gid && fchown(fd, (uid_t)-1, m->gid) != 0) ||
      fchmod(fd, m->mode) != 0)
    return -errno;
  return 0;
}

/* Under the mutex. */
int wl__wake_open(wl_manager_t *m, wl_off_t agent, uint32_t gen) {
  char path[WL__FIFO_PATH_MAX];
  int fd, rc = 0, tries;

  if (wl__fifo_path(m, agent, gen, path, sizeof(path)) != 0)
    return WL_EINVAL;
  for (tries = 0; tries < 2; tries++) {
    if (mkfifo(path, 0600) == 0)
      break;
    /* Left by a process that died with an agent of this record. */
    if (errno != EEXIST || unlink(path) != 0)
      return -errno;
  }
  /* Read and write: never blocks, and never reports an end of file. */
  fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    rc = -errno;
  else if ((rc = wl__fifo_own(m, fd)) != 0)
    close(fd);
  if (rc != 0) {
    unlink(path);
    return rc;
  }
  return fd;
}

void wl__wake_close(wl_manager_t *m, wl_off_t agent, uint32_t gen, int fd) {
  char path[WL__FIFO_PATH_MAX];

  if (fd >= 0)
    close(fd);
  if (wl__fifo_path(m, agent, gen, path, sizeof(path)) == 0)
    unlink(path);
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

/* Opens a FIFO by a name made from the region: only a FIFO is written to. */
static int wl__open_fifo(const char *path) {
  struct stat st;
  int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);

  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode))) {
    close(fd);
    return -1;
  }
  return fd;
}

void wl__wake(wl_manager_t *m, wl_off_t agent) {
  wl__waker_t *w = &m->wakers[(agent >> 4) % WL__WAKERS];
  uint32_t gen = wl__block(m, agent)->gen;
  char path[WL__FIFO_PATH_MAX];
  int fd;

  if (w->fd1 != 0 && w->agent == agent && w->gen == gen &&
      wl__knock(w->fd1 - 1) == 0)
    return;
  if (wl__fifo_path(m, agent, gen, path, sizeof(path)) != 0)
    return;
  fd = wl__open_fifo(path);
  if (fd < 0)
    return;
  wl__knock(fd);
  if (w->fd1 != 0)
    close(w->fd1 - 1);
  w->agent = agent;
  w->gen = gen;
  w->fd1 = fd + 1;
}

void wl__wakers_close(wl_manager_t *m) {
  size_t i;

  for (i = 0; i < WL__WAKERS; i++) {
    if (m->wakers[i].fd1 != 0)
      close(m->wakers[i].fd1 - 1);
    m->wakers[i].fd1 = 0;
  }
}

int wl_agent_wake_fd(const wl_agent_t *agent) { return agent->wake_fd; }

void wl_agent_woken(const wl_agent_t *agent) {
  char buf[64];

  while (read(agent->wake_fd, buf, sizeof(buf)) > 0)
    ;
}
