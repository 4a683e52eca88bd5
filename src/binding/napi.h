/* The Node-API helpers that every file of the binding uses. They call
 * nothing else of the binding. */
#ifndef WLB_NAPI_H
#define WLB_NAPI_H

/* uv.h needs the POSIX types that strict C11 hides: defined here, in the
 * header that every file of the binding includes first. */
#define _POSIX_C_SOURCE 200809L

#include <stddef.h>

#include <node_api.h>

/* Checks a Node-API status in a function that returns a napi_value: on
 * failure, throws (unless an exception is already pending) and returns NULL. */
#define WLB_CALL(env, call)                                                    \
  do {                                                                         \
    if ((call) != napi_ok) {                                                   \
      wlb__throw_last(env);                                                    \
      return NULL;                                                             \
    }                                                                          \
  } while (0)

/* Dictionary members as the spec's conversion makes them: own data
 * properties, defined, so that no setter on Object.prototype intercepts. */
#define WLB_DATA (napi_writable | napi_enumerable | napi_configurable)

/* Each function's data (thread.h's). */
typedef struct wlb_thread_s wlb_thread_t;

void wlb__throw_last(napi_env env);
napi_value wlb__throw_code(napi_env env, int rc);

/* libuv's name and message of one of its error codes (-errno on Linux and
 * macOS), from its header's table: Bun aborts the process on uv_err_name
 * and uv_strerror. */
const char *wlb__uv_name(int rc);
const char *wlb__uv_message(int rc);

/* Gets the n arguments of an internal call and this thread's state (each
 * function's data). Returns 0, or 1 with an exception pending. Inline: every
 * request and release goes through it. */
static inline int wlb__args(napi_env env, napi_callback_info info, size_t n,
                            napi_value *argv, wlb_thread_t **t) {
  size_t argc = n;

  if (napi_get_cb_info(env, info, &argc, argv, NULL, (void **)t) != napi_ok) {
    wlb__throw_last(env);
    return 1;
  }
  if (argc < n) {
    napi_throw_type_error(env, NULL, "web-locks: bad internal call");
    return 1;
  }
  return 0;
}

#endif
