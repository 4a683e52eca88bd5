/* The lock manager: sections 2 and 4 of the W3C Web Locks spec. The spec's
 * "lock task queue" is this file's mutex: every algorithm runs entirely
 * under it, so each one is atomic with respect to every thread. */
#include <stdlib.h>
#include <string.h>

#include "wl-internal.h"

static struct {
  wl__mutex_t mutex;
  wl__names_t names;
} wl__m = {WL__MUTEX_INIT, {NULL, 0, 0, {&wl__m.names.order, &wl__m.names.order}}};

static void wl__unlink(wl__link_t *link) {
  link->prev = NULL;
  link->next = NULL;
}

/* Queues an event for the request's agent and wakes the agent when its
 * mailbox was empty, so a burst of events costs one wake-up. */
static void wl__mail(wl_request_t *req, unsigned ev) {
  wl_agent_t *agent = req->agent;
  int was_empty;

  if (agent->closing)
    return;
  req->events |= ev;
  if (wl__linked(&req->mlink))
    return;
  was_empty = wl__list_empty(&agent->mail);
  wl__list_append(&agent->mail, &req->mlink);
  if (was_empty)
    agent->notify(agent);
}

/* The spec's "grantable" minus its first-in-queue test, which callers make
 * by only asking about the head of a queue (or an empty queue). */
static int wl__compatible(const wl__name_t *n, unsigned mode) {
  return mode == WL_EXCLUSIVE ? n->nheld == 0 : n->nexclusive == 0;
}

static void wl__hold(wl__name_t *n, wl_request_t *req) {
  req->state = WL__HELD;
  wl__list_remove(&req->alink);
  wl__list_append(&req->agent->held, &req->alink);
  wl__list_append(&n->held, &req->qlink);
  n->nheld++;
  if (req->mode == WL_EXCLUSIVE)
    n->nexclusive++;
}

static void wl__unhold(wl__name_t *n, wl_request_t *req) {
  wl__list_remove(&req->qlink);
  n->nheld--;
  if (req->mode == WL_EXCLUSIVE)
    n->nexclusive--;
  req->state = WL__IDLE;
}

/* Process the lock request queue (4.4): grant from the head while the head
 * is grantable. */
static void wl__process(wl__name_t *n) {
  while (!wl__list_empty(&n->queue)) {
    wl_request_t *req = wl__container_of(n->queue.next, wl_request_t, qlink);
    if (!wl__compatible(n, req->mode))
      return;
    wl__list_remove(&req->qlink);
    wl__hold(n, req);
    wl__mail(req, WL_EV_GRANTED);
  }
}

/* The spec's queue map never shrinks; ours drops a name with no queue and
 * no holders, which no algorithm can tell apart. */
static void wl__maybe_drop(wl__name_t *n) {
  if (wl__list_empty(&n->queue) && n->nheld == 0)
    wl__names_remove(&wl__m.names, n);
}

static void wl__steal(wl__name_t *n) {
  while (!wl__list_empty(&n->held)) {
    wl_request_t *h = wl__container_of(n->held.next, wl_request_t, qlink);
    wl__unhold(n, h);
    wl__list_remove(&h->alink);
    wl__mail(h, WL_EV_STOLEN);
  }
}

int wl_agent_init(wl_agent_t *agent, const char *client_id,
                  size_t client_id_len, wl_notify_cb notify) {
  if (client_id_len > WL_CLIENT_ID_MAX || notify == NULL)
    return WL_EINVAL;
  agent->notify = notify;
  wl__list_init(&agent->queued);
  wl__list_init(&agent->held);
  wl__list_init(&agent->mail);
  agent->closing = 0;
  agent->client_id_len = client_id_len;
  if (client_id_len > 0)
    memcpy(agent->client_id, client_id, client_id_len);
  return 0;
}

static void wl__drop_mail(wl__link_t *mail) {
  while (!wl__list_empty(mail)) {
    wl_request_t *req = wl__container_of(mail->next, wl_request_t, mlink);
    wl__list_remove(&req->mlink);
    req->events = 0;
  }
}

/* Ends a queued or held request and processes its queue, as the spec's
 * abort and release do. */
static void wl__end(wl_request_t *req) {
  wl__name_t *n = req->name;

  if (req->state == WL__HELD)
    wl__unhold(n, req);
  else
    wl__list_remove(&req->qlink);
  req->state = WL__IDLE;
  wl__list_remove(&req->alink);
  wl__process(n);
  wl__maybe_drop(n);
}

void wl_agent_close(wl_agent_t *agent) {
  wl__mutex_lock(&wl__m.mutex);
  /* Grants to the agent on the way out (a request of its own behind one it
   * aborts) join its held list and are released below; they send no mail. */
  agent->closing = 1;
  while (!wl__list_empty(&agent->queued))
    wl__end(wl__container_of(agent->queued.next, wl_request_t, alink));
  while (!wl__list_empty(&agent->held))
    wl__end(wl__container_of(agent->held.next, wl_request_t, alink));
  wl__drop_mail(&agent->mail);
  wl__mutex_unlock(&wl__m.mutex);
}

wl_request_t *wl_agent_next(wl_agent_t *agent, unsigned *events) {
  wl_request_t *req = NULL;

  wl__mutex_lock(&wl__m.mutex);
  if (!wl__list_empty(&agent->mail)) {
    req = wl__container_of(agent->mail.next, wl_request_t, mlink);
    wl__list_remove(&req->mlink);
    *events = req->events;
    req->events = 0;
  }
  wl__mutex_unlock(&wl__m.mutex);
  return req;
}

/* Request a lock (4.1), from the point where the spec enqueues its steps on
 * the lock task queue. */
int wl_request(wl_agent_t *agent, wl_request_t *req, const uint16_t *name,
               size_t name_len, wl_mode_t mode, unsigned flags) {
  uint64_t hash;
  wl__name_t *n;
  int granted;

  if ((mode != WL_EXCLUSIVE && mode != WL_SHARED) ||
      (flags & ~(unsigned)(WL_IF_AVAILABLE | WL_STEAL)) != 0 ||
      ((flags & WL_STEAL) &&
       ((flags & WL_IF_AVAILABLE) || mode != WL_EXCLUSIVE)))
    return WL_EINVAL;
  req->agent = agent;
  req->name = NULL;
  wl__unlink(&req->qlink);
  wl__unlink(&req->alink);
  wl__unlink(&req->mlink);
  req->mode = (unsigned char)mode;
  req->state = WL__IDLE;
  req->events = 0;
  hash = wl__hash(name, name_len); /* outside the mutex: names can be long */

  wl__mutex_lock(&wl__m.mutex);
  n = wl__names_find(&wl__m.names, hash, name, name_len);
  if ((flags & WL_IF_AVAILABLE) && n != NULL &&
      !(wl__list_empty(&n->queue) && wl__compatible(n, mode))) {
    wl__mail(req, WL_EV_UNAVAILABLE);
    wl__mutex_unlock(&wl__m.mutex);
    return 0;
  }
  if (n == NULL) {
    n = wl__names_add(&wl__m.names, hash, name, name_len);
    if (n == NULL) {
      wl__mutex_unlock(&wl__m.mutex);
      return WL_ENOMEM;
    }
  }
  req->name = n;
  req->state = WL__QUEUED;
  wl__list_append(&agent->queued, &req->alink);
  if (flags & WL_STEAL) {
    wl__steal(n);
    wl__list_prepend(&n->queue, &req->qlink);
  } else {
    wl__list_append(&n->queue, &req->qlink);
  }
  wl__process(n);
  /* Read under the mutex: once it is released, any thread may change it. */
  granted = req->state == WL__HELD;
  wl__mutex_unlock(&wl__m.mutex);
  return granted ? WL_GRANTED_AT_ONCE : 0;
}

int wl_release(wl_request_t *req) {
  int held;

  wl__mutex_lock(&wl__m.mutex);
  held = req->state == WL__HELD;
  if (req->state != WL__IDLE)
    wl__end(req);
  if (wl__linked(&req->mlink))
    wl__list_remove(&req->mlink);
  req->events = 0;
  wl__mutex_unlock(&wl__m.mutex);
  return held;
}

/* Abort the request (4.3). */
int wl_abort(wl_request_t *req) {
  wl__mutex_lock(&wl__m.mutex);
  if (req->state != WL__QUEUED) {
    wl__mutex_unlock(&wl__m.mutex);
    return 0;
  }
  wl__end(req);
  wl__mutex_unlock(&wl__m.mutex);
  return 1;
}

static wl_info_t *wl__fill(wl_info_t *info, const wl_request_t *req,
                           const uint16_t *name, size_t name_index,
                           char **text) {
  const wl_agent_t *agent = req->agent;

  info->name = name;
  info->name_len = req->name->len;
  info->name_index = name_index;
  info->mode = (wl_mode_t)req->mode;
  info->client_id = *text;
  info->client_id_len = agent->client_id_len;
  memcpy(*text, agent->client_id, agent->client_id_len);
  *text += agent->client_id_len;
  return info + 1;
}

/* Snapshot the lock state (4.5). Copies everything, so that the caller can
 * build its result without holding the mutex. */
int wl_snapshot(wl_snapshot_t *snap) {
  size_t nheld = 0, npending = 0, units = 0, text = 0, i;
  wl__link_t *ln, *lr;
  wl_info_t *held, *pending;
  uint16_t *names;
  char *chars;

  wl__mutex_lock(&wl__m.mutex);
  for (ln = wl__m.names.order.next; ln != &wl__m.names.order; ln = ln->next) {
    wl__name_t *n = wl__container_of(ln, wl__name_t, order);
    units += n->len;
    for (lr = n->queue.next; lr != &n->queue; lr = lr->next, npending++)
      text += wl__container_of(lr, wl_request_t, qlink)->agent->client_id_len;
    for (lr = n->held.next; lr != &n->held; lr = lr->next, nheld++)
      text += wl__container_of(lr, wl_request_t, qlink)->agent->client_id_len;
  }
  snap->mem = malloc((nheld + npending) * sizeof(wl_info_t) +
                     units * sizeof(uint16_t) + text + 1);
  if (snap->mem == NULL) {
    wl__mutex_unlock(&wl__m.mutex);
    return WL_ENOMEM;
  }
  held = snap->held = snap->mem;
  pending = snap->pending = held + nheld;
  names = (uint16_t *)(pending + npending);
  chars = (char *)(names + units);
  snap->nheld = nheld;
  snap->npending = npending;
  snap->nnames = wl__m.names.count; /* a name in the table has an entry */
  for (ln = wl__m.names.order.next, i = 0; ln != &wl__m.names.order;
       ln = ln->next, i++) {
    wl__name_t *n = wl__container_of(ln, wl__name_t, order);
    if (n->len > 0)
      memcpy(names, n->units, n->len * sizeof(uint16_t));
    for (lr = n->queue.next; lr != &n->queue; lr = lr->next)
      pending = wl__fill(pending, wl__container_of(lr, wl_request_t, qlink),
                         names, i, &chars);
    for (lr = n->held.next; lr != &n->held; lr = lr->next)
      held = wl__fill(held, wl__container_of(lr, wl_request_t, qlink), names,
                      i, &chars);
    names += n->len;
  }
  wl__mutex_unlock(&wl__m.mutex);
  return 0;
}

void wl_snapshot_free(wl_snapshot_t *snap) {
  free(snap->mem);
  snap->mem = NULL;
}

size_t wl__name_count(void) {
  size_t count;

  wl__mutex_lock(&wl__m.mutex);
  count = wl__m.names.count;
  wl__mutex_unlock(&wl__m.mutex);
  return count;
}
