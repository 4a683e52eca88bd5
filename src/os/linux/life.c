/* Proof of life for a machine-wide manager. A pid proves nothing (pids are reused
 * and differ between pid namespaces); a lock that the kernel drops when its
 * holder dies does. Each process that opens the manager has an owner record
 * and holds an open-file-description (OFD) write lock on the byte of the
 * file at WL__LIVE_BASE + that record's offset, through the file it mapped.
 * A sweep tests every other owner's byte through a second open of the file
 * (an OFD lock never conflicts with its own file description) and ends every
 * agent of an owner whose byte is free, as spec 2.6 ends an agent. The byte
 * is freed only once the dead process's memory is torn down (about 100 ms
 * per GiB), so an owner whose watcher's life word says it died is dead too:
 * the kernel marks that word first, and wakes the owner watching it, whose
 * process then sweeps (os/linux/watch.c). */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "../../core/internal.h"

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

/* Owner records are never freed: a vacant one waits for the next owner, so
 * that a watcher still acting on one it watched writes only into an owner's
 * life word, never into another kind of record (os/linux/watch.c). */
static void wl__vacate(wl_manager_t *m, wl_off_t o) {
  __atomic_store_n(&WL__REC(m, o, wl__owner_t)->watch, 0, __ATOMIC_SEQ_CST);
  WL__PUBLISH(wl__block(m, o)->kind, WL__VACANT);
  wl__list_append(m, wl__off_of(m, &WL__HDR(m)->vacant),
                  AT(o, wl__owner_t, link));
}

/* Ends an owner's agents (spec 2.6), removes their FIFOs, and takes it out
 * of the owners. */
static void wl__end_owner(wl_manager_t *m, wl_off_t o) {
  wl_off_t agents = AT(o, wl__owner_t, agents);
  uint64_t steps = WL__STEPS(m);

  while (wl__more(m, agents, &steps)) {
    wl_off_t a = wl__record_of(WL__LINK(m, agents)->next, wl__agent_t, olink);
    wl__wake_close(m, WL__REC(m, a, wl__agent_t)->wake, -1);
    wl__machine_ops.close_agent(m, a);
  }
  wl__list_remove(m, AT(o, wl__owner_t, link));
}

/* A vacant record whose byte this process can lock (a dead owner's stays
 * locked until its memory is torn down), or else a new one: its offset,
 * its byte locked; or 0, and an error code in *rc. */
static wl_off_t wl__owner_take(wl_manager_t *m, int *rc) {
  wl_off_t head = wl__off_of(m, &WL__HDR(m)->vacant);
  wl_off_t at = WL__LINK(m, head)->next, o;
  uint64_t steps = WL__STEPS(m);
  struct flock fl;

  while (at != head && wl__step(m, &steps)) {
    o = wl__record_of(at, wl__owner_t, link);
    at = WL__LINK(m, at)->next;
    if (wl__live_lock(m->fd, F_OFD_SETLK, F_WRLCK, o, &fl) == 0) {
      wl__list_remove(m, AT(o, wl__owner_t, link));
      wl__list_init(m, AT(o, wl__owner_t, agents));
      __atomic_store_n(&WL__REC(m, o, wl__owner_t)->life, 0, __ATOMIC_SEQ_CST);
      WL__PUBLISH(wl__block(m, o)->kind, WL__OWNER);
      return o;
    }
  }
  o = wl__alloc(m, WL__OWNER, sizeof(wl__owner_t));
  if (o == 0) {
    *rc = WL_ENOMEM;
    return 0;
  }
  wl__list_init(m, AT(o, wl__owner_t, agents));
  if (wl__live_lock(m->fd, F_OFD_SETLK, F_WRLCK, o, &fl) != 0) {
    *rc = -errno;
    wl__vacate(m, o);
    return 0;
  }
  return o;
}

int wl__owner_open(wl_manager_t *m) {
  struct flock fl;
  int rc = 0;
  wl_off_t o = wl__owner_take(m, &rc);

  if (o == 0)
    return rc;
  /* Its watcher holds its life word before it joins the ring: an owner in
   * the ring whose word says no watcher is dead (wl__sweep). */
  if ((rc = wl__watch_start(m, o)) != 0) {
    wl__live_lock(m->fd, F_OFD_SETLK, F_UNLCK, o, &fl);
    wl__vacate(m, o);
    return rc;
  }
  wl__list_append(m, wl__off_of(m, &WL__HDR(m)->owners),
                  AT(o, wl__owner_t, link));
  m->self = o;
  wl__ring(m, 0);
  return 0;
}

/* Its predecessor watches its successor before its watcher lets go of both
 * its target and its life word; only then is the record vacant, so the
 * kernel never marks a record that another owner may take. */
void wl__owner_close(wl_manager_t *m) {
  struct flock fl;

  wl__end_owner(m, m->self);
  wl__ring(m, 0);
  wl__watch_stop(m);
  wl__vacate(m, m->self);
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

/* Its watcher's life word says so as soon as the process dies; its byte
 * once the process's memory is torn down. */
static int wl__dead(wl_manager_t *m, wl_off_t o) {
  return wl__life_ended(m, o) || !wl__alive(m, o);
}

void wl__sweep(wl_manager_t *m) {
  wl__hdr_t *h = WL__HDR(m);
  wl_off_t head = wl__off_of(m, &h->owners), at;
  uint64_t steps = WL__STEPS(m);
  int ended = 0;

  if (m->probe_fd < 0)
    return;
  at = WL__LINK(m, head)->next;
  while (at != head && wl__step(m, &steps)) {
    wl_off_t o = wl__record_of(at, wl__owner_t, link);
    at = WL__LINK(m, at)->next;
    if (o != m->self && wl__dead(m, o)) {
      wl__end_owner(m, o);
      wl__vacate(m, o);
      ended = 1;
    }
  }
  if (ended)
    wl__ring(m, 0);
}

int wl_sweep(wl_manager_t *m) {
  int rc = wl__lock(m);

  if (rc != 0)
    return rc;
  wl__sweep(m);
  wl__unlock(m);
  return 0;
}

void wl__tell_agents(wl_manager_t *m) {
  uint32_t i;

  wl__os_mutex_lock(&m->agents_mutex);
  for (i = 0; i < m->agents.cap; i++) {
    wl_agent_t *agent = wl__table_get(&m->agents, i);
    if (agent != NULL)
      agent->notify(agent);
  }
  wl__os_mutex_unlock(&m->agents_mutex);
}

/* Other processes' agents are found by walking the owners and their agents
 * in a region found corrupt: every offset is checked, the walk is bounded,
 * and a wake-up of a record that is no agent at worst wakes an agent of
 * this scope for nothing (its number names only a FIFO beside the file). */
void wl__announce(wl_manager_t *m) {
  wl__hdr_t *h = WL__HDR(m);
  wl_off_t head = wl__off_of(m, &h->owners), at;
  uint64_t steps = WL__STEPS(m);

  m->announced = 1;
  __atomic_store_n(&h->corrupt, 1, __ATOMIC_RELAXED);
  for (at = WL__LINK(m, head)->next; at != head && at != 0 && steps > 0;
       at = WL__LINK(m, at)->next, steps--) {
    wl_off_t o = wl__record_of(at, wl__owner_t, link);
    wl_off_t agents = AT(o, wl__owner_t, agents), la;
    if (o == m->self)
      continue;
    for (la = WL__LINK(m, agents)->next; la != agents && la != 0 && steps > 0;
         la = WL__LINK(m, la)->next, steps--)
      wl__wake(m, wl__record_of(la, wl__agent_t, olink));
  }
  wl__tell_agents(m);
}

/* The region is marked corrupt, or other processes have used more of it
 * than this one may touch yet. */
WL__COLD int wl__lock_check(wl_manager_t *m) {
  if (!__atomic_load_n(&WL__HDR(m)->corrupt, __ATOMIC_RELAXED)) {
    if (wl__cover(m) == 0)
      return 0;
    wl__corrupt(m);
    wl__unlock(m);
    return WL_ECORRUPT;
  }
  wl__corrupt(m);
  m->announced = 1; /* by the process that found it */
  wl__unlock(m);
  wl__tell_agents(m);
  return WL_ECORRUPT;
}
