/* The waker thread (waker-linux.c), which wakes the machine-wide managers' agents
 * whose thread's event loop cannot poll their FIFO (Bun's). */
#ifndef WLB_WAKER_H
#define WLB_WAKER_H

#include "napi.h"

#include <uv.h>

#include "../core/wl.h"

/* Has the waker thread watch the agent's FIFO: when it is readable, the
 * thread reads it (wl_agent_woken) and sends async. Returns 0 or a libuv
 * error code. */
int wlb__waker_add(wl_agent_t *agent, uv_async_t *async);
/* Stops watching an agent added: once this returns, the waker thread
 * touches neither its FIFO nor its async again. */
void wlb__waker_remove(wl_agent_t *agent);

#endif
