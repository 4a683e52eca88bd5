/* What the binding's machine-wide part (machine.c) asks of the OS:
 * machine-unix.c (a FIFO polled by the thread's loop, or by the waker
 * thread under Bun) or machine-win.c (an event waited for by the system's
 * thread pool). */
#ifndef WLB_MACHINE_OS_H
#define WLB_MACHINE_OS_H

#include "thread.h"

/* The family's name, for machineFamily(). */
#if defined(_WIN32)
#define WLB_FAMILY "win"
#elif WL_OS_POSIX
#define WLB_FAMILY "posix"
#else
#define WLB_FAMILY "linux"
#endif

/* A code of the core's, or a libuv error code, for an error code that the
 * core returns: a negative errno is libuv's own on Unix, and on Windows
 * becomes libuv's name for it (uv_err_name). */
int wlb__uv_code(int rc);

/* Has other processes' wake-ups reach the agent's thread: they end in
 * a->wake, which does not keep the loop alive (waiting requests do: see
 * wlb__make), and drain the thread. polls: whether the thread's loop can
 * poll a descriptor (not under Bun). Returns 0, or a libuv error code with
 * the handle closing (a->closed: its close callback, wlb__on_wake_close,
 * frees a) or never made. */
int wlb__watch(wlb_thread_t *t, wlb_agent_t *a, int polls);
/* Stops it: once this returns, nothing but the loop touches a->wake. */
void wlb__unwatch(wlb_agent_t *a);
void wlb__on_wake_close(uv_handle_t *handle);

#endif
