/* The machine-wide part of the binding on Linux and macOS (machine-os.h):
 * an agent's FIFO polled by its thread's loop, or by the waker thread
 * where the loop cannot poll (Bun: waker-linux.c). */
#include "machine-os.h"
#include "waker.h"

int wlb__uv_code(int rc) { return rc; }

static void wlb__on_poll(uv_poll_t *poll, int status, int events) {
  wlb_agent_t *a = wlb__container_of(poll, wlb_agent_t, wake.poll);

  wl_agent_woken(&a->agent);
  wlb__drain(a->t);
}

/* The waker thread read the FIFO (wlb__waker_add). */
static void wlb__on_waker(uv_async_t *async) {
  wlb__drain(wlb__container_of(async, wlb_agent_t, wake.async)->t);
}

/* Its loop polls the FIFO, or where it cannot (Bun: polls is 0), the
 * waker thread does. */
int wlb__watch(wlb_thread_t *t, wlb_agent_t *a, int polls) {
  int rc = polls ? uv_poll_init(t->loop, &a->wake.poll,
                                wl_agent_wake_fd(&a->agent))
                 : uv_async_init(t->loop, &a->wake.async, wlb__on_waker);

  if (rc != 0)
    return rc;
  a->polled = polls;
  t->open_handles++;
  uv_unref(&a->wake.handle);
  rc = polls ? uv_poll_start(&a->wake.poll, UV_READABLE, wlb__on_poll)
             : wlb__waker_add(&a->agent, &a->wake.async);
  if (rc != 0) {
    a->closed = 1;
    uv_close(&a->wake.handle, wlb__on_wake_close);
  }
  return rc;
}

void wlb__unwatch(wlb_agent_t *a) {
  if (a->polled)
    uv_poll_stop(&a->wake.poll);
  else
    wlb__waker_remove(&a->agent);
}
