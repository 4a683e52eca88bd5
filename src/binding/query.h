/* query(): a manager's snapshot as the spec's LockManagerSnapshot. */
#ifndef WLB_QUERY_H
#define WLB_QUERY_H

#include "napi.h"

#include "../core/wl.h"

/* How much each entry says: the spec's fields (name, mode, clientId);
 * with WLB_DETAILS also its request's serial and its parent's
 * (wl_request_t), its process's id, and for how long (ms) it has been
 * pending or held, or null where the manager keeps no times (the
 * process-wide one); with WLB_PEEKED also whether that process is alive
 * (wl_scope_peek). */
enum { WLB_SPEC = 0, WLB_DETAILS = 1, WLB_PEEKED = 2 };

/* { held, pending }, the snapshot of manager m. */
napi_value wlb__query(napi_env env, wl_manager_t *m, int details);
/* The same of a snapshot taken, which it frees. */
napi_value wlb__snapshot_value(napi_env env, wl_snapshot_t *snap,
                               int details);

#endif
