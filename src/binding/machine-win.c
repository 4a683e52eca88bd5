/* The machine-wide part of the binding on Windows (machine-os.h): an
 * agent's wake-up is an auto-reset event (os/win/wake.c), which the
 * system's thread pool waits for (RegisterWaitForSingleObject); its
 * callback sends the agent's async to the agent's thread. The pool's wait
 * resets the event: no wake-up is lost between that and the thread's
 * drain, which reads the mailbox after. */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>

#include <errno.h>

#include "machine-os.h"

/* The errnos that the Windows family returns (os/win/file.c's
 * wl__win_errno, and EMLINK, ELOOP, EBUSY), as libuv numbers them on
 * Windows; others pass (the core's own, and libuv's). */
int wlb__uv_code(int rc) {
  switch (rc) {
  case -ENOENT:
    return UV_ENOENT;
  case -EEXIST:
    return UV_EEXIST;
  case -EACCES:
    return UV_EACCES;
  case -ENOSPC:
    return UV_ENOSPC;
  case -ENOMEM:
    return UV_ENOMEM;
  case -EINVAL:
    return UV_EINVAL;
  case -EIO:
    return UV_EIO;
  case -EMLINK:
    return UV_EMLINK;
  case -ELOOP:
    return UV_ELOOP;
  case -EBUSY:
    return UV_EBUSY;
  case -EAGAIN:
    return UV_EAGAIN;
  case -ETIMEDOUT:
    return UV_ETIMEDOUT;
  default:
    return rc;
  }
}

/* On a thread of the pool: only the async, which may be sent from any
 * thread. */
static void CALLBACK wlb__on_event(void *arg, BOOLEAN timed_out) {
  wlb_agent_t *a = arg;

  uv_async_send(&a->wake.async);
}

static void wlb__on_async(uv_async_t *async) {
  wlb_agent_t *a = wlb__container_of(async, wlb_agent_t, wake.async);

  wl_agent_woken(&a->agent);
  wlb__drain(a->t);
}

/* Every thread's loop can take an async: polls does not matter here. */
int wlb__watch(wlb_thread_t *t, wlb_agent_t *a, int polls) {
  int rc = uv_async_init(t->loop, &a->wake.async, wlb__on_async);

  if (rc != 0)
    return rc;
  t->open_handles++;
  uv_unref(&a->wake.handle);
  if (!RegisterWaitForSingleObject(&a->wait, wl_agent_wake_fd(&a->agent),
                                   wlb__on_event, a, INFINITE,
                                   WT_EXECUTEINWAITTHREAD)) {
    rc = uv_translate_sys_error((int)GetLastError());
    a->closed = 1;
    uv_close(&a->wake.handle, wlb__on_wake_close);
  }
  return rc;
}

/* INVALID_HANDLE_VALUE: returns once no callback runs or will. */
void wlb__unwatch(wlb_agent_t *a) {
  UnregisterWaitEx(a->wait, INVALID_HANDLE_VALUE);
}
