/* web-locks core: the W3C Web Locks lock manager in plain C.
 *
 * One manager per process, guarded by one mutex. An agent is a thread (any
 * party that owns an event loop); it owns requests. Every outcome that the
 * spec delivers "on the agent's event loop" (a grant, a null callback for an
 * unavailable ifAvailable request, a steal) is put in the agent's mailbox and
 * the agent's notify callback is called when its mailbox goes from empty to
 * non-empty. The agent drains its mailbox on its own thread.
 *
 * Memory: the caller owns agents and requests. The core references a request
 * from wl_request() until it is released (wl_release), aborted (wl_abort
 * returned 1), delivered as WL_EV_UNAVAILABLE, or its agent closed; after that
 * the caller may free it. The core references an agent until wl_agent_close()
 * returns. Allocation happens only for a new name (wl_request), a snapshot,
 * and resizing the table of names; a failed resize is harmless.
 *
 * Every operation is O(1) in the number of other requests, locks and names,
 * except a steal (O(holders of that name)), wl_agent_close (O(the agent's
 * requests)) and wl_snapshot (O(entries)). */
#ifndef WL_H
#define WL_H

#include <stddef.h>
#include <stdint.h>

#include "wl-list.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { WL_EXCLUSIVE = 0, WL_SHARED = 1 } wl_mode_t;

/* wl_request() flags. */
enum { WL_IF_AVAILABLE = 1, WL_STEAL = 2 };

/* Mailbox events, or-ed together when one request has several undelivered.
 * They are delivered in this order: a grant (or unavailability) before the
 * steal that followed it. */
enum { WL_EV_GRANTED = 1, WL_EV_UNAVAILABLE = 2, WL_EV_STOLEN = 4 };

/* wl_request()'s result when the lock was granted without waiting. */
enum { WL_GRANTED_AT_ONCE = 1 };

/* Error codes, negative like libuv's. */
enum { WL_ENOMEM = -12, WL_EINVAL = -22 };

#define WL_CLIENT_ID_MAX 64

typedef struct wl_agent_s wl_agent_t;
typedef struct wl_request_s wl_request_t;
typedef struct wl__name_s wl__name_t;

/* Called with the manager's mutex held, from any thread, when `agent`'s
 * mailbox goes from empty to non-empty. It must only wake the agent (for
 * example uv_async_send) and must not call back into the core. */
typedef void (*wl_notify_cb)(wl_agent_t *agent);

struct wl_agent_s {
  void *data; /* the caller's */
  /* private */
  wl_notify_cb notify;
  wl__link_t queued; /* its queued requests, in request order */
  wl__link_t held;   /* its held locks, in grant order (the held set's) */
  wl__link_t mail;   /* its requests with undelivered events */
  int closing;       /* wl_agent_close() runs: no mail, no notify */
  size_t client_id_len;
  char client_id[WL_CLIENT_ID_MAX];
};

enum { WL__IDLE = 0, WL__QUEUED = 1, WL__HELD = 2 };

struct wl_request_s {
  void *data; /* the caller's */
  /* private */
  wl_agent_t *agent;
  wl__name_t *name;
  wl__link_t qlink; /* in its name's queue when queued, held list when held */
  wl__link_t alink; /* in its agent's queued or held list */
  wl__link_t mlink; /* in its agent's mail when it has events */
  unsigned char mode;
  unsigned char state;
  unsigned char events;
};

typedef struct {
  const uint16_t *name; /* UTF-16 code units, not terminated */
  size_t name_len;
  size_t name_index; /* the same for every entry of one name: 0..nnames-1 */
  wl_mode_t mode;
  const char *client_id; /* not terminated */
  size_t client_id_len;
} wl_info_t;

typedef struct {
  wl_info_t *held;
  size_t nheld;
  wl_info_t *pending; /* per name in queue order, names in first-use order */
  size_t npending;
  size_t nnames; /* distinct names among the entries */
  void *mem;     /* owns everything above */
} wl_snapshot_t;

/* Registers an agent. client_id is copied; at most WL_CLIENT_ID_MAX bytes.
 * Returns 0 or WL_EINVAL. */
int wl_agent_init(wl_agent_t *agent, const char *client_id,
                  size_t client_id_len, wl_notify_cb notify);

/* Terminates the agent's remaining locks and requests (spec 2.6): aborts its
 * queued requests in request order, then releases its held locks in grant
 * order, processing each affected queue as it goes; undelivered mail is
 * dropped. When it returns, no other thread can reach the agent or its
 * requests. */
void wl_agent_close(wl_agent_t *agent);

/* Pops the next request with mail and its events, or returns NULL. Only the
 * agent's own thread calls this. Once it has returned NULL, the next event
 * notifies again; a caller that stops before NULL must wake itself. */
wl_request_t *wl_agent_next(wl_agent_t *agent, unsigned *events);

/* Requests a lock on `name` (UTF-16 code units, copied when new) for `agent`.
 * The outcome arrives in the agent's mailbox: WL_EV_GRANTED, or for an
 * ifAvailable request that is not grantable WL_EV_UNAVAILABLE. Returns
 * WL_GRANTED_AT_ONCE if the lock was free (the grant is still delivered by
 * mail), 0 if the request waits or missed, WL_EINVAL for a flag combination
 * the spec rejects, or WL_ENOMEM. */
int wl_request(wl_agent_t *agent, wl_request_t *req, const uint16_t *name,
               size_t name_len, wl_mode_t mode, unsigned flags);

/* Ends a request in whatever state it is: a held lock is released, a queued
 * request leaves its queue, undelivered mail is dropped. Returns 1 if it
 * held its lock, 0 otherwise (for a granted request: the lock was stolen). */
int wl_release(wl_request_t *req);

/* Aborts a queued request. Returns 1 if it was removed from its queue (the
 * core no longer references it), 0 if it is not queued (already granted). */
int wl_abort(wl_request_t *req);

/* Copies the manager's state. Returns 0 or WL_ENOMEM; free with
 * wl_snapshot_free(). */
int wl_snapshot(wl_snapshot_t *snap);
void wl_snapshot_free(wl_snapshot_t *snap);

#ifdef __cplusplus
}
#endif

#endif
