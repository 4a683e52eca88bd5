/* The public functions of the core: each dispatches once, on the kind of
 * manager, to the algorithms compiled for it (core/process.c, core/machine.c). */
#include <stdlib.h>

#include "internal.h"

int wl_agent_init(wl_manager_t *m, wl_agent_t *agent, const char *client_id,
                  size_t client_id_len, wl_notify_cb notify) {
  return wl__ops(m)->agent_init(m, agent, client_id, client_id_len, notify);
}

void wl_agent_close(wl_agent_t *agent) {
  wl__ops(agent->m)->agent_close(agent);
}

wl_request_t *wl_agent_next(wl_agent_t *agent, unsigned *events) {
  return wl__ops(agent->m)->agent_next(agent, events);
}

int wl_request(wl_agent_t *agent, wl_request_t *req, const uint16_t *name,
               size_t name_len, wl_mode_t mode, unsigned flags) {
  return wl__ops(agent->m)->request(agent, req, name, name_len, mode, flags);
}

uint64_t wl_request_token(const wl_request_t *req) { return req->token; }

uint64_t wl_request_serial(const wl_request_t *req) { return req->serial; }

uint64_t wl_clock(void) { return wl__os_now() / 1000; }

int wl_agent_status(const wl_agent_t *agent) {
  return agent->m->machine && wl__is_corrupt(agent->m) ? WL_ECORRUPT : 0;
}

int wl_agent_waits(wl_agent_t *agent) {
  return wl__ops(agent->m)->agent_waits(agent);
}

int wl_release(wl_request_t *req) {
  return wl__ops(req->agent->m)->release(req);
}

int wl_abort(wl_request_t *req) { return wl__ops(req->agent->m)->abort(req); }

int wl_snapshot(wl_manager_t *m, wl_snapshot_t *snap) {
  return wl__ops(m)->snapshot(m, snap);
}

void wl_snapshot_free(wl_snapshot_t *snap) {
  free(snap->mem);
  snap->mem = NULL;
}

size_t wl__name_count(wl_manager_t *m) {
  size_t count;

  if (wl__lock(m) != 0)
    return 0;
  count = WL__HDR(m)->count - WL__HDR(m)->nidle;
  wl__unlock(m);
  return count;
}
