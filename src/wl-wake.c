/* Wake-ups across processes: every agent of a shared manager has a FIFO
 * beside the manager's file, named by its record's offset. Its thread
 * watches the read end (an event loop polls it, as libuv's uv_poll does);
 * whichever process makes the agent's mailbox non-empty writes one byte to
 * it. Measured on this project's machine: about 3 us one way, no thread of
 * its own, no CPU while idle. A byte written while one is already pending is
 * dropped (EAGAIN on a full FIFO is fine), and a FIFO nobody reads any more
 * (ENXIO: its process is gone) is ignored: the sweep ends its agent. */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wl-internal.h"

static int wl__fifo_path(const wl_manager_t *m, wl_off_t agent, char *buf,
                         size_t len) {
  int n = snprintf(buf, len, "%s.%llx", m->path, (unsigned long long)agent);
  return n < 0 || (size_t)n >= len ? WL_EINVAL : 0;
}

int wl__wake_open(wl_manager_t *m, wl_off_t agent) {
  char path[WL__PATH_MAX + 32];
  int fd, tries;

  if (wl__fifo_path(m, agent, path, sizeof(path)) != 0)
    return WL_EINVAL;
  for (tries = 0; tries < 2; tries++) {
    if (mkfifo(path, m->mode) == 0)
      break;
    /* Left by a process that died with an agent at this offset. */
    if (errno != EEXIST || unlink(path) != 0)
      return -errno;
  }
  /* Read and write: never blocks, and never reports an end of file. */
  fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    int rc = -errno;
    unlink(path);
    return rc;
  }
  return fd;
}

void wl__wake_close(wl_manager_t *m, wl_off_t agent, int fd) {
  char path[WL__PATH_MAX + 32];

  if (fd >= 0)
    close(fd);
  if (wl__fifo_path(m, agent, path, sizeof(path)) == 0)
    unlink(path);
}

void wl__wake(wl_manager_t *m, wl_off_t agent) {
  char path[WL__PATH_MAX + 32];
  int fd;

  if (wl__fifo_path(m, agent, path, sizeof(path)) != 0)
    return;
  fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return;
  /* EAGAIN: a byte is pending already, which is all a wake-up needs. The
   * reader cannot vanish into a SIGPIPE: Node ignores SIGPIPE. */
  while (write(fd, "w", 1) < 0 && errno == EINTR)
    ;
  close(fd);
}

int wl_agent_wake_fd(const wl_agent_t *agent) { return agent->wake_fd; }

void wl_agent_woken(const wl_agent_t *agent) {
  char buf[64];

  while (read(agent->wake_fd, buf, sizeof(buf)) > 0)
    ;
}
