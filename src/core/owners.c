/* The owners of a machine-wide manager: each process that has it open has
 * an owner record, its agents in the record's list, and a proof of life
 * that the system removes when the process dies (os/machine.h: a lock on
 * one byte of the file). A pid proves nothing (pids are reused
 * and differ between pid namespaces); such a mark does. A sweep ends, as
 * spec 2.6 ends an agent, every agent of an owner whose process died. The
 * death watch makes that prompt: owners watch each other in a ring, each
 * the next, and a death wakes its watcher, whose process then sweeps. */
#include "internal.h"

#define AT(off, type, member) ((off) + offsetof(type, member))

/* Wakes an agent of another process through its wake-up, by the number in
 * its record (which anyone who may write the file may have set: it only
 * ever names a wake-up beside the file). */
void wl__wake(wl_manager_t *m, wl_off_t agent) {
  uint64_t wake = WL__REC(m, agent, wl__agent_t)->wake;

  WL__HIDE(wake);
  wl__os_wake(m, agent, wake);
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

/* Ends an owner's agents (spec 2.6), removes their FIFOs and what its death
 * watch left, and takes it out of the owners. */
static void wl__end_owner(wl_manager_t *m, wl_off_t o) {
  wl_off_t agents = AT(o, wl__owner_t, agents);
  uint64_t steps = WL__STEPS(m);

  while (wl__more(m, agents, &steps)) {
    wl_off_t a = wl__record_of(WL__LINK(m, agents)->next, wl__agent_t, olink);
    wl__os_wake_close(m, WL__REC(m, a, wl__agent_t)->wake,
                      WL_WAIT_NONE);
    wl__machine_ops.close_agent(m, a);
  }
  wl__os_watch_end(m, WL__REC(m, o, wl__owner_t));
  wl__list_remove(m, AT(o, wl__owner_t, link));
}

/* A vacant record whose byte this process can lock (a dead owner's stays
 * locked until its memory is torn down), or else a new one: its offset,
 * its byte locked; or 0, and an error code in *rc. */
static wl_off_t wl__owner_take(wl_manager_t *m, int *rc) {
  wl_off_t head = wl__off_of(m, &WL__HDR(m)->vacant);
  wl_off_t at = WL__LINK(m, head)->next, o;
  uint64_t steps = WL__STEPS(m);

  while (at != head && wl__step(m, &steps)) {
    o = wl__record_of(at, wl__owner_t, link);
    at = WL__LINK(m, at)->next;
    if (wl__os_life_take(m, o) == 0) {
      wl__list_remove(m, AT(o, wl__owner_t, link));
      wl__list_init(m, AT(o, wl__owner_t, agents));
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
  if ((*rc = wl__os_life_take(m, o)) != 0) {
    wl__vacate(m, o);
    return 0;
  }
  return o;
}

int wl__owner_open(wl_manager_t *m) {
  int rc = 0;
  wl_off_t o = wl__owner_take(m, &rc);

  if (o == 0)
    return rc;
#ifndef _WIN32
  /* Windows keeps it with the proof of life (os/win/life.c). */
  WL__REC(m, o, wl__owner_t)->pid = wl__os_pid();
#endif
  /* Its watcher holds its life word before it joins the ring: an owner in
   * the ring whose word says no watcher is dead (wl__sweep). */
  if ((rc = wl__os_watch_start(m, WL__REC(m, o, wl__owner_t), wl_sweep)) !=
      0) {
    wl__os_life_give(m, o);
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
  wl__end_owner(m, m->self);
  wl__ring(m, 0);
  wl__os_watch_stop(m);
  wl__vacate(m, m->self);
  wl__os_life_give(m, m->self);
  m->self = 0;
}

/* Its watcher's life word says so as soon as the process dies; its byte
 * once the process's memory is torn down. */
static int wl__dead(wl_manager_t *m, wl_off_t o) {
  return wl__os_life_ended(WL__REC(m, o, wl__owner_t)) ||
         !wl__os_life_held(m, o);
}

void wl__sweep(wl_manager_t *m) {
  wl__hdr_t *h = WL__HDR(m);
  wl_off_t head = wl__off_of(m, &h->owners), at;
  uint64_t steps = WL__STEPS(m);
  int ended = 0;

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

/* Walks the owners backwards, so that an owner's new target gets its new
 * watcher before its old watcher lets go of it: a process killed between
 * two steps leaves every live owner watched (the one it was adding may go
 * unwatched: it dies with the killed process, which holds the mutex, and
 * the next to take it mends the ring, wl__recover). Under the mutex: each
 * owner watches the next, the last the first; `all` tells every watcher
 * again, after a recovery. */
void wl__ring(wl_manager_t *m, int all) {
  wl_off_t head = wl__off_of(m, &WL__HDR(m)->owners);
  wl_off_t first = WL__LINK(m, head)->next, at = WL__LINK(m, head)->prev;
  uint64_t steps = WL__STEPS(m);

  while (at != head && wl__step(m, &steps)) {
    wl_off_t next = WL__LINK(m, at)->next;
    wl__owner_t *o = WL__REC(m, wl__record_of(at, wl__owner_t, link), wl__owner_t);
    wl_off_t t = next == head ? first : next;

    t = t == at ? 0 : wl__record_of(t, wl__owner_t, link);
    if (all || __atomic_load_n(&o->watch, __ATOMIC_SEQ_CST) != t) {
      wl__os_watch_target(m, o, t);
      WL__FAULT("ring");
    }
    at = WL__LINK(m, at)->prev;
  }
}
