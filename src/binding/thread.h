/* A thread's state (one per Node environment), its agents and their
 * requests (thread.c), which every manager's part of the binding uses. */
#ifndef WLB_THREAD_H
#define WLB_THREAD_H

#include "napi.h"

#include <stdint.h>
#include <stdlib.h>

#include <uv.h>

#include "../core/wl.h"

#define wlb__container_of(ptr, type, member)                                   \
  ((type *)((char *)(ptr) - offsetof(type, member)))

/* The numbers in a thread's io array: a grant's fencing token, a
 * request's serial (out) and its parent's (in) go as their low and high 32
 * bits; the serial and the parent only for a request made WLB_TRACKED. */
enum {
  WLB_IO_RESULT,
  WLB_IO_ID,
  WLB_IO_EVENTS,
  WLB_IO_TOKEN_LO,
  WLB_IO_TOKEN_HI,
  WLB_IO_SERIAL_LO,
  WLB_IO_SERIAL_HI,
  WLB_IO_PARENT_LO,
  WLB_IO_PARENT_HI,
  WLB_IO
};

/* A bit of request()'s `how` above wl.h's mode and flags: the request is
 * tracked for deadlocks (lib/deadlock.js), so it takes its parent from the
 * io array and gives its serial there. Untracked ones touch neither. */
#define WLB_TRACKED 8u
_Static_assert(WLB_TRACKED > ((unsigned)(WL_IF_AVAILABLE | WL_STEAL) << 1 | 1),
               "WLB_TRACKED must lie above wl.h's mode and flags");

/* Request handles per chunk (see wlb_thread_t.chunks), and the most ids a
 * thread may use: an id << 2 fits a handle's data, id * 2 + 1 a uint32. */
#define WLB_CHUNK 256
#define WLB_MAX_IDS ((uint32_t)1 << 29)
/* What a thread's waiting requests were found to wait for, since anything
 * last changed on the thread (wlb_thread_t.waits). */
enum { WLB_UNASKED, WLB_ON_SELF, WLB_ON_OTHERS };

typedef struct wlb_agent_s wlb_agent_t;

/* A thread's agent of a machine-wide manager. Its agent.data is the thread, as
 * for the process-wide manager's. */
struct wlb_agent_s {
  wl_agent_t agent;
  wlb_thread_t *t;
  struct wlb_file_s *seg; /* machine.c's */
  /* How other processes wake it: its loop polls its FIFO, or, where the loop
   * cannot (Bun), the waker thread does and sends this async (waker-linux.c);
   * on Windows the system's thread pool waits for its event and sends the
   * async (machine-win.c). */
  union {
    uv_handle_t handle;
    uv_poll_t poll;
    uv_async_t async;
  } wake;
#ifdef _WIN32
  void *wait; /* its RegisterWaitForSingleObject handle */
#endif
  unsigned char polled; /* wake is the poll */
  unsigned char closed; /* wl_agent_close() ran: its records are gone */
};

struct wlb_thread_s {
  wl_agent_t agent; /* of the process-wide manager */
  /* Agents of machine-wide managers, indexed by the handle lib/ holds. */
  wlb_agent_t **scopes;
  uint32_t nscopes;
  uv_loop_t *loop;
  uv_async_t async; /* woken by other threads */
  uv_check_t check; /* woken by this thread: drains after this poll phase */
  uv_idle_t idle;   /* keeps that poll phase from blocking meanwhile */
  uv_prepare_t prepare; /* sees the loop about to wait (wlb__on_prepare) */
  uv_timer_t quiet;     /* then asks whether it is stuck (wlb__on_quiet) */
  /* lib/'s own timer (tickIn()): the loop's, which no fake timers that a
   * test installs in JS can stop (lib/deadlock.js). */
  uv_timer_t tick;
  napi_ref tick_fn; /* JS () => void, set by setTick() */
  int open_handles;
  napi_env env;
  napi_ref exports;  /* returned again if this thread loads the addon twice */
  napi_ref dispatch; /* JS () => void, set by setup(): reads io */
  /* setup()'s Uint32Array of WLB_IO numbers passed to JS without making a
   * JS value (a handle and a Node-API call each): request()'s result, and
   * the id, events and (for a grant) token of the delivery being
   * dispatched. */
  napi_ref io_ref;
  uint32_t *io;
  napi_async_context actx;
  napi_async_cleanup_hook_handle hook;
  /* Request handles in slots, in chunks of WLB_CHUNK that never move (the
   * core maps mail back to a handle's address); a request's id is its
   * slot's index. A handle's data is the binding's: id << 2, or-ed with
   * WLB_WAITING, in a used slot, (next free id + 1) << 1 | 1 in a free one,
   * so that the free list costs no extra memory. */
  wl_request_t **chunks;
  uint32_t nchunks;
  uint32_t cap;       /* of chunks */
  uint32_t free_head; /* id + 1 of the first free slot, 0 if none */
  /* Requests not yet granted: they keep the loop alive, unless `waits` is
   * WLB_ON_SELF: only this thread can end their wait (see wlb__on_quiet). */
  size_t waiting;
  unsigned char waits;
};

/* The thread's life (module.c's init and teardown): init starts its
 * handles, close closes them, and the close of the last of them, or of a
 * machine-wide manager's agent's (machine.c), frees it (closed). */
wlb_thread_t *wlb__thread_self(void);
int wlb__thread_init(wlb_thread_t *t);
void wlb__thread_close(wlb_thread_t *t);
void wlb__closed(wlb_thread_t *t);
void wlb__stuck_check_start(wlb_thread_t *t);

/* setTick(fn) and tickIn(ms, ref): lib/'s timer of the thread. */
napi_value wlb_set_tick(napi_env env, napi_callback_info info);
napi_value wlb_tick_in(napi_env env, napi_callback_info info);

/* The agents' notify callback (wl_agent_init), and the delivery of their
 * mailboxes. */
void wlb__notify(wl_agent_t *agent);
void wlb__drain(wlb_thread_t *t);

/* The slots of the thread's requests. */
wl_request_t *wlb__slot_get(const wlb_thread_t *t, uint32_t id);
void wlb__free(wlb_thread_t *t, wl_request_t *req);

/* request(name, how) of agent, from the JS arguments; and the JS calls on
 * the thread's requests. */
napi_value wlb__request(napi_env env, wlb_thread_t *t, wl_agent_t *agent,
                        napi_value *argv);
napi_value wlb_request(napi_env env, napi_callback_info info);
napi_value wlb_release(napi_env env, napi_callback_info info);
napi_value wlb_abort(napi_env env, napi_callback_info info);

#endif
