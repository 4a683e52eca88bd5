/* The lock manager: sections 2 and 4 of the W3C Web Locks spec. The spec's
 * "lock task queue" is the manager's mutex: every algorithm runs entirely
 * under it, so each one is atomic with respect to every thread. The state is
 * in the manager's region, reached by offsets (`n` for a name's record, `r`
 * for a request's, `a` for an agent's).
 *
 * This file is compiled twice, into core/process.c and core/machine.c, with
 * WL__MACHINE(m) a constant: the process-wide manager's copy has no checks,
 * walk budgets or recovery keys, a machine-wide manager's has them all. What it
 * exports is one table of functions, WL__OPS. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "names-inl.h"

#define NAME(m, off) WL__REC(m, off, wl__name_t)
#define REQ(m, off) WL__REC(m, off, wl__req_t)
#define AGENT(m, off) WL__REC(m, off, wl__agent_t)
/* The offset of a record's member list or link. */
#define AT(off, type, member) ((off) + offsetof(type, member))
#define REQ_OF(link, member) wl__record_of(link, wl__req_t, member)

/* Ends an operation: its result, or WL_ECORRUPT if it met a corrupt offset
 * (the handle then refuses every further operation). */
static int wl__done(wl_manager_t *m, int rc) {
  m->now = 0;
  wl__unlock(m);
  return WL__MACHINE(m) && wl__is_corrupt(m) ? WL_ECORRUPT : rc;
}

/* The next order key. Keys order a machine-wide manager's records for
 * recovery (core/recover.c; a grant's key is its token), and name requests
 * (wl_request_serial). A counter in the process-wide manager; in a
 * machine-wide one the time in microseconds, made greater than the last
 * key, so that a request's keys say when it was made and granted
 * (wl_info_t), on the coarse clock (wl__os_now_coarse): the time
 * wl_request() read before it took the mutex (m->now), or else the
 * clock's. Either way no key repeats: recovery keeps the last.
 * (Microseconds since boot stay below 2^53 for 285 years.) */
static uint64_t wl__stamp(wl_manager_t *m) {
  uint64_t last = WL__HDR(m)->stamp, now = last + 1;

  /* Written since the file was checked: the operation fails as corrupt. */
  if (WL__UNLIKELY(WL__MACHINE(m) && last >= WL__STAMP_MAX - 1)) {
    wl__corrupt(m);
    return 1;
  }

  if (WL__MACHINE(m)) {
    uint64_t t = m->now != 0 ? m->now : wl__os_now_coarse() / 1000;
    if (t > now)
      now = t;
  }
  WL__HDR(m)->stamp = now;
  return now;
}

/* How a record names its handle (`local`): in a machine-wide manager, by an
 * index into a table of the process's own, checked before use; in the
 * process-wide one, whose region is this process's memory that only this
 * code writes, by the handle's address. */
#define HANDLE_OF(m, local, table, type)                                       \
  (WL__MACHINE(m) ? (type *)wl__table_get(table, local)                        \
                 : (type *)(uintptr_t)(local))

/* Wakes an agent's thread: its notify callback in this process (checked,
 * in a machine-wide manager: the handle its record names must have that record),
 * its FIFO in another. */
static void wl__notify(wl_manager_t *m, wl_off_t a) {
  wl__agent_t *agent = AGENT(m, a);
  wl_agent_t *handle;

  if (!WL__MACHINE(m)) {
    handle = HANDLE_OF(m, agent->local, &m->agents, wl_agent_t);
    handle->notify(handle);
    return;
  }
  if (agent->owner != m->self) {
    WL__MACHINE_ONLY(m, wl__wake(m, a), (void)0);
    return;
  }
  handle = HANDLE_OF(m, agent->local, &m->agents, wl_agent_t);
  if (handle != NULL && handle->off == a)
    handle->notify(handle);
  else
    wl__corrupt(m);
}

/* Whether the agent's record is still the one it was given. A shared
 * manager's recovery ends agents whose owner it cannot find. */
static int wl__agent_live(wl_manager_t *m, const wl_agent_t *agent) {
  wl__block_t *b;

  if (!WL__MACHINE(m))
    return 1;
  b = wl__block(m, agent->off);
  return b->kind == WL__AGENT && b->gen == agent->gen;
}

/* The process's table of agents, changed under the manager's mutex and,
 * for a machine-wide manager, agents_mutex (see wl_manager_t). */
static int wl__agents_put(wl_manager_t *m, wl_agent_t *agent) {
  int rc;

  if (!WL__MACHINE(m))
    return 0;
  wl__os_mutex_lock(&m->agents_mutex);
  rc = wl__table_put(&m->agents, agent, &agent->local);
  wl__os_mutex_unlock(&m->agents_mutex);
  return rc;
}

static void wl__agents_drop(wl_manager_t *m, wl_agent_t *agent) {
  if (!WL__MACHINE(m))
    return;
  wl__os_mutex_lock(&m->agents_mutex);
  if (wl__table_get(&m->agents, agent->local) == agent)
    wl__table_drop(&m->agents, agent->local);
  wl__os_mutex_unlock(&m->agents_mutex);
}

/* A request's handle takes a slot of its agent's table while it has a
 * record, in a machine-wide manager. */
static int wl__slot(wl_manager_t *m, wl_request_t *req) {
  (void)m; /* WL__MACHINE(m) is a constant */
  if (!WL__MACHINE(m))
    return 0;
  return wl__table_put(&req->agent->requests, req, &req->local);
}

static void wl__unslot(wl_request_t *req) {
  wl__table_t *t = &req->agent->requests;

  if (!WL__MACHINE(req->agent->m))
    return;
  if (wl__table_get(t, req->local) == req)
    wl__table_drop(t, req->local);
}

/* Queues an event for the request's agent and wakes the agent when its
 * mailbox was empty, so a burst of events costs one wake-up. */
static void wl__mail(wl_manager_t *m, wl_off_t r, unsigned ev) {
  wl__req_t *req = REQ(m, r);
  wl__agent_t *agent = AGENT(m, req->agent);
  wl_off_t mail = AT(req->agent, wl__agent_t, mail);
  int was_empty;

  if (agent->closing || (WL__MACHINE(m) && wl__is_corrupt(m)))
    return;
  if (wl__linked(m, AT(r, wl__req_t, mlink))) {
    WL__PUBLISH(req->events, (uint16_t)(req->events | ev));
    return;
  }
  if (WL__MACHINE(m))
    req->mkey = wl__stamp(m);
  WL__PUBLISH(req->events, (uint16_t)(req->events | ev));
  was_empty = wl__list_empty(m, mail);
  wl__list_append(m, mail, AT(r, wl__req_t, mlink));
  WL__FAULT("mail");
  if (was_empty)
    wl__notify(m, req->agent);
}

/* The spec's "grantable" minus its first-in-queue test, which callers make
 * by only asking about the head of a queue (or an empty queue). */
static int wl__compatible(const wl__name_t *n, unsigned mode) {
  return mode == WL_EXCLUSIVE ? n->nheld == 0 : n->nexclusive == 0;
}

/* Gives a request being granted the next fencing token. The counter is
 * stored before the token it gave (a release store orders them), so a
 * process killed in between skips a token and never gives one twice. */
static void wl__token(wl_manager_t *m, wl__req_t *req) {
  uint64_t token = WL__HDR(m)->grants + 1;

  WL__HDR(m)->grants = token;
  WL__PUBLISH(req->token, token);
}

/* Grants: the token (also the held set's order key) before the state. */
static void wl__hold(wl_manager_t *m, wl_off_t n, wl_off_t r) {
  wl__name_t *name = NAME(m, n);
  wl__req_t *req = REQ(m, r);

  wl__token(m, req);
  WL__PUBLISH(req->state, WL__HELD);
  WL__FAULT("hold");
  wl__list_remove(m, AT(r, wl__req_t, alink));
  wl__list_append(m, AT(req->agent, wl__agent_t, held),
                  AT(r, wl__req_t, alink));
  wl__list_append(m, AT(n, wl__name_t, held), AT(r, wl__req_t, qlink));
  name->nheld++;
  if (req->mode == WL_EXCLUSIVE)
    name->nexclusive++;
}

static void wl__unhold(wl_manager_t *m, wl_off_t n, wl_off_t r,
                       uint8_t state) {
  wl__name_t *name = NAME(m, n);
  wl__req_t *req = REQ(m, r);

  WL__PUBLISH(req->state, state);
  WL__FAULT("unhold");
  wl__list_remove(m, AT(r, wl__req_t, qlink));
  name->nheld--;
  if (req->mode == WL_EXCLUSIVE)
    name->nexclusive--;
}

/* Process the lock request queue (4.4): grant from the head while the head
 * is grantable. The grant's event is published before the held state: a
 * held request without one was delivered, so recovery must find the event
 * of a grant cut short (the request is then still queued, and granted
 * again by recovery's processing). */
static void wl__process(wl_manager_t *m, wl_off_t n) {
  wl_off_t queue = AT(n, wl__name_t, queue);
  uint64_t steps = WL__STEPS(m);

  while (wl__more(m, queue, &steps)) {
    wl_off_t r = REQ_OF(WL__LINK(m, queue)->next, qlink);
    if (!wl__compatible(NAME(m, n), REQ(m, r)->mode))
      return;
    wl__mail(m, r, WL_EV_GRANTED);
    wl__list_remove(m, AT(r, wl__req_t, qlink));
    wl__hold(m, n, r);
  }
}

/* The spec's queue map never shrinks; ours keeps the latest names with no
 * queue and no holders idle and drops older ones, which no algorithm can
 * tell apart. */
static void wl__maybe_drop(wl_manager_t *m, wl_off_t n) {
  wl__hdr_t *h = WL__HDR(m);
  wl_off_t idle = wl__off_of(m, &h->idle);

  if (!wl__list_empty(m, AT(n, wl__name_t, queue)) || NAME(m, n)->nheld != 0)
    return;
  wl__list_append(m, idle, AT(n, wl__name_t, ilink));
  if (++h->nidle > WL__IDLE_NAMES) {
    wl_off_t old = wl__record_of(WL__LINK(m, idle)->next, wl__name_t, ilink);
    wl__list_remove(m, AT(old, wl__name_t, ilink));
    h->nidle--;
    wl__names_remove(m, old);
  }
}

/* Drops every idle name: the region needs the room. Returns whether there
 * were any. */
static int wl__drop_idle(wl_manager_t *m) {
  wl__hdr_t *h = WL__HDR(m);
  wl_off_t idle = wl__off_of(m, &h->idle);
  uint64_t steps = WL__STEPS(m);
  int any = 0;

  while (wl__more(m, idle, &steps)) {
    wl_off_t old = wl__record_of(WL__LINK(m, idle)->next, wl__name_t, ilink);
    wl__list_remove(m, AT(old, wl__name_t, ilink));
    h->nidle--;
    wl__names_remove(m, old);
    any = 1;
  }
  return any;
}

/* A name about to get an entry is no longer idle. */
static void wl__use(wl_manager_t *m, wl_off_t n) {
  if (wl__linked(m, AT(n, wl__name_t, ilink))) {
    wl__list_remove(m, AT(n, wl__name_t, ilink));
    WL__HDR(m)->nidle--;
  }
}

/* The event is published before the state, so that recovery tells a
 * holder whose steal was cut short (held, with a steal event) and completes
 * the steal. */
static void wl__steal(wl_manager_t *m, wl_off_t n) {
  wl_off_t held = AT(n, wl__name_t, held);
  uint64_t steps = WL__STEPS(m);

  while (wl__more(m, held, &steps)) {
    wl_off_t h = REQ_OF(WL__LINK(m, held)->next, qlink);
    wl__mail(m, h, WL_EV_STOLEN);
    wl__unhold(m, n, h, WL__STOLEN);
    WL__FAULT("steal");
    wl__list_remove(m, AT(h, wl__req_t, alink));
    wl__list_append(m, AT(REQ(m, h)->agent, wl__agent_t, stolen),
                    AT(h, wl__req_t, alink));
  }
}

static void wl__close_agent(wl_manager_t *m, wl_off_t a);

static int wl__agent_init(wl_manager_t *m, wl_agent_t *agent,
                          const char *client_id, size_t client_id_len,
                          wl_notify_cb notify) {
  wl__agent_t *a;
  wl_off_t off;
  wl_wait_t fd = WL_WAIT_NONE;
  int rc;

  if (client_id_len > WL_CLIENT_ID_MAX || notify == NULL)
    return WL_EINVAL;
  memset(&agent->requests, 0, sizeof(agent->requests));
  agent->m = m;
  agent->notify = notify;
  agent->wake_fd = WL_WAIT_NONE;
  agent->wake = 0;
  if ((rc = wl__lock(m)) != 0)
    return rc;
  off = wl__alloc(m, WL__AGENT, sizeof(*a));
  if (off == 0 || wl__agents_put(m, agent) != 0) {
    if (off != 0)
      wl__free(m, off);
    return wl__done(m, WL_ENOMEM);
  }
  agent->off = off;
  agent->gen = wl__block(m, off)->gen;
  a = AGENT(m, off);
  wl__list_init(m, AT(off, wl__agent_t, queued));
  wl__list_init(m, AT(off, wl__agent_t, held));
  wl__list_init(m, AT(off, wl__agent_t, stolen));
  wl__list_init(m, AT(off, wl__agent_t, mail));
  a->local = WL__MACHINE(m) ? agent->local : (uint64_t)(uintptr_t)agent;
  a->owner = m->self;
  a->wake = 0;
  if (m->self != 0)
    wl__list_append(m, AT(m->self, wl__owner_t, agents),
                    AT(off, wl__agent_t, olink));
  a->client_id_len = (uint32_t)client_id_len;
  if (client_id_len > 0)
    memcpy(a->client_id, client_id, client_id_len);
  /* Other processes wake a machine-wide manager's agent through its FIFO, made
   * and (on failure) ended under the mutex, while no other agent can have
   * its record. */
  if (WL__MACHINE(m))
    rc = WL__MACHINE_ONLY(
        m, wl__os_wake_open(m, &a->wake, &agent->wake, &fd), 0);
  if (rc == 0 && WL__MACHINE(m) && wl__is_corrupt(m)) {
    WL__MACHINE_ONLY(m, wl__os_wake_close(m, agent->wake, fd), (void)0);
    rc = WL_ECORRUPT;
  }
  if (rc != 0) {
    wl__close_agent(m, off);
    wl__agents_drop(m, agent);
    wl__unlock(m);
    return WL__MACHINE(m) && wl__is_corrupt(m) ? WL_ECORRUPT : rc;
  }
  agent->wake_fd = fd;
  return wl__done(m, 0);
}

/* Ends a queued or held request and processes its queue, as the spec's
 * abort and release do. */
static void wl__end(wl_manager_t *m, wl_off_t r) {
  wl__req_t *req = REQ(m, r);
  wl_off_t n = req->name;

  if (req->state == WL__HELD) {
    wl__unhold(m, n, r, WL__IDLE);
  } else {
    WL__PUBLISH(req->state, WL__IDLE);
    wl__list_remove(m, AT(r, wl__req_t, qlink));
  }
  WL__FAULT("end");
  wl__list_remove(m, AT(r, wl__req_t, alink));
  wl__process(m, n);
  wl__maybe_drop(m, n);
}

/* Frees a request's record; its handle then finds nothing. */
static void wl__forget(wl_manager_t *m, wl_off_t r) {
  if (wl__linked(m, AT(r, wl__req_t, mlink)))
    wl__list_remove(m, AT(r, wl__req_t, mlink));
  if (wl__linked(m, AT(r, wl__req_t, alink)))
    wl__list_remove(m, AT(r, wl__req_t, alink));
  wl__free(m, r);
}

static void wl__close_agent(wl_manager_t *m, wl_off_t a) {
  wl_off_t queued = AT(a, wl__agent_t, queued), held = AT(a, wl__agent_t, held);
  wl_off_t stolen = AT(a, wl__agent_t, stolen), mail = AT(a, wl__agent_t, mail);
  uint64_t steps = WL__STEPS(m);

  /* Grants to the agent on the way out (a request of its own behind one it
   * aborts) join its held list and are released below; they send no mail. */
  AGENT(m, a)->closing = 1;
  while (wl__more(m, queued, &steps)) {
    wl_off_t r = REQ_OF(WL__LINK(m, queued)->next, alink);
    wl__end(m, r);
    wl__forget(m, r);
  }
  while (wl__more(m, held, &steps)) {
    wl_off_t r = REQ_OF(WL__LINK(m, held)->next, alink);
    wl__end(m, r);
    wl__forget(m, r);
  }
  while (wl__more(m, stolen, &steps))
    wl__forget(m, REQ_OF(WL__LINK(m, stolen)->next, alink));
  /* What is left in the mailbox: undelivered unavailability. */
  while (wl__more(m, mail, &steps))
    wl__forget(m, REQ_OF(WL__LINK(m, mail)->next, mlink));
  if (wl__linked(m, AT(a, wl__agent_t, olink)))
    wl__list_remove(m, AT(a, wl__agent_t, olink));
  wl__free(m, a);
}

/* Its FIFO is removed by its own name (its number, as this process drew
 * it), which no other agent can have, before its
 * record goes (a process killed in between leaves a record that a sweep
 * ends, never a FIFO that nothing names); without the mutex when the
 * manager is corrupt. */
static void wl__agent_close(wl_agent_t *agent) {
  wl_manager_t *m = agent->m;

  if (wl__lock(m) == 0) {
    WL__MACHINE_ONLY(
        m, wl__os_wake_close(m, agent->wake, agent->wake_fd), (void)0);
    if (wl__agent_live(m, agent))
      wl__close_agent(m, agent->off);
    wl__agents_drop(m, agent);
    wl__unlock(m);
  } else if (WL__MACHINE(m)) {
    /* Corrupt: no operation starts any more, but one that started before
     * may still notify this agent; it holds the mutex, which is waited for
     * (with whatever state it is in) before the agent leaves the table. */
    int rc = WL__MACHINE_ONLY(m, wl__os_file_mutex_lock(m), 0);
    wl__agents_drop(m, agent);
    if (rc == 0 || rc == WL__EOWNERDEAD)
      WL__MACHINE_ONLY(m, wl__os_file_mutex_unlock(m), (void)0);
    WL__MACHINE_ONLY(
        m, wl__os_wake_close(m, agent->wake, agent->wake_fd), (void)0);
  }
  wl__table_free(&agent->requests);
}

static wl_request_t *wl__agent_next(wl_agent_t *agent, unsigned *events) {
  wl_manager_t *m = agent->m;
  wl_off_t mail = AT(agent->off, wl__agent_t, mail);
  wl_request_t *handle = NULL;

  if (wl__lock(m) != 0)
    return NULL;
  if (!wl__list_empty(m, mail)) {
    wl_off_t r = REQ_OF(WL__LINK(m, mail)->next, mlink);
    wl__req_t *req = REQ(m, r);
    handle = HANDLE_OF(m, req->local, &agent->requests, wl_request_t);
    /* The record must name a request of this agent that has that record. */
    if (WL__MACHINE(m) && (handle == NULL || handle->off != r ||
                          handle->gen != wl__block(m, r)->gen)) {
      wl__corrupt(m);
      wl__unlock(m);
      return NULL;
    }
    *events = req->events & (WL_EV_GRANTED | WL_EV_UNAVAILABLE | WL_EV_STOLEN);
    /* A request is granted or unavailable, never both. */
    if (WL__MACHINE(m) &&
        (*events & (WL_EV_GRANTED | WL_EV_UNAVAILABLE)) ==
            (WL_EV_GRANTED | WL_EV_UNAVAILABLE)) {
      wl__corrupt(m);
      wl__unlock(m);
      return NULL;
    }
    wl__list_remove(m, AT(r, wl__req_t, mlink));
    req->events = 0;
    /* Copied to the handle, so that reading it takes neither the mutex nor
     * a look at the record. */
    if (*events & WL_EV_GRANTED)
      handle->token = req->token;
    /* An unavailable request is done: nothing references it any more. */
    if (*events & WL_EV_UNAVAILABLE) {
      wl__free(m, r);
      wl__unslot(handle);
    }
  }
  wl__unlock(m);
  if (WL__MACHINE(m) && wl__is_corrupt(m))
    return NULL;
  return handle;
}

/* The request's record if the handle still has one. */
static wl_off_t wl__live(wl_manager_t *m, const wl_request_t *req) {
  wl__block_t *b;

  if (req->off == 0)
    return 0;
  b = wl__block(m, req->off);
  return b->kind == WL__REQUEST && b->gen == req->gen ? req->off : 0;
}

/* Request a lock (4.1), from the point where the spec enqueues its steps on
 * the lock task queue. */
static int wl__request(wl_agent_t *agent, wl_request_t *req,
                       const uint16_t *name, size_t name_len, wl_mode_t mode,
                       unsigned flags) {
  wl_manager_t *m = agent->m;
  uint64_t hash, now;
  wl_off_t n, r;
  wl__req_t *rec;
  int granted;

  req->off = 0;
  req->token = 0;
  req->serial = 0;
  if ((mode != WL_EXCLUSIVE && mode != WL_SHARED) ||
      (flags & ~(unsigned)(WL_IF_AVAILABLE | WL_STEAL)) != 0 ||
      ((flags & WL_STEAL) &&
       ((flags & WL_IF_AVAILABLE) || mode != WL_EXCLUSIVE)))
    return WL_EINVAL;
  req->agent = agent;
  hash = wl__hash(m, name, name_len); /* outside the mutex: names can be long */
  now = WL__MACHINE(m) ? wl__os_now_coarse() / 1000 : 0; /* and a clock read */

  if ((granted = wl__lock(m)) != 0)
    return granted;
  m->now = now;
  if (!wl__agent_live(m, agent)) {
    wl__corrupt(m);
    return wl__done(m, WL_ECORRUPT);
  }
  if (wl__slot(m, req) != 0)
    return wl__done(m, WL_ENOMEM);
  r = wl__alloc(m, WL__REQUEST, sizeof(*rec));
  if (r == 0 && wl__drop_idle(m))
    r = wl__alloc(m, WL__REQUEST, sizeof(*rec));
  WL__FAULT("request-alloc");
  if (r == 0) {
    wl__unslot(req);
    return wl__done(m, WL_ENOMEM);
  }
  rec = REQ(m, r);
  rec->agent = agent->off;
  rec->local = WL__MACHINE(m) ? req->local : (uint64_t)(uintptr_t)req;
  rec->mode = (uint16_t)mode;
  rec->parent = req->parent;
  req->off = r;
  req->gen = wl__block(m, r)->gen;
  n = wl__names_find(m, hash, name, name_len);
  if ((flags & WL_IF_AVAILABLE) && n != 0 &&
      !(wl__list_empty(m, AT(n, wl__name_t, queue)) &&
        wl__compatible(NAME(m, n), mode))) {
    wl__mail(m, r, WL_EV_UNAVAILABLE);
    return wl__done(m, 0);
  }
  if (n == 0) {
    n = wl__names_add(m, hash, name, name_len);
    if (n == 0 && wl__drop_idle(m))
      n = wl__names_add(m, hash, name, name_len);
    if (n == 0) {
      wl__free(m, r);
      req->off = 0;
      wl__unslot(req);
      return wl__done(m, WL_ENOMEM);
    }
  } else {
    wl__use(m, n);
  }
  WL__FAULT("request-name");
  rec = REQ(m, r);
  rec->name = n;
  req->serial = wl__stamp(m);
  rec->qkey = (flags & WL_STEAL) ? -(int64_t)req->serial : (int64_t)req->serial;
  WL__PUBLISH(rec->state, WL__QUEUED);
  WL__FAULT("request-queued");
  wl__list_append(m, AT(agent->off, wl__agent_t, queued),
                  AT(r, wl__req_t, alink));
  if (flags & WL_STEAL) {
    wl__steal(m, n);
    WL__FAULT("request-stole");
    wl__list_prepend(m, AT(n, wl__name_t, queue), AT(r, wl__req_t, qlink));
  } else {
    wl__list_append(m, AT(n, wl__name_t, queue), AT(r, wl__req_t, qlink));
  }
  wl__process(m, n);
  /* Read under the mutex: once it is released, any thread may change it. */
  granted = REQ(m, r)->state == WL__HELD;
  return wl__done(m, granted ? WL_GRANTED_AT_ONCE : 0);
}

static int wl__release(wl_request_t *req) {
  wl_manager_t *m = req->agent->m;
  wl_off_t r;
  int held = 0, state;

  if ((held = wl__lock(m)) != 0)
    return held;
  r = wl__live(m, req);
  if (r != 0) {
    state = REQ(m, r)->state;
    held = state == WL__HELD;
    if (state == WL__HELD || state == WL__QUEUED)
      wl__end(m, r);
    wl__forget(m, r);
  }
  wl__unslot(req);
  return wl__done(m, held);
}

/* Abort the request (4.3). */
static int wl__abort(wl_request_t *req) {
  wl_manager_t *m = req->agent->m;
  wl_off_t r;
  int removed = 0;

  if ((removed = wl__lock(m)) != 0)
    return removed;
  r = wl__live(m, req);
  if (r != 0 && REQ(m, r)->state == WL__QUEUED) {
    wl__end(m, r);
    wl__forget(m, r);
    wl__unslot(req);
    removed = 1;
  }
  return wl__done(m, removed);
}

/* The strongest mode in which the agent holds name n (WL__NONE if it holds
 * none): a walk of its held locks. */
#define WL__NONE 2u
static unsigned wl__held_mode(wl_manager_t *m, wl_off_t a, wl_off_t n) {
  wl_off_t head = AT(a, wl__agent_t, held), h;
  uint64_t steps = WL__STEPS(m);
  unsigned mode = WL__NONE;

  for (h = WL__LINK(m, head)->next; h != head && wl__step(m, &steps);
       h = WL__LINK(m, h)->next) {
    const wl__req_t *req = REQ(m, REQ_OF(h, alink));
    if (req->name != n)
      continue;
    if (req->mode != WL_SHARED)
      return WL_EXCLUSIVE;
    mode = WL_SHARED;
  }
  return mode;
}

/* Whether a request of agent a is ahead of queued request r in its name's
 * queue: a walk back from r, to the nearest such request or the queue's
 * head. */
static int wl__own_ahead(wl_manager_t *m, wl_off_t a, wl_off_t r) {
  wl_off_t head = AT(REQ(m, r)->name, wl__name_t, queue), q;
  uint64_t steps = WL__STEPS(m);

  for (q = WL__LINK(m, AT(r, wl__req_t, qlink))->prev;
       q != head && wl__step(m, &steps); q = WL__LINK(m, q)->prev) {
    if (REQ(m, REQ_OF(q, qlink))->agent == a)
      return 1;
  }
  return 0;
}

/* What the agent's waiting requests wait for (wl_agent_waits). A queued
 * request waits on its agent alone when something of that agent is in its
 * way that no other agent can remove: a lock the agent holds on the name in
 * a mode that conflicts with the request's (only the agent's release, or a
 * steal, which mails it, ends it), or a request of the agent ahead of it in
 * the queue that waits on its agent alone (it stays ahead). Any request of
 * the agent ahead will do here: the walk meets it too, and answers
 * WL_WAITS_ON_OTHERS unless it waits on its agent alone. Otherwise, only
 * other agents are in its way (holders, or requests ahead): once they have
 * gone, the request is first in its queue with only compatible locks of its
 * own agent held, so it is granted, which mails the agent. So the answer
 * changes only through what the agent does or is mailed. One walk of the
 * agent's queued requests, stopping at the first that waits on others; its
 * held locks walked once for a run of requests on one name. */
static int wl__agent_waits(wl_agent_t *agent) {
  wl_manager_t *m = agent->m;
  wl_off_t a = agent->off, head = AT(a, wl__agent_t, queued), q, last = 0;
  uint64_t steps = WL__STEPS(m);
  unsigned held = WL__NONE;
  int waits = WL_WAITS_NOTHING, rc;

  if ((rc = wl__lock(m)) != 0)
    return rc;
  if (!wl__agent_live(m, agent) ||
      !wl__list_empty(m, AT(a, wl__agent_t, mail)))
    return wl__done(m, WL_WAITS_ON_OTHERS);
  for (q = WL__LINK(m, head)->next; q != head && wl__step(m, &steps);
       q = WL__LINK(m, q)->next) {
    wl_off_t r = REQ_OF(q, alink);
    const wl__req_t *req = REQ(m, r);
    int conflicts;
    if (req->name != last)
      held = wl__held_mode(m, a, req->name);
    last = req->name;
    conflicts = held == WL_EXCLUSIVE ||
                (held == WL_SHARED && req->mode != WL_SHARED);
    if (!conflicts && !wl__own_ahead(m, a, r)) {
      waits = WL_WAITS_ON_OTHERS;
      break;
    }
    waits = WL_WAITS_ON_SELF;
  }
  return wl__done(m, waits);
}

static size_t wl__client_id_len(wl_manager_t *m, const wl__agent_t *agent) {
  uint32_t len = agent->client_id_len;

  if (!WL__MACHINE(m))
    return len;
  WL__HIDE(len);
  if (len <= WL_CLIENT_ID_MAX)
    return len;
  wl__corrupt(m);
  return 0;
}

/* The process of an agent: this one (`self`) for the process-wide manager;
 * else what its owner's record says (0 if it has none), on Windows as its
 * death watch keeps it (os/win/life.c). */
static uint32_t wl__pid_of(wl_manager_t *m, const wl__agent_t *agent,
                           uint32_t self) {
  wl_off_t o = agent->owner;

  if (!WL__MACHINE(m))
    return self;
  WL__HIDE(o);
  return o == 0 ? 0
                : __atomic_load_n(&WL__REC(m, o, wl__owner_t)->pid,
                                  __ATOMIC_RELAXED);
}

/* Room left in a snapshot's copy, as the first walk sized it. A shared
 * region may change between the walks (anyone who can write its file can
 * write it at any time): the second walk checks every entry, length and
 * step against what is left, and finds the region corrupt rather than
 * write past it. */
typedef struct {
  wl_info_t *held, *pending;
  size_t nheld, npending, units, text;
  uint16_t *names;
  char *chars;
  uint64_t steps;
  /* This process's pid, read once per copy (getpid is a system call). */
  uint32_t self;
} wl__room_t;

/* Copies one entry of the name whose units are at `name` (len of them).
 * Returns 0, or 1 when the copy has no room for it (corrupt). */
static int wl__fill(wl_manager_t *m, wl__room_t *room, wl_off_t r,
                    const uint16_t *name, size_t len, size_t name_index,
                    int held) {
  const wl__req_t *req = REQ(m, r);
  const wl__agent_t *agent = AGENT(m, req->agent);
  size_t id_len = wl__client_id_len(m, agent);
  wl_info_t *info;

  if ((held ? room->nheld : room->npending) == 0 || id_len > room->text ||
      !wl__step(m, &room->steps))
    return 1;
  if (held) {
    info = room->held++;
    room->nheld--;
  } else {
    info = room->pending++;
    room->npending--;
  }
  info->name = name;
  info->name_len = len;
  info->name_index = name_index;
  info->mode = req->mode == WL_SHARED ? WL_SHARED : WL_EXCLUSIVE;
  info->client_id = room->chars;
  info->client_id_len = id_len;
  info->serial = wl__order_of(req->qkey);
  info->parent = req->parent;
  info->since = !WL__MACHINE(m) ? 0 : held ? req->mkey : info->serial;
  info->pid = wl__pid_of(m, agent, room->self);
  info->alive = 1;
  info->owner = WL__MACHINE(m) ? agent->owner : 0;
  memcpy(room->chars, agent->client_id, id_len);
  room->chars += id_len;
  room->text -= id_len;
  return 0;
}

/* The second walk: fills the copy. Returns 0, or 1 if it met corruption. */
static int wl__fill_all(wl_manager_t *m, wl__room_t *room, size_t *nnames) {
  wl__hdr_t *h = WL__HDR(m);
  wl_off_t order = wl__off_of(m, &h->order), ln, lr;
  size_t i = 0;

  for (ln = WL__LINK(m, order)->next; ln != order;
       ln = WL__LINK(m, ln)->next) {
    wl_off_t n = wl__record_of(ln, wl__name_t, order);
    wl_off_t q = AT(n, wl__name_t, queue), hl = AT(n, wl__name_t, held);
    const uint16_t *units;
    size_t len;
    if (!wl__step(m, &room->steps))
      return 1;
    if (wl__linked(m, AT(n, wl__name_t, ilink)))
      continue;
    units = wl__units(m, n, &len);
    if (units == NULL || len > room->units)
      return 1;
    if (len > 0)
      memcpy(room->names, units, len * sizeof(uint16_t));
    for (lr = WL__LINK(m, q)->next; lr != q; lr = WL__LINK(m, lr)->next) {
      if (wl__fill(m, room, REQ_OF(lr, qlink), room->names, len, i, 0))
        return 1;
    }
    for (lr = WL__LINK(m, hl)->next; lr != hl; lr = WL__LINK(m, lr)->next) {
      if (wl__fill(m, room, REQ_OF(lr, qlink), room->names, len, i, 1))
        return 1;
    }
    room->names += len;
    room->units -= len;
    i++;
  }
  *nnames = i;
  return wl__is_corrupt(m);
}

/* Copies the lock state (4.5), under the mutex, storing nothing into the
 * region: wl_snapshot's, and wl_scope_peek's. Two walks, one to size the
 * copy and one to fill it; both bounded. Returns 0, WL_ENOMEM, or
 * WL_ECORRUPT (the manager then marked corrupt, in this process only). */
static int wl__snapshot_copy(wl_manager_t *m, wl_snapshot_t *snap) {
  wl__hdr_t *h = WL__HDR(m);
  wl_off_t order = wl__off_of(m, &h->order);
  size_t nheld = 0, npending = 0, units = 0, text = 0, nnames = 0;
  uint64_t steps = WL__STEPS(m);
  wl_off_t ln, lr;
  wl__room_t room;

  for (ln = WL__LINK(m, order)->next; ln != order && wl__step(m, &steps);
       ln = WL__LINK(m, ln)->next) {
    wl_off_t n = wl__record_of(ln, wl__name_t, order);
    wl_off_t q = AT(n, wl__name_t, queue), hl = AT(n, wl__name_t, held);
    size_t len;
    if (wl__linked(m, AT(n, wl__name_t, ilink)))
      continue;
    if (wl__units(m, n, &len) == NULL)
      break;
    units += len;
    for (lr = WL__LINK(m, q)->next; lr != q && wl__step(m, &steps);
         lr = WL__LINK(m, lr)->next, npending++)
      text += wl__client_id_len(m, AGENT(m, REQ(m, REQ_OF(lr, qlink))->agent));
    for (lr = WL__LINK(m, hl)->next; lr != hl && wl__step(m, &steps);
         lr = WL__LINK(m, lr)->next, nheld++)
      text += wl__client_id_len(m, AGENT(m, REQ(m, REQ_OF(lr, qlink))->agent));
  }
  /* Every name's units are in the region: more of them is corruption, not a
   * reason to ask for more memory. */
  if (WL__MACHINE(m) && units > m->capacity / sizeof(uint16_t))
    wl__corrupt(m);
  snap->mem = wl__is_corrupt(m) ? NULL
                         : malloc((nheld + npending) * sizeof(wl_info_t) +
                                  units * sizeof(uint16_t) + text + 1);
  if (snap->mem == NULL)
    return wl__is_corrupt(m) ? WL_ECORRUPT : WL_ENOMEM;
  room.held = snap->held = snap->mem;
  room.pending = snap->pending = room.held + nheld;
  room.names = (uint16_t *)(room.pending + npending);
  room.chars = (char *)(room.names + units);
  room.nheld = nheld;
  room.npending = npending;
  room.units = units;
  room.text = text;
  room.steps = WL__STEPS(m);
  room.self = WL__MACHINE(m) ? 0 : wl__os_pid();
  /* The same walk again, under the same mutex: the same records, unless
   * another process wrote the file meanwhile. */
  WL__FAULT("snapshot");
  if (wl__fill_all(m, &room, &nnames) || room.nheld != 0 ||
      room.npending != 0) {
    wl__corrupt(m);
    wl_snapshot_free(snap);
    return WL_ECORRUPT;
  }
  snap->nheld = nheld;
  snap->npending = npending;
  snap->nnames = nnames;
  return 0;
}

static int wl__snapshot(wl_manager_t *m, wl_snapshot_t *snap) {
  int rc = wl__lock(m);

  if (rc != 0)
    return rc;
  rc = wl__snapshot_copy(m, snap);
  wl__unlock(m);
  return rc;
}

const wl__ops_t WL__OPS = {
    .agent_init = wl__agent_init,
    .agent_close = wl__agent_close,
    .agent_next = wl__agent_next,
    .request = wl__request,
    .release = wl__release,
    .abort = wl__abort,
    .agent_waits = wl__agent_waits,
    .snapshot = wl__snapshot,
    .snapshot_copy = wl__snapshot_copy,
    .close_agent = wl__close_agent,
    .process = wl__process,
    .steal = wl__steal,
    .notify = wl__notify,
    .names_find = wl__names_find,
    .names_link = wl__names_link,
};
