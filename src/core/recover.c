/* Recovery of a machine-wide manager whose mutex holder died inside an algorithm
 * (its mutex says WL__EOWNERDEAD: os/machine.h). As SQLite and LMDB do, it trusts only
 * what it can re-derive: it walks every block of the region, keeps the
 * request and agent records whose fields are consistent, and rebuilds from
 * them everything else (free lists, the table of names, every queue, held
 * list, mailbox and counter), in the order their keys say; the grant
 * counter it keeps, and only raises. Then it processes every queue, since
 * the dead holder may have left grants undone (they get new tokens), and
 * sets every owner's watch and rings every bell. Every offset it reads is
 * checked against the blocks it found.
 *
 * It needs no room in the region, nor a page the file system has not
 * reserved: every record is rebuilt where it is, the table of names in the
 * block it had (wl__reuse_table), and only what wl__cover reserves again
 * (pages other processes reserved) is touched; so a full region or a full
 * file system is repaired like any other, and stays full. Nor does it ask
 * for process memory: its work arrays are in memory reserved when the
 * manager was opened (wl__work_size), address space until a repair touches
 * it, given back after. Where the system overcommits, a repair short of
 * memory is a process killed in the repair (the OOM killer), whose crash
 * the next process repairs from the same records. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define NAME(m, off) WL__REC(m, off, wl__name_t)
#define REQ(m, off) WL__REC(m, off, wl__req_t)
#define AGENT(m, off) WL__REC(m, off, wl__agent_t)
#define AT(off, type, member) ((off) + offsetof(type, member))

typedef struct {
  wl_off_t *recs; /* every block's record offset, in address order */
  uint32_t *kinds;
  size_t n;
  size_t cap; /* the most blocks the region can hold */
} wl__blocks_t;

typedef struct {
  int64_t key;
  wl_off_t off;
} wl__keyed_t;

/* The work memory holds, for each block the region can hold (32 bytes or
 * more each), its record's offset and kind, a place in the lists of kept
 * requests and used names and in the sort's keys, and a flag. */
#define WL__WORK_PER_BLOCK                                                     \
  (3 * sizeof(wl_off_t) + sizeof(wl__keyed_t) + sizeof(uint32_t) + 1)

static uint64_t wl__work_blocks(uint64_t capacity) {
  return (capacity >> WL__MIN_SHIFT) + 1;
}

uint64_t wl__work_size(uint64_t capacity) {
  return wl__work_blocks(capacity) * WL__WORK_PER_BLOCK;
}

/* The index of the block whose record is at off, or -1 if none is. */
static ptrdiff_t wl__index_of(const wl__blocks_t *bl, wl_off_t off) {
  size_t lo = 0, hi = bl->n;

  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (bl->recs[mid] < off)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < bl->n && bl->recs[lo] == off ? (ptrdiff_t)lo : -1;
}

static uint32_t wl__kind_at(const wl__blocks_t *bl, wl_off_t off) {
  ptrdiff_t i = wl__index_of(bl, off);
  return i < 0 ? WL__FREE : bl->kinds[i];
}

static int wl__scan(wl_manager_t *m, wl__blocks_t *bl) {
  wl__hdr_t *h = WL__HDR(m);
  wl_off_t at = (sizeof(*h) + 15) & ~(uint64_t)15;
  uint64_t used = h->used;

  WL__HIDE(used);
  bl->n = 0;
  if (used > m->limit)
    return WL_ECORRUPT;
  while (at < used) {
    wl__block_t *b = WL__REC(m, at, wl__block_t);
    uint16_t cls = b->cls, kind = b->kind;
    uint64_t size;
    WL__HIDE(cls);
    WL__HIDE(kind);
    if (used - at < sizeof(*b) || cls >= WL__NCLASSES || wl__is_corrupt(m))
      return WL_ECORRUPT;
    size = (uint64_t)1 << (cls + WL__MIN_SHIFT);
    if (size > used - at || kind > WL__VACANT || bl->n == bl->cap)
      return WL_ECORRUPT;
    bl->recs[bl->n] = at + sizeof(*b);
    bl->kinds[bl->n] = kind;
    bl->n++;
    at += size;
  }
  return 0;
}

static int wl__by_key(const void *pa, const void *pb) {
  int64_t a = ((const wl__keyed_t *)pa)->key, b = ((const wl__keyed_t *)pb)->key;
  return a < b ? -1 : a > b;
}

/* Sorts the requests by one of their keys (a field's offset in wl__req_t),
 * or by request order (|qkey|). */
#define WL__REQUEST_ORDER ((size_t)-1)

static void wl__sort(wl_manager_t *m, wl__keyed_t *tmp, wl_off_t *reqs,
                     size_t n, size_t key) {
  size_t i;

  for (i = 0; i < n; i++) {
    int64_t q = REQ(m, reqs[i])->qkey;
    tmp[i].off = reqs[i];
    tmp[i].key = key == WL__REQUEST_ORDER ? (int64_t)wl__order_of(q)
                 : key == offsetof(wl__req_t, qkey)
                     ? q
                     : (int64_t) * (uint64_t *)((char *)REQ(m, reqs[i]) + key);
  }
  qsort(tmp, n, sizeof(*tmp), wl__by_key);
  for (i = 0; i < n; i++)
    reqs[i] = tmp[i].off;
}

/* A request record that may stay: a known state, a live agent, and when
 * queued or held, a name. Its state and name, as read and checked, are
 * given back in *state and *name. */
static int wl__keep(wl_manager_t *m, const wl__blocks_t *bl, wl_off_t r,
                    uint16_t *state, wl_off_t *name) {
  const wl__req_t *req = REQ(m, r);
  uint16_t mode = req->mode;

  *state = req->state;
  *name = req->name;
  WL__HIDE(*state);
  if (mode > WL_SHARED || *state > WL__STOLEN ||
      wl__kind_at(bl, req->agent) != WL__AGENT)
    return 0;
  if (*state == WL__QUEUED || *state == WL__HELD)
    return wl__kind_at(bl, *name) == WL__NAME;
  /* Stolen and not yet released, or unavailable and not yet delivered. */
  return *state == WL__STOLEN || req->events != 0;
}

static void wl__reset_free_lists(wl_manager_t *m, const wl__blocks_t *bl) {
  wl__hdr_t *h = WL__HDR(m);
  size_t i;

  memset(h->free, 0, sizeof(h->free));
  for (i = bl->n; i-- > 0;) {
    if (bl->kinds[i] == WL__FREE) {
      uint16_t cls = wl__block(m, bl->recs[i])->cls;
      WL__HIDE(cls);
      if (cls >= WL__NCLASSES) {
        wl__corrupt(m);
        return;
      }
      *WL__REC(m, bl->recs[i], wl_off_t) = h->free[cls];
      h->free[cls] = bl->recs[i];
    }
  }
}

/* Whether a name's length fits in its block, before its units are read. */
static int wl__name_fits(wl_manager_t *m, wl_off_t n) {
  uint16_t cls = wl__block(m, n)->cls;
  uint64_t room;

  WL__HIDE(cls);
  if (cls >= WL__NCLASSES)
    return 0;
  room = ((uint64_t)1 << (cls + WL__MIN_SHIFT)) - sizeof(wl__block_t) -
         sizeof(wl__name_t);
  return NAME(m, n)->len <= room / sizeof(uint16_t);
}

static void wl__reset_name(wl_manager_t *m, wl_off_t n) {
  wl__name_t *name = NAME(m, n);

  name->hnext = 0;
  name->order.prev = name->order.next = 0;
  name->ilink.prev = name->ilink.next = 0;
  wl__list_init(m, AT(n, wl__name_t, queue));
  wl__list_init(m, AT(n, wl__name_t, held));
  name->nheld = 0;
  name->nexclusive = 0;
}

static void wl__reset_agent(wl_manager_t *m, const wl__blocks_t *bl,
                            wl_off_t a) {
  wl_off_t owner = AGENT(m, a)->owner;

  AGENT(m, a)->olink.next = 0;
  if (wl__kind_at(bl, owner) == WL__OWNER)
    wl__list_append(m, AT(owner, wl__owner_t, agents),
                    AT(a, wl__agent_t, olink));
  wl__list_init(m, AT(a, wl__agent_t, queued));
  wl__list_init(m, AT(a, wl__agent_t, held));
  wl__list_init(m, AT(a, wl__agent_t, stolen));
  wl__list_init(m, AT(a, wl__agent_t, mail));
  AGENT(m, a)->closing = 0;
}

/* Relinks the kept requests into their names' and agents' lists, each list
 * in the order of its key. */
static void wl__relink(wl_manager_t *m, wl__keyed_t *tmp, wl_off_t *reqs,
                       size_t n) {
  size_t i;

  wl__sort(m, tmp, reqs, n, offsetof(wl__req_t, qkey));
  for (i = 0; i < n; i++) {
    wl__req_t *req = REQ(m, reqs[i]);
    req->qlink.next = req->alink.next = req->mlink.next = 0;
    if (req->state == WL__QUEUED)
      wl__list_append(m, AT(req->name, wl__name_t, queue),
                      AT(reqs[i], wl__req_t, qlink));
  }
  wl__sort(m, tmp, reqs, n, offsetof(wl__req_t, token));
  for (i = 0; i < n; i++) {
    wl__req_t *req = REQ(m, reqs[i]);
    wl__name_t *name;
    if (req->state != WL__HELD)
      continue;
    name = NAME(m, req->name);
    wl__list_append(m, AT(req->name, wl__name_t, held),
                    AT(reqs[i], wl__req_t, qlink));
    wl__list_append(m, AT(req->agent, wl__agent_t, held),
                    AT(reqs[i], wl__req_t, alink));
    name->nheld++;
    if (req->mode == WL_EXCLUSIVE)
      name->nexclusive++;
  }
  wl__sort(m, tmp, reqs, n, WL__REQUEST_ORDER);
  for (i = 0; i < n; i++) {
    wl__req_t *req = REQ(m, reqs[i]);
    if (req->state == WL__QUEUED)
      wl__list_append(m, AT(req->agent, wl__agent_t, queued),
                      AT(reqs[i], wl__req_t, alink));
    else if (req->state == WL__STOLEN)
      wl__list_append(m, AT(req->agent, wl__agent_t, stolen),
                      AT(reqs[i], wl__req_t, alink));
  }
  wl__sort(m, tmp, reqs, n, offsetof(wl__req_t, mkey));
  for (i = 0; i < n; i++) {
    wl__req_t *req = REQ(m, reqs[i]);
    if (req->events != 0)
      wl__list_append(m, AT(req->agent, wl__agent_t, mail),
                      AT(reqs[i], wl__req_t, mlink));
  }
}

/* Makes the table of names an empty one in the table block that the region
 * had (0: none), as many buckets as it holds: in place, so that a repair
 * needs no room that a full region or file system could not give. Every
 * state a crash of this code leaves has a table block once any name has
 * been linked (a bigger one is made before the old one is freed); with
 * none, names_link makes one, which may fail for want of room (a corrupt
 * file, or another version's recovery cut short). */
static int wl__reuse_table(wl_manager_t *m, wl_off_t table) {
  wl__hdr_t *h = WL__HDR(m);
  uint64_t room, nbuckets;
  uint16_t cls;
  wl_off_t *buckets;

  h->buckets = 0;
  h->nbuckets = 0;
  if (table == 0)
    return 0;
  cls = wl__block(m, table)->cls;
  WL__HIDE(cls);
  if (cls >= WL__NCLASSES)
    return WL_ECORRUPT;
  room = ((uint64_t)1 << (cls + WL__MIN_SHIFT)) - sizeof(wl__block_t);
  nbuckets = (uint64_t)1 << (63 - __builtin_clzll(room / sizeof(wl_off_t)));
  buckets = wl__span(m, table, nbuckets * sizeof(wl_off_t));
  if (buckets == NULL)
    return WL_ECORRUPT;
  memset(buckets, 0, nbuckets * sizeof(wl_off_t));
  h->buckets = table;
  h->nbuckets = nbuckets;
  return 0;
}

/* The grant counter is the one thing recovery keeps without re-deriving it
 * (the records of released grants are gone). A crash cannot leave it below
 * a kept record's token (it is stored before the token is), a corrupt
 * header can: it is raised past every one, so that no token is given
 * twice, and never lowered. */
static void wl__keep_grants(wl_manager_t *m, const wl_off_t *reqs, size_t n) {
  wl__hdr_t *h = WL__HDR(m);
  size_t i;

  for (i = 0; i < n; i++) {
    if (REQ(m, reqs[i])->token > h->grants)
      h->grants = REQ(m, reqs[i])->token;
  }
}

int wl__recover(wl_manager_t *m) {
  wl__hdr_t *h = WL__HDR(m);
  size_t cap = (size_t)wl__work_blocks(m->capacity);
  wl__blocks_t bl = {.recs = m->work, .cap = cap};
  wl_off_t *reqs = bl.recs + cap, *names = reqs + cap;
  wl__keyed_t *tmp = (wl__keyed_t *)(names + cap);
  unsigned char *used;
  size_t nreqs = 0, nnames = 0, i;
  ptrdiff_t table = -1;
  int rc;

  bl.kinds = (uint32_t *)(tmp + cap);
  used = (unsigned char *)(bl.kinds + cap);
  if ((rc = wl__scan(m, &bl)) != 0)
    goto done;
  memset(used, 0, bl.n);
  /* What stays: owners, agents, consistent requests, and the names they
   * use. */
  wl__list_init(m, wl__off_of(m, &h->owners));
  wl__list_init(m, wl__off_of(m, &h->vacant));
  for (i = 0; i < bl.n; i++) {
    if (bl.kinds[i] == WL__OWNER) {
      wl__list_init(m, AT(bl.recs[i], wl__owner_t, agents));
      wl__list_append(m, wl__off_of(m, &h->owners),
                      AT(bl.recs[i], wl__owner_t, link));
    } else if (bl.kinds[i] == WL__VACANT) {
      wl__list_append(m, wl__off_of(m, &h->vacant),
                      AT(bl.recs[i], wl__owner_t, link));
    }
  }
  for (i = 0; i < bl.n; i++) {
    if (bl.kinds[i] == WL__AGENT)
      wl__reset_agent(m, &bl, bl.recs[i]);
    else if (bl.kinds[i] == WL__NAME && wl__name_fits(m, bl.recs[i]))
      wl__reset_name(m, bl.recs[i]);
    else if (bl.kinds[i] == WL__NAME)
      bl.kinds[i] = WL__FREE;
  }
  for (i = 0; i < bl.n; i++) {
    wl__req_t *req = REQ(m, bl.recs[i]);
    uint16_t state;
    wl_off_t name;
    ptrdiff_t at;
    if (bl.kinds[i] != WL__REQUEST)
      continue;
    if (!wl__keep(m, &bl, bl.recs[i], &state, &name)) {
      bl.kinds[i] = WL__FREE;
      continue;
    }
    /* A holder robbed by a steal cut short after its event. */
    if (state == WL__HELD && (req->events & WL_EV_STOLEN))
      req->state = state = WL__STOLEN;
    reqs[nreqs++] = bl.recs[i];
    at = wl__index_of(&bl, name);
    if ((state == WL__QUEUED || state == WL__HELD) && at >= 0)
      used[at] = 1;
  }
  /* Unused names go, and every table block but the largest, which the
   * used names are linked into again. */
  for (i = 0; i < bl.n; i++) {
    if (bl.kinds[i] == WL__NAME && used[i]) {
      names[nnames++] = bl.recs[i];
    } else if (bl.kinds[i] == WL__NAME) {
      bl.kinds[i] = WL__FREE;
    } else if (bl.kinds[i] == WL__ARRAY) {
      if (table >= 0 && wl__block(m, bl.recs[table])->cls >=
                            wl__block(m, bl.recs[i])->cls) {
        bl.kinds[i] = WL__FREE;
        continue;
      }
      if (table >= 0)
        bl.kinds[table] = WL__FREE;
      table = (ptrdiff_t)i;
    }
  }
  for (i = 0; i < bl.n; i++) {
    wl__block_t *b = wl__block(m, bl.recs[i]);
    if (bl.kinds[i] == WL__FREE && b->kind != WL__FREE) {
      b->kind = WL__FREE;
      b->gen++;
    }
  }
  wl__reset_free_lists(m, &bl);
  if (wl__is_corrupt(m)) {
    rc = WL_ECORRUPT;
    goto done;
  }
  if (wl__reuse_table(m, table >= 0 ? bl.recs[table] : 0) != 0) {
    rc = WL_ECORRUPT;
    goto done;
  }
  h->count = 0;
  h->nidle = 0;
  wl__list_init(m, wl__off_of(m, &h->order));
  wl__list_init(m, wl__off_of(m, &h->idle));
  for (i = 0; i < nnames; i++) {
    wl__name_t *name = NAME(m, names[i]);
    size_t len;
    const uint16_t *units = wl__units(m, names[i], &len);
    if (units == NULL) {
      rc = WL_ECORRUPT;
      goto done;
    }
    name->hash = wl__hash(m, units, len);
    if (wl__machine_ops.names_link(m, names[i]) != 0) {
      rc = WL_ECORRUPT;
      goto done;
    }
  }
  wl__relink(m, tmp, reqs, nreqs);
  wl__keep_grants(m, reqs, nreqs);
  /* A steal is granted at once; one still queued was cut short: finish it,
   * robbing the holders it had not reached yet. */
  for (i = 0; i < nnames; i++) {
    wl_off_t q = AT(names[i], wl__name_t, queue);
    if (!wl__list_empty(m, q) &&
        REQ(m, wl__record_of(WL__LINK(m, q)->next, wl__req_t, qlink))->qkey < 0)
      wl__machine_ops.steal(m, names[i]);
    wl__machine_ops.process(m, names[i]);
  }
  /* An agent without a live owner record is gone with its process, and
   * so is its FIFO. */
  for (i = 0; i < bl.n; i++) {
    if (bl.kinds[i] == WL__AGENT &&
        !wl__linked(m, AT(bl.recs[i], wl__agent_t, olink))) {
      wl__os_wake_close(m, AGENT(m, bl.recs[i])->wake, WL_WAIT_NONE);
      wl__machine_ops.close_agent(m, bl.recs[i]);
      bl.kinds[i] = WL__FREE;
    }
  }
  /* The dead holder may have queued mail without waking its agent: wake
   * every agent that has mail (a spare wake-up finds an empty mailbox). */
  for (i = 0; i < bl.n; i++) {
    if (bl.kinds[i] == WL__AGENT &&
        !wl__list_empty(m, AT(bl.recs[i], wl__agent_t, mail)))
      wl__machine_ops.notify(m, bl.recs[i]);
  }
  /* The dead process may have been changing who watches whom. */
  wl__ring(m, 1);
done:
  if (rc == 0 && wl__is_corrupt(m))
    rc = WL_ECORRUPT;
  wl__os_discard(m->work, m->work_size);
  return rc;
}

/* The mutex's last holder died inside an algorithm: repair, then go on. A
 * repair that fails part-way (a corrupt region, or one without its table
 * block and no room for another) has left the
 * lists half rebuilt: as LMDB does, the mutex is then given back without
 * being marked consistent, which makes it unusable to every process for
 * good (os/machine.h), and the region is marked corrupt. Another process
 * that finds the mutex so (any error but EOWNERDEAD) reports the corruption. */
WL__COLD int wl__lock_slow(wl_manager_t *m, int rc) {
  if (rc != WL__EOWNERDEAD) {
    wl__mark_corrupt(m);
    wl__tell_agents(m);
    return WL_ECORRUPT;
  }
  /* A region that another process found corrupt is not repaired. */
  if (__atomic_load_n(&WL__HDR(m)->corrupt, __ATOMIC_RELAXED) ||
      wl__cover(m) != 0 || wl__recover(m) != 0) {
    wl__corrupt(m);
    wl__unlock(m);
    return WL_ECORRUPT;
  }
  wl__os_file_mutex_consistent(m);
  wl__sweep(m);
  return 0;
}
