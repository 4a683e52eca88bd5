/* query(): a manager's snapshot (wl_snapshot) as the spec's LockManagerSnapshot
 * dictionary. */
#include "query.h"

#include <stdio.h>
#include <stdlib.h>

/* Entries of one name share one JS string (names[i], made on first use):
 * a long name held or awaited many times is copied once. */
static napi_value wlb__infos(napi_env env, const wl_info_t *infos, size_t n,
                             napi_value modes[2], napi_value *names,
                             int details) {
  /* Filled once; each entry sets the values it has (a query's entries have
   * the first 3, details' 7, a peek's 8). */
  napi_property_descriptor props[] = {
      {"name", NULL, NULL, NULL, NULL, NULL, WLB_DATA, NULL},
      {"mode", NULL, NULL, NULL, NULL, NULL, WLB_DATA, NULL},
      {"clientId", NULL, NULL, NULL, NULL, NULL, WLB_DATA, NULL},
      {"serial", NULL, NULL, NULL, NULL, NULL, WLB_DATA, NULL},
      {"parent", NULL, NULL, NULL, NULL, NULL, WLB_DATA, NULL},
      {"pid", NULL, NULL, NULL, NULL, NULL, WLB_DATA, NULL},
      {"elapsed", NULL, NULL, NULL, NULL, NULL, WLB_DATA, NULL},
      {"alive", NULL, NULL, NULL, NULL, NULL, WLB_DATA, NULL},
  };
  size_t nprops = details == WLB_PEEKED ? 8 : details ? 7 : 3;
  napi_value array, entry;
  uint64_t now = details ? wl_clock() : 0;
  size_t i;

  WLB_CALL(env, napi_create_array_with_length(env, n, &array));
  for (i = 0; i < n; i++) {
    const wl_info_t *info = &infos[i];
    napi_value *name = &names[info->name_index];
    if (*name == NULL)
      WLB_CALL(env, napi_create_string_utf16(env, (const char16_t *)info->name,
                                             info->name_len, name));
    props[0].value = *name;
    props[1].value = modes[info->mode];
    WLB_CALL(env, napi_create_string_latin1(env, info->client_id,
                                            info->client_id_len,
                                            &props[2].value));
    if (details) {
      /* Serials stay below 2^53; a time after now (the file was written
       * before this boot: wl.h) gives no duration. */
      WLB_CALL(env, napi_create_double(env, (double)info->serial,
                                       &props[3].value));
      WLB_CALL(env, napi_create_double(env, (double)info->parent,
                                       &props[4].value));
      WLB_CALL(env, napi_create_uint32(env, info->pid, &props[5].value));
      if (info->since == 0 || info->since > now)
        WLB_CALL(env, napi_get_null(env, &props[6].value));
      else
        WLB_CALL(env,
                 napi_create_double(env, (double)(now - info->since) / 1000,
                                    &props[6].value));
    }
    if (details == WLB_PEEKED)
      WLB_CALL(env, napi_get_boolean(env, info->alive != 0, &props[7].value));
    WLB_CALL(env, napi_create_object(env, &entry));
    WLB_CALL(env, napi_define_properties(env, entry, nprops, props));
    /* Defined, not set: an index setter that other code put on
     * Array.prototype would get the entry (napi_set_element is [[Set]]). */
    {
      char index[24];
      napi_property_descriptor element = {index, NULL, NULL, NULL,
                                          NULL,  entry, WLB_DATA, NULL};
      snprintf(index, sizeof(index), "%lu", (unsigned long)i);
      WLB_CALL(env, napi_define_properties(env, array, 1, &element));
    }
  }
  return array;
}

/* { held, pending } of a snapshot, which it frees (see query.h). */
napi_value wlb__snapshot_value(napi_env env, wl_snapshot_t *snap,
                               int details) {
  napi_value result = NULL, held, pending, modes[2], *names;

  names = calloc(snap->nnames + 1, sizeof(*names));
  if (names == NULL) {
    wl_snapshot_free(snap);
    return wlb__throw_code(env, WL_ENOMEM);
  }
  if (napi_create_string_latin1(env, "exclusive", NAPI_AUTO_LENGTH,
                                &modes[WL_EXCLUSIVE]) == napi_ok &&
      napi_create_string_latin1(env, "shared", NAPI_AUTO_LENGTH,
                                &modes[WL_SHARED]) == napi_ok &&
      (held = wlb__infos(env, snap->held, snap->nheld, modes, names,
                          details)) != NULL &&
      (pending = wlb__infos(env, snap->pending, snap->npending, modes, names,
                             details)) != NULL &&
      napi_create_object(env, &result) == napi_ok &&
      napi_define_properties(
          env, result, 2,
          (napi_property_descriptor[]){
              {"held", NULL, NULL, NULL, NULL, held, WLB_DATA, NULL},
              {"pending", NULL, NULL, NULL, NULL, pending, WLB_DATA, NULL},
          }) == napi_ok) {
    free(names);
    wl_snapshot_free(snap);
    return result;
  }
  free(names);
  wl_snapshot_free(snap);
  wlb__throw_last(env);
  return NULL;
}

napi_value wlb__query(napi_env env, wl_manager_t *m, int details) {
  wl_snapshot_t snap;
  int rc;

  if ((rc = wl_snapshot(m, &snap)) != 0)
    return wlb__throw_code(env, rc);
  return wlb__snapshot_value(env, &snap, details);
}
