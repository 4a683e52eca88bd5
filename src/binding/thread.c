/* A thread's state (one per Node environment): its wl_agent_t of the
 * process-wide manager and one of each machine-wide manager it opened, its
 * requests, and the delivery of their events. Agents are woken through a
 * uv_async_t on the thread's own loop by other threads of the process,
 * through a uv_check_t (as setImmediate is) by their own thread, which costs
 * no syscall, and through a uv_poll_t on their FIFO by other processes.
 *
 * JS never holds native pointers: a request is named by a small integer id,
 * an index into this thread's slot table, checked on every call. Grants and
 * steals are delivered to the JS dispatcher as (id, events), each through
 * napi_make_callback, so that microtasks run between deliveries as they do
 * between tasks. Numbers on the hot paths (a request's result, a delivery's
 * id and events, a grant's fencing token) go through a Uint32Array shared
 * with JS, not JS values. */

#include "thread.h"

/* A name of up to this many UTF-16 units is read without a malloc. */
#define WLB_NAME_STACK 256
/* Events delivered per wake-up at most (see wlb__deliver). */
#define WLB_DRAIN_BUDGET 1024
/* In a used slot's data: the request is not yet granted. */
#define WLB_WAITING 2
/* An event of the binding's own, beside the core's WL_EV_*: the request's
 * manager was found corrupt, and the request is dropped (lib/events.js). */
#define WLB_EV_FAILED 8

static wl_request_t *wlb__slot(const wlb_thread_t *t, uint32_t id) {
  return &t->chunks[id / WLB_CHUNK][id % WLB_CHUNK];
}

static uint32_t wlb__id(const wl_request_t *req) {
  return (uint32_t)((uintptr_t)req->data >> 2);
}

/* Adds a chunk of free slots. Returns 0 or WL_ENOMEM. */
static int wlb__grow(wlb_thread_t *t) {
  wl_request_t *chunk;
  uint32_t i, base = t->nchunks * WLB_CHUNK;

  if (t->nchunks == t->cap) {
    uint32_t cap = t->cap ? t->cap * 2 : 4;
    wl_request_t **chunks;
    if ((uint64_t)cap * WLB_CHUNK > WLB_MAX_IDS)
      return WL_ENOMEM;
    chunks = realloc(t->chunks, cap * sizeof(*chunks));
    if (chunks == NULL)
      return WL_ENOMEM;
    t->chunks = chunks;
    t->cap = cap;
  }
  chunk = malloc(WLB_CHUNK * sizeof(*chunk));
  if (chunk == NULL)
    return WL_ENOMEM;
  t->chunks[t->nchunks++] = chunk;
  for (i = WLB_CHUNK; i-- > 0;) {
    chunk[i].data = (void *)((uintptr_t)t->free_head << 1 | 1);
    t->free_head = base + i + 1;
  }
  return 0;
}

/* A free slot's handle, now used; NULL when out of memory. */
static wl_request_t *wlb__slot_alloc(wlb_thread_t *t) {
  wl_request_t *req;
  uint32_t id;

  if (t->free_head == 0 && wlb__grow(t) != 0)
    return NULL;
  id = t->free_head - 1;
  req = wlb__slot(t, id);
  t->free_head = (uint32_t)((uintptr_t)req->data >> 1);
  req->data = (void *)((uintptr_t)id << 2);
  return req;
}

/* The handle in used slot id, or NULL. */
wl_request_t *wlb__slot_get(const wlb_thread_t *t, uint32_t id) {
  wl_request_t *req;

  if (id / WLB_CHUNK >= t->nchunks)
    return NULL;
  req = wlb__slot(t, id);
  return (uintptr_t)req->data & 1 ? NULL : req;
}

/* Something on this thread changed what its agents hold or wait for: its
 * waiting requests keep the loop alive again, until they are next found to
 * wait on the thread alone (wlb__on_quiet). */
static void wlb__changed(wlb_thread_t *t) {
  if (t->waits == WLB_ON_SELF)
    uv_ref((uv_handle_t *)&t->async);
  t->waits = WLB_UNASKED;
}

static void wlb__unwait(wlb_thread_t *t, wl_request_t *req) {
  if (!((uintptr_t)req->data & WLB_WAITING))
    return;
  req->data = (void *)((uintptr_t)req->data & ~(uintptr_t)WLB_WAITING);
  wlb__changed(t);
  if (--t->waiting == 0)
    uv_unref((uv_handle_t *)&t->async);
}

/* The core no longer references req: give its slot back. */
void wlb__free(wlb_thread_t *t, wl_request_t *req) {
  uint32_t id = wlb__id(req);

  wlb__unwait(t, req);
  req->data = (void *)((uintptr_t)t->free_head << 1 | 1);
  t->free_head = id + 1;
}

/* The thread this code runs on, if it has loaded the addon. */
static _Thread_local wlb_thread_t *wlb__self;

static void wlb__on_check(uv_check_t *check);
static void wlb__on_idle(uv_idle_t *idle) {}

static void wlb__wake_self(wlb_thread_t *t) {
  uv_check_start(&t->check, wlb__on_check);
  uv_idle_start(&t->idle, wlb__on_idle);
}

/* Called under the manager's mutex from any thread. The handles are valid:
 * teardown closes the agent (under the same mutex) before closing them. */
void wlb__notify(wl_agent_t *agent) {
  wlb_thread_t *t = agent->data;

  if (wlb__self == t)
    wlb__wake_self(t);
  else
    uv_async_send(&t->async);
}

/* Calls the dispatcher fn with an event, which it reads from io. */
static void wlb__dispatch(wlb_thread_t *t, napi_value fn, uint32_t id,
                          unsigned events) {
  napi_env env = t->env;
  napi_status status;
  bool pending = false;

  t->io[WLB_IO_ID] = id;
  t->io[WLB_IO_EVENTS] = events;
  /* fn is its own `this`: Node wants an object. */
  status = napi_make_callback(env, t->actx, fn, fn, 0, NULL, NULL);
  /* The dispatcher does not throw; if it ever does, report it as Node
   * reports any exception thrown from a callback. A failure without an
   * exception means the thread is stopping: its teardown frees everything. */
  if (status != napi_ok && napi_is_exception_pending(env, &pending) == napi_ok &&
      pending) {
    napi_value error;
    if (napi_get_and_clear_last_exception(env, &error) == napi_ok)
      napi_fatal_exception(env, error);
  }
}

/* The agent's manager was found corrupt: every request of it that the
 * thread still has is dropped, its slot freed (so that it no longer keeps
 * the loop alive), and told to JS, which rejects it. */
static void wlb__fail(wlb_thread_t *t, wl_agent_t *agent,
                      const unsigned char *closed, napi_value fn) {
  uint32_t id;

  for (id = 0; !*closed && id < t->nchunks * WLB_CHUNK; id++) {
    wl_request_t *req = wlb__slot_get(t, id);
    if (req == NULL || req->agent != agent)
      continue;
    /* Freed after the call, as an unavailable request is (see below). */
    wlb__unwait(t, req);
    wlb__dispatch(t, fn, id, WLB_EV_FAILED);
    if (wlb__slot_get(t, id) == req)
      wlb__free(t, req);
  }
}

/* Delivers an agent's mailbox, including events that arrive meanwhile (a
 * callback that requests again), up to a budget shared by the thread's
 * agents, so that timers and I/O are not starved; what is left is delivered
 * after this poll phase. Returns 0 once the budget is spent. `closed` is
 * set when a callback closes the agent's manager. */
static int wlb__deliver(wlb_thread_t *t, wl_agent_t *agent,
                        const unsigned char *closed, napi_value fn,
                        unsigned *budget) {
  /* The process-wide manager's memory is the process's own: never corrupt.
   * A corrupt one's wl_agent_next() finds nothing: asked once, after. */
  int shared = agent != &t->agent;
  wl_request_t *req;
  unsigned events;

  while (!*closed && (req = wl_agent_next(agent, &events)) != NULL) {
    if (events & WL_EV_GRANTED) {
      uint64_t token = wl_request_token(req);
      t->io[WLB_IO_TOKEN_LO] = (uint32_t)token;
      t->io[WLB_IO_TOKEN_HI] = (uint32_t)(token >> 32);
    }
    if (events & (WL_EV_GRANTED | WL_EV_UNAVAILABLE))
      wlb__unwait(t, req);
    /* An unavailable request is done with the core; free it after the call,
     * so that its id cannot be reused while the call runs. */
    wlb__dispatch(t, fn, wlb__id(req), events);
    if (events & WL_EV_UNAVAILABLE)
      wlb__free(t, req);
    if (--*budget == 0) {
      wlb__wake_self(t);
      return 0;
    }
  }
  if (shared && !*closed && wl_agent_status(agent) != 0)
    wlb__fail(t, agent, closed, fn);
  return 1;
}

/* A wake-up does not say which agent it is for: every agent's mailbox is
 * looked at (a thread has one or a few), each machine-wide manager's agent looked
 * up again by its index, since a callback may close it. One handle scope and
 * one lookup of the dispatcher for the whole drain: a delivery makes no JS
 * value. */
void wlb__drain(wlb_thread_t *t) {
  static const unsigned char open = 0;
  unsigned budget = WLB_DRAIN_BUDGET;
  napi_handle_scope scope;
  napi_value fn;
  uint32_t i;

  wlb__changed(t);
  if (napi_open_handle_scope(t->env, &scope) != napi_ok)
    return;
  if (napi_get_reference_value(t->env, t->dispatch, &fn) == napi_ok &&
      wlb__deliver(t, &t->agent, &open, fn, &budget)) {
    for (i = 0; i < t->nscopes; i++) {
      wlb_agent_t *a = t->scopes[i];
      if (a != NULL && !wlb__deliver(t, &a->agent, &a->closed, fn, &budget))
        break;
    }
  }
  napi_close_handle_scope(t->env, scope);
}

static void wlb__on_async(uv_async_t *async) {
  wlb__drain(wlb__container_of(async, wlb_thread_t, async));
}

/* Whether only this thread can end the wait of its agents' waiting requests
 * (and one waits): each agent's answer (wl_agent_waits). */
static int wlb__stuck(wlb_thread_t *t) {
  int waits = wl_agent_waits(&t->agent), stuck = waits == WL_WAITS_ON_SELF;
  uint32_t i;

  if (waits != WL_WAITS_NOTHING && !stuck)
    return 0;
  for (i = 0; i < t->nscopes; i++) {
    wlb_agent_t *a = t->scopes[i];
    if (a == NULL || a->closed)
      continue;
    waits = wl_agent_waits(&a->agent);
    if (waits != WL_WAITS_NOTHING && waits != WL_WAITS_ON_SELF)
      return 0;
    stuck |= waits == WL_WAITS_ON_SELF;
  }
  return stuck;
}

/* Waiting requests keep the loop alive, except when only this thread could
 * end their wait: each has in its way a lock of its own agent that conflicts
 * with it, or a request of its own agent ahead of it that waits so. Only
 * this thread's code (which nothing will run when nothing else keeps the
 * loop alive) or another agent's steal (which is delivered here, and ends
 * this state) can then grant any of them. The thread then ends, once
 * nothing else keeps its loop alive, as one that awaits a promise nothing
 * will settle does, instead of hanging forever (a test that deadlocks on a
 * lock it leaked). A request with only other agents in its way (holders, or
 * requests ahead: other threads, other processes, and another copy of this
 * package in this thread, whose agents are other agents) keeps it alive:
 * they may release, abort, time out, end or steal.
 *
 * The answer changes only through what this thread does or is delivered
 * (wl_agent_waits), each of which makes it unasked (wlb__changed). It is
 * asked, under the managers' mutexes, WLB_QUIET_MS after the loop first
 * waits with it unasked, whatever else keeps the loop alive: so at most once
 * per WLB_QUIET_MS while events come (a thread handed locks again and again
 * takes no mutex more for each wait), and not again while none do. The
 * async handle unreferenced still wakes the thread, and other handles of
 * the loop (another copy of the package's among them) keep it alive as they
 * would without us. */
#define WLB_QUIET_MS 20

static void wlb__on_quiet(uv_timer_t *quiet) {
  wlb_thread_t *t = wlb__container_of(quiet, wlb_thread_t, quiet);

  if (t->waiting == 0 || t->waits != WLB_UNASKED)
    return;
  if (wlb__stuck(t)) {
    t->waits = WLB_ON_SELF;
    uv_unref((uv_handle_t *)&t->async);
  } else {
    t->waits = WLB_ON_OTHERS;
  }
}

static void wlb__on_prepare(uv_prepare_t *prepare) {
  wlb_thread_t *t = wlb__container_of(prepare, wlb_thread_t, prepare);

  if (t->waiting == 0 || t->waits != WLB_UNASKED ||
      uv_is_active((uv_handle_t *)&t->quiet))
    return;
  uv_timer_start(&t->quiet, wlb__on_quiet, WLB_QUIET_MS, 0);
}

/* Has the thread ask whether it is stuck once its loop waits (setup()'s
 * stuckCheck). */
void wlb__stuck_check_start(wlb_thread_t *t) {
  uv_prepare_start(&t->prepare, wlb__on_prepare);
}

static void wlb__on_check(uv_check_t *check) {
  wlb_thread_t *t = wlb__container_of(check, wlb_thread_t, check);

  uv_check_stop(&t->check);
  uv_idle_stop(&t->idle);
  wlb__drain(t);
}

/* One of the thread's handles is closed; the last one frees the thread. */
void wlb__closed(wlb_thread_t *t) {
  if (--t->open_handles > 0)
    return;
  if (t->hook != NULL)
    napi_remove_async_cleanup_hook(t->hook);
  free(t->scopes);
  free(t);
}

static void wlb__on_close(uv_handle_t *handle) { wlb__closed(handle->data); }

/* The thread this code runs on, if it has loaded the addon. */
wlb_thread_t *wlb__thread_self(void) { return wlb__self; }

/* Starts t's handles on t->loop and makes t this thread's. Returns 0, or a
 * libuv error with nothing started. */
int wlb__thread_init(wlb_thread_t *t) {
  int rc = uv_async_init(t->loop, &t->async, wlb__on_async);

  if (rc != 0)
    return rc;
  /* uv_check_init, uv_idle_init, uv_prepare_init and uv_timer_init cannot
   * fail. */
  uv_check_init(t->loop, &t->check);
  uv_idle_init(t->loop, &t->idle);
  uv_prepare_init(t->loop, &t->prepare);
  uv_timer_init(t->loop, &t->quiet);
  uv_timer_init(t->loop, &t->tick);
  t->async.data = t->check.data = t->idle.data = t->prepare.data = t;
  t->quiet.data = t->tick.data = t;
  t->open_handles = 6;
  /* Only pending requests keep the loop alive (see wlb_request). */
  uv_unref((uv_handle_t *)&t->async);
  uv_unref((uv_handle_t *)&t->prepare);
  uv_unref((uv_handle_t *)&t->quiet);
  wlb__self = t;
  return 0;
}

/* Once t's agents are closed: frees its slots and closes its handles, the
 * last of whose closes frees t (wlb__closed). */
void wlb__thread_close(wlb_thread_t *t) {
  uint32_t i;

  for (i = 0; i < t->nchunks; i++)
    free(t->chunks[i]);
  free(t->chunks);
  if (wlb__self == t)
    wlb__self = NULL;
  uv_close((uv_handle_t *)&t->async, wlb__on_close);
  uv_close((uv_handle_t *)&t->check, wlb__on_close);
  uv_close((uv_handle_t *)&t->idle, wlb__on_close);
  uv_close((uv_handle_t *)&t->prepare, wlb__on_close);
  uv_close((uv_handle_t *)&t->quiet, wlb__on_close);
  uv_close((uv_handle_t *)&t->tick, wlb__on_close);
}

/* The tick fires: lib/'s function runs, as a delivery does. */
static void wlb__on_tick(uv_timer_t *tick) {
  wlb_thread_t *t = wlb__container_of(tick, wlb_thread_t, tick);
  napi_env env = t->env;
  napi_handle_scope scope;
  napi_value fn;
  bool pending = false;

  if (t->tick_fn == NULL || napi_open_handle_scope(env, &scope) != napi_ok)
    return;
  if (napi_get_reference_value(env, t->tick_fn, &fn) == napi_ok &&
      fn != NULL &&
      napi_make_callback(env, t->actx, fn, fn, 0, NULL, NULL) != napi_ok &&
      napi_is_exception_pending(env, &pending) == napi_ok && pending) {
    napi_value error;
    if (napi_get_and_clear_last_exception(env, &error) == napi_ok)
      napi_fatal_exception(env, error);
  }
  napi_close_handle_scope(env, scope);
}

/* setTick(fn): the function the thread's tick calls (once per thread, by
 * lib/binding.js). */
napi_value wlb_set_tick(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  wlb_thread_t *t;

  if (wlb__args(env, info, 1, argv, &t) != 0)
    return NULL;
  if (t->tick_fn != NULL) {
    napi_throw_error(env, NULL, "web-locks: tick already set");
    return NULL;
  }
  WLB_CALL(env, napi_create_reference(env, argv[0], 1, &t->tick_fn));
  return NULL;
}

/* tickIn(ms, ref): the tick fires in ms milliseconds, or sooner if it was
 * due sooner already; ref: it keeps the loop alive until then (else as it
 * was). A negative ms stops it. */
napi_value wlb_tick_in(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  wlb_thread_t *t;
  int32_t ms;
  bool ref;

  if (wlb__args(env, info, 2, argv, &t) != 0)
    return NULL;
  WLB_CALL(env, napi_get_value_int32(env, argv[0], &ms));
  WLB_CALL(env, napi_get_value_bool(env, argv[1], &ref));
  if (ms < 0) {
    uv_timer_stop(&t->tick);
    return NULL;
  }
  uv_update_time(t->loop); /* the loop's time is that of its last wake */
  if (!uv_is_active((uv_handle_t *)&t->tick) ||
      uv_timer_get_due_in(&t->tick) > (uint64_t)ms) {
    if (!uv_is_active((uv_handle_t *)&t->tick))
      uv_unref((uv_handle_t *)&t->tick);
    uv_timer_start(&t->tick, wlb__on_tick, (uint64_t)ms, 0);
  }
  if (ref)
    uv_ref((uv_handle_t *)&t->tick);
  return NULL;
}

static wl_request_t *wlb__req_arg(napi_env env, wlb_thread_t *t,
                                  napi_value v) {
  uint32_t id;
  wl_request_t *req;

  if (napi_get_value_uint32(env, v, &id) != napi_ok ||
      (req = wlb__slot_get(t, id)) == NULL) {
    napi_throw_type_error(env, NULL, "web-locks: unknown request id");
    return NULL;
  }
  return req;
}

/* Reads a JS string as UTF-16 into `stack` when it fits, else into a new
 * buffer (*name != stack: the caller frees it). Returns 0, or 1 with an
 * exception pending. */
static int wlb__get_name(napi_env env, napi_value value, char16_t *stack,
                         char16_t **name, size_t *len) {
  *name = stack;
  if (napi_get_value_string_utf16(env, value, stack, WLB_NAME_STACK, len) !=
      napi_ok)
    goto fail;
  if (*len < WLB_NAME_STACK - 1)
    return 0;
  /* Maybe truncated: ask for the length, then copy it all. */
  if (napi_get_value_string_utf16(env, value, NULL, 0, len) != napi_ok)
    goto fail;
  *name = malloc((*len + 1) * sizeof(char16_t));
  if (*name == NULL) {
    wlb__throw_code(env, WL_ENOMEM);
    return 1;
  }
  if (napi_get_value_string_utf16(env, value, *name, *len + 1, len) == napi_ok)
    return 0;
  free(*name);
  *name = stack;
fail:
  wlb__throw_last(env);
  return 1;
}

/* Makes the request in a new slot: how is the mode (bit 0) and the flags
 * (the bits above) of wl.h, and WLB_TRACKED. Returns 0 with the result
 * stored, or an error code with nothing left behind. */
static int wlb__make(wlb_thread_t *t, wl_agent_t *agent, const char16_t *name,
                     size_t len, uint32_t how) {
  wl_request_t *req = wlb__slot_alloc(t);
  int tracked = (how & WLB_TRACKED) != 0;
  int rc;

  if (req == NULL)
    return WL_ENOMEM;
  /* lib/ writes the parent before each tracked request. */
  req->parent = tracked ? (uint64_t)t->io[WLB_IO_PARENT_HI] << 32 |
                              t->io[WLB_IO_PARENT_LO]
                        : 0;
  rc = wl_request(agent, req, (const uint16_t *)name, len,
                  (wl_mode_t)(how & 1), (how & ~WLB_TRACKED) >> 1);
  if (rc < 0) {
    wlb__free(t, req);
    return rc;
  }
  req->data = (void *)((uintptr_t)req->data | WLB_WAITING);
  wlb__changed(t);
  if (t->waiting++ == 0)
    uv_ref((uv_handle_t *)&t->async);
  t->io[WLB_IO_RESULT] = wlb__id(req) * 2 + (rc == WL_GRANTED_AT_ONCE);
  if (tracked) {
    uint64_t serial = wl_request_serial(req);

    t->io[WLB_IO_SERIAL_LO] = (uint32_t)serial;
    t->io[WLB_IO_SERIAL_HI] = (uint32_t)(serial >> 32);
  }
  return 0;
}

/* Makes a request of agent from the JS arguments (name, how). */
napi_value wlb__request(napi_env env, wlb_thread_t *t, wl_agent_t *agent,
                        napi_value *argv) {
  uint32_t how;
  size_t len;
  char16_t stack[WLB_NAME_STACK];
  char16_t *name;
  int rc;

  WLB_CALL(env, napi_get_value_uint32(env, argv[1], &how));
  if (wlb__get_name(env, argv[0], stack, &name, &len) != 0)
    return NULL;
  rc = wlb__make(t, agent, name, len, how);
  if (name != stack)
    free(name);
  if (rc < 0)
    wlb__throw_code(env, rc);
  return NULL;
}

/* request(name, how) sets the io result to id * 2 + 1 if the lock was free,
 * id * 2 if the request waits (or misses); if how has WLB_TRACKED, its
 * parent is the io parent's and the io serial is set to its serial.
 * Validation is lib/'s; this
 * only refuses what would corrupt the manager. Either the request is made
 * and its result stored, or it throws and the core never saw it. */
napi_value wlb_request(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  wlb_thread_t *t;

  if (wlb__args(env, info, 2, argv, &t) != 0)
    return NULL;
  if (t->dispatch == NULL) {
    napi_throw_error(env, NULL, "web-locks: not set up");
    return NULL;
  }
  return wlb__request(env, t, &t->agent, argv);
}

/* release(id) -> whether the lock was still held (false: it was stolen). */
napi_value wlb_release(napi_env env, napi_callback_info info) {
  napi_value argv[1], result;
  wlb_thread_t *t;
  wl_request_t *req;
  int held;

  if (wlb__args(env, info, 1, argv, &t) != 0 ||
      (req = wlb__req_arg(env, t, argv[0])) == NULL)
    return NULL;
  held = wl_release(req);
  wlb__changed(t);
  if (held < 0)
    return wlb__throw_code(env, held);
  wlb__free(t, req);
  WLB_CALL(env, napi_get_boolean(env, held, &result));
  return result;
}

/* abort(id) -> whether the request was still queued (and is now gone). */
napi_value wlb_abort(napi_env env, napi_callback_info info) {
  napi_value argv[1], result;
  wlb_thread_t *t;
  wl_request_t *req;
  int removed;

  if (wlb__args(env, info, 1, argv, &t) != 0 ||
      (req = wlb__req_arg(env, t, argv[0])) == NULL)
    return NULL;
  removed = wl_abort(req);
  if (removed < 0)
    return wlb__throw_code(env, removed);
  if (removed)
    wlb__free(t, req);
  WLB_CALL(env, napi_get_boolean(env, removed, &result));
  return result;
}

