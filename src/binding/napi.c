/* The Node-API helpers (napi.h). */
#include "napi.h"

#include <uv.h>

#include "../core/wl.h"

/* Throws the last Node-API call's error, unless an exception is pending. */
void wlb__throw_last(napi_env env) {
  const napi_extended_error_info *info = NULL;
  bool pending = false;

  if (napi_is_exception_pending(env, &pending) != napi_ok || pending)
    return;
  if (napi_get_last_error_info(env, &info) == napi_ok && info != NULL &&
      info->error_message != NULL)
    napi_throw_error(env, NULL, info->error_message);
  else
    napi_throw_error(env, NULL, "web-locks: Node-API call failed");
}

/* Throws the error of a core error code. Returns NULL, for a napi_value. */
napi_value wlb__throw_code(napi_env env, int rc) {
  if (rc == WL_EINVAL)
    napi_throw_type_error(env, "EINVAL", "web-locks: invalid request");
  else if (rc == WL_ENOMEM)
    napi_throw_range_error(env, "ENOMEM", "web-locks: out of memory");
  else
    napi_throw_error(env, "ECORRUPT", "web-locks: the lock manager's state is corrupt beyond repair");
  return NULL;
}

const char *wlb__uv_name(int rc) {
  switch (rc) {
#define WLB_XX(code, message)                                                  \
  case UV_##code:                                                              \
    return #code;
    UV_ERRNO_MAP(WLB_XX)
#undef WLB_XX
  default:
    return "UNKNOWN";
  }
}

const char *wlb__uv_message(int rc) {
  switch (rc) {
#define WLB_XX(code, message)                                                  \
  case UV_##code:                                                              \
    return message;
    UV_ERRNO_MAP(WLB_XX)
#undef WLB_XX
  default:
    return "unknown error";
  }
}
