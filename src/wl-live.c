/* Proof of life for a shared manager. A pid proves nothing (pids are reused
 * and differ between pid namespaces); a lock that the kernel drops when its
 * holder dies does. Each process that opens the manager has an owner record
 * and holds an open-file-description (OFD) write lock on the byte of the
 * file at WL__LIVE_BASE + that record's offset, through the file it mapped.
 * A sweep tests every other owner's byte through a second open of the file
 * (an OFD lock never conflicts with its own file description) and ends every
 * agent of an owner whose byte is free, as spec 2.6 ends an agent. */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "wl-internal.h"

#define AT(off, type, member) ((off) + offsetof(type, member))

static int wl__live_lock(int fd, int cmd, short type, wl_off_t owner,
                         struct flock *fl) {
  memset(fl, 0, sizeof(*fl));
  fl->l_type = type;
  fl->l_whence = SEEK_SET;
  fl->l_start = (off_t)(WL__LIVE_BASE + owner);
  fl->l_len = 1;
  return fcntl(fd, cmd, fl);
}

/* Ends an owner's agents (spec 2.6), removes their FIFOs, frees it. */
static void wl__end_owner(wl_manager_t *m, wl_off_t o) {
  wl_off_t agents = AT(o, wl__owner_t, agents);
  uint64_t steps = WL__STEPS(m);

  while (wl__more(m, agents, &steps)) {
    wl_off_t a = wl__record_of(WL__LINK(m, agents)->next, wl__agent_t, olink);
    wl__shared_ops.close_agent(m, a);
    wl__wake_close(m, a, -1);
  }
  wl__list_remove(m, AT(o, wl__owner_t, link));
  wl__free(m, o);
}

int wl__owner_open(wl_manager_t *m) {
  wl__hdr_t *h = WL__HDR(m);
  struct flock fl;
  wl_off_t o = wl__alloc(m, WL__OWNER, sizeof(wl__owner_t));

  if (o == 0)
    return WL_ENOMEM;
  wl__list_init(m, AT(o, wl__owner_t, agents));
  /* The byte of a record that was free is free: its last owner is gone. */
  if (wl__live_lock(m->fd, F_OFD_SETLK, F_WRLCK, o, &fl) != 0) {
    int rc = -errno;
    wl__free(m, o);
    return rc;
  }
  wl__list_append(m, wl__off_of(m, &h->owners), AT(o, wl__owner_t, link));
  m->self = o;
  return 0;
}

void wl__owner_close(wl_manager_t *m) {
  struct flock fl;

  wl__end_owner(m, m->self);
  wl__live_lock(m->fd, F_OFD_SETLK, F_UNLCK, m->self, &fl);
  m->self = 0;
}

/* Whether the owner's byte is still locked (when in doubt, it is). */
static int wl__alive(wl_manager_t *m, wl_off_t o) {
  struct flock fl;

  if (wl__live_lock(m->probe_fd, F_OFD_GETLK, F_WRLCK, o, &fl) != 0)
    return 1;
  return fl.l_type != F_UNLCK;
}

void wl__sweep(wl_manager_t *m) {
  wl__hdr_t *h = WL__HDR(m);
  wl_off_t head = wl__off_of(m, &h->owners), at;
  uint64_t steps = WL__STEPS(m);

  if (m->probe_fd < 0)
    return;
  at = WL__LINK(m, head)->next;
  while (at != head && wl__step(m, &steps)) {
    wl_off_t o = wl__record_of(at, wl__owner_t, link);
    at = WL__LINK(m, at)->next;
    if (o != m->self && !wl__alive(m, o))
      wl__end_owner(m, o);
  }
}

int wl_sweep(wl_manager_t *m) {
  int rc = wl__lock(m);

  if (rc != 0)
    return rc;
  wl__sweep(m);
  wl__unlock(m);
  return 0;
}
