/* The waker thread where there is none (macOS): it waits with epoll, which
 * only Linux has. Only a loop that cannot poll (Bun's) needs it, and
 * lib/manager-machine.js refuses the machine-wide manager to Bun there. */
#include "waker.h"

int wlb__waker_add(wl_agent_t *agent, uv_async_t *async) {
  (void)agent;
  (void)async;
  return UV_ENOSYS;
}

void wlb__waker_remove(wl_agent_t *agent) { (void)agent; }
