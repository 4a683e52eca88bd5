/* query(): a manager's snapshot as the spec's LockManagerSnapshot. */
#ifndef WLB_QUERY_H
#define WLB_QUERY_H

#include "napi.h"

#include "../core/wl.h"

/* { held, pending }, the snapshot of manager m (with details: query.c). */
napi_value wlb__query(napi_env env, wl_manager_t *m, int details);

#endif
