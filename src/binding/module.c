/* The Node-API module: its init, which gives each thread (each Node
 * environment) its state and lib/ its functions, setup() and the thread's
 * teardown. The binding's files, each calling only those below it:
 *
 *   module.c          the module (this file)
 *   machine.c         the machine-wide manager's part, where it exists
 *                     (machine-none.c elsewhere), called through the
 *                     functions the module defines and at teardown, on
 *                     its OS's wake-ups (machine-unix.c, machine-win.c)
 *   query.c           query()'s conversion of a snapshot
 *   thread.c          each thread's state, its agents and their requests:
 *                     slots, the delivery of events, the stuck check
 *   napi.c            the Node-API helpers */

#include "machine.h"
#include "query.h"
#include "thread.h"

/* Drops what the thread holds in JS. Nothing can be done about a failure
 * here but go on tearing down. */
static void wlb__drop_js(wlb_thread_t *t) {
  napi_env env = t->env;

  if (t->dispatch != NULL && napi_delete_reference(env, t->dispatch) != napi_ok)
    t->dispatch = NULL;
  if (t->io_ref != NULL && napi_delete_reference(env, t->io_ref) != napi_ok)
    t->io_ref = NULL;
  if (t->tick_fn != NULL)
    napi_delete_reference(env, t->tick_fn);
  t->tick_fn = NULL;
  if (napi_delete_reference(env, t->exports) != napi_ok)
    t->exports = NULL;
  if (napi_async_destroy(env, t->actx) != napi_ok)
    t->actx = NULL;
}

/* The environment is going away (thread exit, worker.terminate(), process
 * exit). Close the agents first: once that returns, no other thread can
 * reach this thread's requests, hence none can signal the handle we then
 * close. */
static void wlb__teardown(napi_async_cleanup_hook_handle hook, void *arg) {
  wlb_thread_t *t = arg;

  wlb__scope_teardown(t);
  if (t->dispatch != NULL)
    wl_agent_close(&t->agent);
  wlb__drop_js(t);
  wlb__thread_close(t);
}

/* Makes t's io array. Returns 0, or 1 with an exception pending. */
static int wlb__make_io(napi_env env, wlb_thread_t *t) {
  napi_value buffer, array;
  void *data;

  if (napi_create_arraybuffer(env, WLB_IO * sizeof(uint32_t), &data,
                              &buffer) != napi_ok ||
      napi_create_typedarray(env, napi_uint32_array, WLB_IO, buffer, 0,
                             &array) != napi_ok ||
      napi_create_reference(env, array, 1, &t->io_ref) != napi_ok) {
    wlb__throw_last(env);
    return 1;
  }
  t->io = data;
  return 0;
}

/* setup(dispatch, clientId, stuckCheck) -> the thread's io array: called
 * once per thread by lib/. stuckCheck: whether a thread whose waiting
 * requests only it can grant may end (wlb__on_quiet): off under Bun, which
 * implements only part of libuv and aborts the process on the rest, and
 * where it is untried. */
static napi_value wlb_setup(napi_env env, napi_callback_info info) {
  napi_value argv[3], io;
  wlb_thread_t *t;
  napi_valuetype type;
  char client_id[WL_CLIENT_ID_MAX + 1];
  size_t len;
  bool stuck_check;
  int rc;

  if (wlb__args(env, info, 3, argv, &t) != 0)
    return NULL;
  WLB_CALL(env, napi_typeof(env, argv[0], &type));
  if (type != napi_function || t->dispatch != NULL) {
    napi_throw_type_error(env, NULL, "web-locks: bad setup");
    return NULL;
  }
  WLB_CALL(env, napi_get_value_string_latin1(env, argv[1], client_id,
                                             sizeof(client_id), &len));
  WLB_CALL(env, napi_get_value_bool(env, argv[2], &stuck_check));
  if (t->io_ref == NULL && wlb__make_io(env, t) != 0)
    return NULL;
  WLB_CALL(env, napi_get_reference_value(env, t->io_ref, &io));
  if (wl_process() == NULL)
    return wlb__throw_code(env, WL_ENOMEM);
  t->agent.data = t;
  rc = wl_agent_init(wl_process(), &t->agent, client_id, len, wlb__notify);
  if (rc != 0)
    return wlb__throw_code(env, rc);
  /* Teardown closes the agent once dispatch is set; until then, this does. */
  if (napi_create_reference(env, argv[0], 1, &t->dispatch) != napi_ok) {
    t->dispatch = NULL;
    wl_agent_close(&t->agent);
    wlb__throw_last(env);
    return NULL;
  }
  if (stuck_check)
    wlb__stuck_check_start(t);
  return io;
}

/* query() -> the snapshot of the whole process. */
static napi_value wlb_query(napi_env env, napi_callback_info info) {
  return wlb__query(env, wl_process(), WLB_SPEC);
}

/* details() -> the same with each entry's details (query.c). */
static napi_value wlb_details(napi_env env, napi_callback_info info) {
  return wlb__query(env, wl_process(), WLB_DETAILS);
}

/* hasRef() of the thread's async resource: whether a request waits, which
 * is when the thread's handle keeps its loop alive. Tools that list what
 * keeps a process running (jest's --detectOpenHandles) ask it. */
static napi_value wlb_has_ref(napi_env env, napi_callback_info info) {
  napi_value result;
  wlb_thread_t *t;

  WLB_CALL(env, napi_get_cb_info(env, info, NULL, NULL, NULL, (void **)&t));
  WLB_CALL(env, napi_get_boolean(env, t->waiting > 0 && t->waits != WLB_ON_SELF,
                                   &result));
  return result;
}

/* The interface between lib/ and this addon (what each passes the other:
 * the io array's slots, request()'s bits, the exports), which lib/binding.js
 * checks: a build left from another version of the package, loaded by
 * node-gyp-build before the right one, must not take requests apart in
 * another way. Raised whenever either side changes what the other relies
 * on. */
#define WLB_ABI 1

/* The thread's own functions and the ABI, before the scopes' (machine.h). */
#define WLB_THREAD_PROPS 9
static napi_value wlb__define(napi_env env, napi_value exports,
                              wlb_thread_t *t) {
  napi_value abi;
  napi_property_descriptor props[] = {
      {"abi", NULL, NULL, NULL, NULL, NULL, napi_default, NULL},
      {"setup", NULL, wlb_setup, NULL, NULL, NULL, napi_default, t},
      {"request", NULL, wlb_request, NULL, NULL, NULL, napi_default, t},
      {"release", NULL, wlb_release, NULL, NULL, NULL, napi_default, t},
      {"abort", NULL, wlb_abort, NULL, NULL, NULL, napi_default, t},
      {"query", NULL, wlb_query, NULL, NULL, NULL, napi_default, t},
      {"details", NULL, wlb_details, NULL, NULL, NULL, napi_default, t},
      {"setTick", NULL, wlb_set_tick, NULL, NULL, NULL, napi_default, t},
      {"tickIn", NULL, wlb_tick_in, NULL, NULL, NULL, napi_default, t},
      [WLB_THREAD_PROPS + WLB_SCOPE_PROPS - 1] = {0},
  };
  size_t n = WLB_THREAD_PROPS +
             wlb__scope_props(t, props + WLB_THREAD_PROPS);

  WLB_CALL(env, napi_create_uint32(env, WLB_ABI, &abi));
  props[0].value = abi;
  WLB_CALL(env, napi_define_properties(env, exports, n, props));
  return exports;
}

NAPI_MODULE_INIT() {
  wlb_thread_t *t = wlb__thread_self();
  napi_value resource, resource_name, existing, has_ref;
  uv_loop_t *loop;

  /* One agent per thread however often the addon is loaded: a test runner's
   * fresh module registry loads it again in the same thread, and each load
   * gets a new napi_env (so instance data cannot find the first). Every load
   * gets the first load's exports, whose functions run in the first env. */
  if (t != NULL) {
    WLB_CALL(env, napi_get_reference_value(t->env, t->exports, &existing));
    return existing;
  }
  WLB_CALL(env, napi_get_uv_event_loop(env, &loop));
  WLB_CALL(env, napi_create_object(env, &resource));
  WLB_CALL(env, napi_create_string_latin1(env, "WebLocks", NAPI_AUTO_LENGTH,
                                          &resource_name));
  t = calloc(1, sizeof(*t));
  if (t == NULL)
    return wlb__throw_code(env, WL_ENOMEM);
  t->env = env;
  t->loop = loop;
  if (napi_create_function(env, "hasRef", NAPI_AUTO_LENGTH, wlb_has_ref, t,
                           &has_ref) != napi_ok ||
      napi_set_named_property(env, resource, "hasRef", has_ref) != napi_ok ||
      napi_create_reference(env, exports, 1, &t->exports) != napi_ok) {
    free(t);
    wlb__throw_last(env);
    return NULL;
  }
  if (napi_async_init(env, resource, resource_name, &t->actx) != napi_ok ||
      wlb__thread_init(t) != 0) {
    if (t->actx != NULL && napi_async_destroy(env, t->actx) != napi_ok)
      t->actx = NULL;
    if (napi_delete_reference(env, t->exports) != napi_ok)
      t->exports = NULL;
    free(t);
    napi_throw_error(env, NULL, "web-locks: cannot create the thread's handle");
    return NULL;
  }
  if (napi_add_async_cleanup_hook(env, wlb__teardown, t, &t->hook) == napi_ok) {
    if (wlb__define(env, exports, t) != NULL)
      return exports;
    if (napi_remove_async_cleanup_hook(t->hook) != napi_ok)
      return NULL; /* the hook will still run and free t */
  } else {
    wlb__throw_last(env);
  }
  /* Unreachable in practice; the handle must still be closed properly. */
  t->hook = NULL;
  wlb__drop_js(t);
  wlb__thread_close(t);
  return NULL;
}
