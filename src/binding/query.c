/* query(): a manager's snapshot (wl_snapshot) as the spec's LockManagerSnapshot
 * dictionary. */
#include "query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The clientId strings a snapshot's entries last used: an agent's entries
 * come together (the same name's, or one agent's locks), so that most
 * entries reuse a string instead of making one. */
#define WLB_IDS 4
typedef struct {
  const char *chars[WLB_IDS];
  size_t len[WLB_IDS];
  napi_value value[WLB_IDS];
  unsigned next;
} wlb__ids_t;

static int wlb__client_id(napi_env env, wlb__ids_t *ids, const wl_info_t *info,
                          napi_value *value) {
  unsigned k;

  for (k = 0; k < WLB_IDS; k++) {
    if (ids->chars[k] != NULL && ids->len[k] == info->client_id_len &&
        memcmp(ids->chars[k], info->client_id, info->client_id_len) == 0) {
      *value = ids->value[k];
      return 0;
    }
  }
  if (napi_create_string_latin1(env, info->client_id, info->client_id_len,
                                value) != napi_ok) {
    wlb__throw_last(env);
    return 1;
  }
  k = ids->next++ % WLB_IDS;
  ids->chars[k] = info->client_id;
  ids->len[k] = info->client_id_len;
  ids->value[k] = *value;
  return 0;
}

/* What every entry of a snapshot shares, made once per snapshot: the keys
 * (a C string key is made and looked up in V8's string table again for
 * every entry, which cost a fifth of a query's time), the modes, the names
 * (names[i], made on first use: a long name held or awaited many times is
 * copied once), the last clientIds, and now. A query's entries have the
 * first 3 keys, details' 7, a peek's 8; each entry sets their values. */
typedef struct {
  napi_property_descriptor props[8];
  size_t nprops;
  int details;
  napi_value modes[2];
  napi_value *names;
  wlb__ids_t ids;
  uint64_t now;
} wlb__shared_t;

static int wlb__shared_init(napi_env env, wlb__shared_t *sh, int details) {
  static const char *const keys[] = {"name",   "mode",    "clientId",
                                     "serial", "parent",  "pid",
                                     "elapsed", "alive"};
  size_t i;

  sh->details = details;
  sh->nprops = details == WLB_PEEKED ? 8 : details ? 7 : 3;
  sh->now = details ? wl_clock() : 0;
  for (i = 0; i < sh->nprops; i++) {
    sh->props[i] = (napi_property_descriptor){NULL, NULL, NULL, NULL,
                                             NULL, NULL, WLB_DATA, NULL};
    if (napi_create_string_latin1(env, keys[i], NAPI_AUTO_LENGTH,
                                  &sh->props[i].name) != napi_ok)
      return 1;
  }
  return napi_create_string_latin1(env, "exclusive", NAPI_AUTO_LENGTH,
                                   &sh->modes[WL_EXCLUSIVE]) != napi_ok ||
         napi_create_string_latin1(env, "shared", NAPI_AUTO_LENGTH,
                                   &sh->modes[WL_SHARED]) != napi_ok;
}

static napi_value wlb__infos(napi_env env, const wl_info_t *infos, size_t n,
                             wlb__shared_t *sh) {
  napi_property_descriptor *props = sh->props;
  napi_value array, entry;
  size_t i;

  WLB_CALL(env, napi_create_array_with_length(env, n, &array));
  for (i = 0; i < n; i++) {
    const wl_info_t *info = &infos[i];
    napi_value *name = &sh->names[info->name_index];
    if (*name == NULL)
      WLB_CALL(env, napi_create_string_utf16(env, (const char16_t *)info->name,
                                             info->name_len, name));
    props[0].value = *name;
    props[1].value = sh->modes[info->mode];
    if (wlb__client_id(env, &sh->ids, info, &props[2].value) != 0)
      return NULL;
    if (sh->details) {
      /* Serials stay below 2^53; a time after now (the file was written
       * before this boot: wl.h) gives no duration. */
      WLB_CALL(env, napi_create_double(env, (double)info->serial,
                                       &props[3].value));
      WLB_CALL(env, napi_create_double(env, (double)info->parent,
                                       &props[4].value));
      WLB_CALL(env, napi_create_uint32(env, info->pid, &props[5].value));
      if (info->since == 0 || info->since > sh->now)
        WLB_CALL(env, napi_get_null(env, &props[6].value));
      else
        WLB_CALL(env,
                 napi_create_double(env, (double)(sh->now - info->since) / 1000,
                                    &props[6].value));
    }
    if (sh->details == WLB_PEEKED)
      WLB_CALL(env, napi_get_boolean(env, info->alive != 0, &props[7].value));
    WLB_CALL(env, napi_create_object(env, &entry));
    WLB_CALL(env, napi_define_properties(env, entry, sh->nprops, props));
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
  napi_value result = NULL, held, pending;
  wlb__shared_t sh = {0};

  sh.names = calloc(snap->nnames + 1, sizeof(*sh.names));
  if (sh.names == NULL) {
    wl_snapshot_free(snap);
    return wlb__throw_code(env, WL_ENOMEM);
  }
  if (wlb__shared_init(env, &sh, details) == 0 &&
      (held = wlb__infos(env, snap->held, snap->nheld, &sh)) != NULL &&
      (pending = wlb__infos(env, snap->pending, snap->npending, &sh)) !=
          NULL &&
      napi_create_object(env, &result) == napi_ok &&
      napi_define_properties(
          env, result, 2,
          (napi_property_descriptor[]){
              {"held", NULL, NULL, NULL, NULL, held, WLB_DATA, NULL},
              {"pending", NULL, NULL, NULL, NULL, pending, WLB_DATA, NULL},
          }) == napi_ok) {
    free(sh.names);
    wl_snapshot_free(snap);
    return result;
  }
  free(sh.names);
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
