/* The binding's part for the machine-wide manager (wl_scope_open), which
 * exists on Linux, macOS and Windows: a thread's agents of machine-wide
 * managers, each woken by other processes as its OS lets it be
 * (machine-os.h: machine-unix.c, machine-win.c), and the files mapped once
 * per process. */
#include "machine-os.h"
#include "machine.h"
#include "query.h"

#include <stdio.h>
#include <string.h>

/* A machine-wide manager, mapped once per process however many threads open it.
 * It is found again by its file's identity, not its path: a file removed
 * and made anew at the same path is another manager. */
typedef struct wlb_file_s {
  struct wlb_file_s *next;
  wl_manager_t *m;
  unsigned refs; /* agents of this process */
  uint64_t dev;
  uint64_t ino;
} wlb_file_t;

/* Machine-wide managers open in this process, under the mutex (libuv's has no
 * static initialiser: made once; without it, no manager is opened). */
static uv_once_t wlb__files_once = UV_ONCE_INIT;
static uv_mutex_t wlb__files_mutex;
static int wlb__files_ok;
static wlb_file_t *wlb__files;

static void wlb__files_init(void) {
  wlb__files_ok = uv_mutex_init(&wlb__files_mutex) == 0;
}

/* Maps the manager at path, or finds it mapped. Returns 0 or an error code
 * with a sentence in err. */
static int wlb__file_ref(const char *path, uint64_t size, unsigned mode,
                            wlb_file_t **out, char *err, size_t errlen) {
  wlb_file_t *seg = NULL;
  uint64_t dev, ino;
  int rc = 0;

  uv_once(&wlb__files_once, wlb__files_init);
  if (!wlb__files_ok)
    return WL_ENOMEM;
  uv_mutex_lock(&wlb__files_mutex);
  if (wl_scope_path_identity(path, &dev, &ino) == 0) {
    for (seg = wlb__files; seg != NULL; seg = seg->next) {
      if (seg->dev == dev && seg->ino == ino)
        break;
    }
  }
  if (seg == NULL) {
    seg = malloc(sizeof(*seg));
    if (seg == NULL) {
      rc = WL_ENOMEM;
    } else if ((rc = wl_scope_open(path, size, mode, &seg->m, err,
                                     errlen)) != 0) {
      free(seg);
      seg = NULL;
    } else if ((rc = wl_scope_identity(seg->m, &seg->dev, &seg->ino)) != 0) {
      wl_scope_close(seg->m);
      free(seg);
      seg = NULL;
    } else {
      seg->refs = 0;
      seg->next = wlb__files;
      wlb__files = seg;
    }
  } else if ((rc = wl_scope_admit(seg->m, mode, err, errlen)) != 0)
    seg = NULL;
  if (seg != NULL)
    seg->refs++;
  uv_mutex_unlock(&wlb__files_mutex);
  *out = seg;
  return wlb__uv_code(rc);
}

/* Unmaps the manager once no agent of this process uses it. */
static void wlb__file_unref(wlb_file_t *seg) {
  wlb_file_t **at;

  uv_mutex_lock(&wlb__files_mutex);
  if (--seg->refs == 0) {
    for (at = &wlb__files; *at != seg; at = &(*at)->next)
      ;
    *at = seg->next;
    wl_scope_close(seg->m);
    free(seg);
  }
  uv_mutex_unlock(&wlb__files_mutex);
}

void wlb__on_wake_close(uv_handle_t *handle) {
  wlb_agent_t *a = wlb__container_of(handle, wlb_agent_t, wake.handle);
  wlb_thread_t *t = a->t;

  free(a);
  wlb__closed(t);
}

/* Ends a machine-wide manager's agent (spec 2.6) and frees its requests' slots.
 * Its wake-up stops being watched before wl_agent_close() closes it. */
static void wlb__close_scope(wlb_thread_t *t, uint32_t h) {
  wlb_agent_t *a = t->scopes[h];
  uint32_t id;

  wlb__unwatch(a);
  wl_agent_close(&a->agent);
  /* Unmapped now, not on the next tick: the file is free when close() is. */
  wlb__file_unref(a->seg);
  a->closed = 1;
  t->scopes[h] = NULL;
  for (id = 0; id < t->nchunks * WLB_CHUNK; id++) {
    wl_request_t *req = wlb__slot_get(t, id);
    if (req != NULL && req->agent == &a->agent)
      wlb__free(t, req);
  }
  uv_close(&a->wake.handle, wlb__on_wake_close);
}

/* The name of a core error code, or of an errno as libuv names it. */
static const char *wlb__code_name(int rc) {
  switch (rc) {
  case WL_EACCES:
    return "EACCES";
  case WL_ENOMEM:
    return "ENOMEM";
  case WL_EINVAL:
    return "EINVAL";
  case WL_ELAYOUT:
    return "ELAYOUT";
  case WL_ECORRUPT:
    return "ECORRUPT";
  case WL_EREPAIR:
    return "EREPAIR";
  default:
    return wlb__uv_name(rc);
  }
}

/* The n arguments of a call on a machine-wide manager, the first its handle:
 * the thread, the handle's index and its agent, or NULL with an exception
 * pending. */
static wlb_agent_t *wlb__scope_args(napi_env env, napi_callback_info info,
                                    size_t n, napi_value *argv,
                                    wlb_thread_t **t, uint32_t *h) {
  if (wlb__args(env, info, n, argv, t) != 0)
    return NULL;
  if (napi_get_value_uint32(env, argv[0], h) != napi_ok || *h >= (*t)->nscopes ||
      (*t)->scopes[*h] == NULL) {
    napi_throw_type_error(env, NULL, "web-locks: unknown lock manager");
    return NULL;
  }
  return (*t)->scopes[*h];
}

/* A free index in the thread's table of machine-wide managers' agents, or -1. */
static int64_t wlb__scope_slot(wlb_thread_t *t) {
  wlb_agent_t **scopes;
  uint32_t h;

  for (h = 0; h < t->nscopes; h++) {
    if (t->scopes[h] == NULL)
      return h;
  }
  scopes = realloc(t->scopes, (t->nscopes + 1) * sizeof(*scopes));
  if (scopes == NULL)
    return -1;
  t->scopes = scopes;
  t->scopes[t->nscopes] = NULL;
  return t->nscopes++;
}

/* Makes this thread an agent of the manager at path: maps it (or finds it
 * mapped), registers the agent and watches its wake-up. Returns 0 or an error
 * code with a sentence in err. */
static int wlb__join(wlb_thread_t *t, wlb_agent_t *a, const char *path,
                     uint64_t size, unsigned mode, const char *client_id,
                     size_t client_id_len, int polls, char *err,
                     size_t errlen) {
  int rc = wlb__file_ref(path, size, mode, &a->seg, err, errlen);

  if (rc != 0)
    return rc;
  a->t = t;
  a->agent.data = t;
  rc = wlb__uv_code(wl_agent_init(a->seg->m, &a->agent, client_id,
                                  client_id_len, wlb__notify));
  if (rc != 0) {
    wlb__file_unref(a->seg);
    snprintf(err, errlen, "cannot join the manager in %s: %s", path,
             rc == WL_ENOMEM     ? "it is full"
             : rc == WL_ECORRUPT ? "its state is corrupt"
                                 : wlb__uv_message(rc));
    return rc;
  }
  if ((rc = wlb__watch(t, a, polls)) != 0) {
    wl_agent_close(&a->agent);
    wlb__file_unref(a->seg);
    snprintf(err, errlen, "cannot poll the manager in %s: %s", path,
             wlb__uv_message(rc));
  }
  return rc;
}

/* open(path, size, mode, clientId, loopPolls) -> a handle for the calls
 * below. loopPolls: whether the thread's loop can poll a descriptor (not
 * under Bun). Throws an Error whose code names what went wrong and whose
 * message names the file. */
static napi_value wlb_open(napi_env env, napi_callback_info info) {
  napi_value argv[5], result;
  wlb_thread_t *t;
  wlb_agent_t *a;
  char path[4096], client_id[WL_CLIENT_ID_MAX + 1], err[1024 + 4096];
  size_t path_len, client_id_len;
  int64_t size, h;
  uint32_t mode;
  bool polls;
  int rc;

  if (wlb__args(env, info, 5, argv, &t) != 0)
    return NULL;
  WLB_CALL(env, napi_get_value_string_utf8(env, argv[0], path, sizeof(path),
                                           &path_len));
  WLB_CALL(env, napi_get_value_int64(env, argv[1], &size));
  WLB_CALL(env, napi_get_value_uint32(env, argv[2], &mode));
  WLB_CALL(env, napi_get_value_string_latin1(env, argv[3], client_id,
                                             sizeof(client_id),
                                             &client_id_len));
  WLB_CALL(env, napi_get_value_bool(env, argv[4], &polls));
  if (t->dispatch == NULL || path_len >= sizeof(path) - 1 || size < 0) {
    napi_throw_type_error(env, NULL, "web-locks: bad internal call");
    return NULL;
  }
  /* C would read the path up to a NUL in it: another file than the one
   * named (lib/ refuses it first). */
  if (strlen(path) != path_len) {
    napi_throw_type_error(env, NULL,
                          "web-locks: the path must not contain null bytes");
    return NULL;
  }
  if ((h = wlb__scope_slot(t)) < 0 || (a = calloc(1, sizeof(*a))) == NULL)
    return wlb__throw_code(env, WL_ENOMEM);
  err[0] = '\0';
  rc = wlb__join(t, a, path, (uint64_t)size, mode, client_id, client_id_len,
                 polls, err, sizeof(err));
  if (rc != 0) {
    if (!a->closed)
      free(a);
    if (err[0] == '\0')
      snprintf(err, sizeof(err), "cannot open %s: %s", path,
               wlb__uv_message(rc));
    napi_throw_error(env, wlb__code_name(rc), err);
    return NULL;
  }
  t->scopes[h] = a;
  WLB_CALL(env, napi_create_uint32(env, (uint32_t)h, &result));
  return result;
}

/* admit(handle, mode): whether this thread's agent may serve an open with
 * `mode` too (wl_scope_admit). Throws as open() does. */
static napi_value wlb_admit(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  wlb_thread_t *t;
  wlb_agent_t *a;
  uint32_t h, mode;
  char err[1024 + 4096];
  int rc;

  if ((a = wlb__scope_args(env, info, 2, argv, &t, &h)) == NULL)
    return NULL;
  WLB_CALL(env, napi_get_value_uint32(env, argv[1], &mode));
  err[0] = '\0';
  rc = wl_scope_admit(a->seg->m, mode, err, sizeof(err));
  if (rc != 0)
    napi_throw_error(env, wlb__code_name(wlb__uv_code(rc)), err);
  return NULL;
}

/* scopeRequest(handle, name, how): request() of a machine-wide manager. */
static napi_value wlb_scope_request(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  wlb_thread_t *t;
  wlb_agent_t *a;
  uint32_t h;

  if ((a = wlb__scope_args(env, info, 3, argv, &t, &h)) == NULL)
    return NULL;
  return wlb__request(env, t, &a->agent, argv + 1);
}

/* close(handle): this thread leaves the manager (spec 2.6). */
static napi_value wlb_close(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  wlb_thread_t *t;
  uint32_t h;

  if (wlb__scope_args(env, info, 1, argv, &t, &h) != NULL)
    wlb__close_scope(t, h);
  return NULL;
}

/* The snapshot of the manager of the handle in the arguments (query.c's
 * what: WLB_SPEC or WLB_DETAILS). */
static napi_value wlb__scope_snapshot(napi_env env, napi_callback_info info,
                                      int what) {
  napi_value argv[1];
  wlb_thread_t *t;
  wlb_agent_t *a;
  uint32_t h;

  if ((a = wlb__scope_args(env, info, 1, argv, &t, &h)) == NULL)
    return NULL;
  return wlb__query(env, a->seg->m, what);
}

/* scopeQuery(handle) -> the snapshot of a machine-wide manager. */
static napi_value wlb_scope_query(napi_env env, napi_callback_info info) {
  return wlb__scope_snapshot(env, info, WLB_SPEC);
}

/* scopeDetails(handle) -> the same with each entry's details (query.c). */
static napi_value wlb_scope_details(napi_env env, napi_callback_info info) {
  return wlb__scope_snapshot(env, info, WLB_DETAILS);
}

/* peek(path, mode, waitMs) -> { held, pending } of the manager in the file
 * at path, each entry with its details and whether its process is alive
 * (wl_scope_peek: a look that changes nothing, and joins nothing), taken
 * on this thread, which it blocks for waitMs at most. Throws as open()
 * does; EREPAIR when the file's mutex waits for a repair, ETIMEDOUT when
 * it stayed held. */
static napi_value wlb_peek(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  wlb_thread_t *t;
  wl_snapshot_t snap;
  char path[4096], err[1024 + 4096];
  size_t path_len;
  uint32_t mode, wait_ms;
  int rc;

  if (wlb__args(env, info, 3, argv, &t) != 0)
    return NULL;
  WLB_CALL(env, napi_get_value_string_utf8(env, argv[0], path, sizeof(path),
                                           &path_len));
  WLB_CALL(env, napi_get_value_uint32(env, argv[1], &mode));
  WLB_CALL(env, napi_get_value_uint32(env, argv[2], &wait_ms));
  if (path_len >= sizeof(path) - 1 || strlen(path) != path_len) {
    napi_throw_type_error(env, NULL, "web-locks: bad internal call");
    return NULL;
  }
  err[0] = '\0';
  rc = wlb__uv_code(wl_scope_peek(path, mode, wait_ms, &snap, err,
                                   sizeof(err)));
  if (rc != 0) {
    if (err[0] == '\0')
      snprintf(err, sizeof(err), "cannot look at %s: %s", path,
               wlb__uv_message(rc));
    napi_throw_error(env, wlb__code_name(rc), err);
    return NULL;
  }
  return wlb__snapshot_value(env, &snap, WLB_PEEKED);
}

/* machineFamily() -> which OS family's mechanism the build has:
 * "linux", "posix" or "win" (src/os/machine.h), for tests of one family's
 * own. */
static napi_value wlb_machine_family(napi_env env, napi_callback_info info) {
  napi_value result;

  WLB_CALL(env, napi_create_string_utf8(env, WLB_FAMILY, NAPI_AUTO_LENGTH,
                                        &result));
  return result;
}

size_t wlb__scope_props(wlb_thread_t *t, napi_property_descriptor *props) {
  napi_property_descriptor scope[WLB_SCOPE_PROPS] = {
      {"open", NULL, wlb_open, NULL, NULL, NULL, napi_default, t},
      {"admit", NULL, wlb_admit, NULL, NULL, NULL, napi_default, t},
      {"scopeRequest", NULL, wlb_scope_request, NULL, NULL, NULL, napi_default, t},
      {"scopeQuery", NULL, wlb_scope_query, NULL, NULL, NULL, napi_default, t},
      {"scopeDetails", NULL, wlb_scope_details, NULL, NULL, NULL, napi_default,
       t},
      {"close", NULL, wlb_close, NULL, NULL, NULL, napi_default, t},
      {"machineFamily", NULL, wlb_machine_family, NULL, NULL, NULL, napi_default, t},
      {"peek", NULL, wlb_peek, NULL, NULL, NULL, napi_default, t},
  };

  memcpy(props, scope, sizeof(scope));
  return WLB_SCOPE_PROPS;
}
void wlb__scope_teardown(wlb_thread_t *t) {
  uint32_t i;

  for (i = 0; i < t->nscopes; i++) {
    if (t->scopes[i] != NULL)
      wlb__close_scope(t, i);
  }
}
