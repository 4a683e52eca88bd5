/* wl__check: every list and counter of a manager against its records (and
 * the fencing tokens of held and stolen ones against the grant counter), for
 * the tests of crash recovery, under the manager's mutex (a sweeper thread
 * may be changing them). Walks are bounded, so a corrupt list is reported,
 * never followed forever. */
#include "test.h"

#define B(m) ((m)->base)
#define REQ(m, off) WL__REC(m, off, wl__req_t)
#define AT(off, type, member) ((off) + offsetof(type, member))

static int report(const char *what) {
  fprintf(stderr, "wl__check: %s\n", what);
  return WL_ECORRUPT;
}

/* Walks the list at head, checking links both ways and that every record
 * on it is a request in `state` (any state if -1) of owner `field` == want;
 * returns how many, or -1. */
static long walk(wl_manager_t *m, wl_off_t head, size_t link, int state,
                 size_t field, wl_off_t want, uint64_t *nexclusive) {
  uint64_t limit = WL__HDR(m)->used / 32 + 2;
  wl_off_t at = WL__LINK(m, head)->next, prev = head;
  long n = 0;

  while (at != head) {
    wl_off_t r = at - link;
    wl__block_t *b = wl__block(m, r);
    if (--limit == 0 || WL__LINK(m, at)->prev != prev ||
        b->kind != WL__REQUEST || (state >= 0 && REQ(m, r)->state != (uint32_t)state) ||
        *(wl_off_t *)((char *)REQ(m, r) + field) != want)
      return -1;
    if (nexclusive != NULL && REQ(m, r)->mode == WL_EXCLUSIVE)
      (*nexclusive)++;
    n++;
    prev = at;
    at = WL__LINK(m, at)->next;
  }
  return WL__LINK(m, head)->prev == prev ? n : -1;
}

/* Walks the owners (kind WL__OWNER) or vacant records (WL__VACANT),
 * checking links both ways and, for owners, that each watches the next one,
 * the last the first (none when alone); returns how many, or -1. */
static long walk_owners(wl_manager_t *m, wl_off_t head, uint32_t kind) {
  uint64_t limit = WL__HDR(m)->used / 32 + 2;
  wl_off_t first = WL__LINK(m, head)->next, at = first, prev = head;
  long n = 0;

  while (at != head) {
    wl_off_t o = wl__record_of(at, wl__owner_t, link);
    wl_off_t next = WL__LINK(m, at)->next;
    wl_off_t t = next == head ? first : next;
    t = t == at ? 0 : wl__record_of(t, wl__owner_t, link);
    if (--limit == 0 || WL__LINK(m, at)->prev != prev ||
        wl__block(m, o)->kind != kind)
      return -1;
    if (kind == WL__OWNER &&
        __atomic_load_n(&WL__REC(m, o, wl__owner_t)->watch, __ATOMIC_SEQ_CST) != t) {
      fprintf(stderr, "wl__check: owner %llu watches %llu, not %llu\n",
              (unsigned long long)o,
              (unsigned long long)WL__REC(m, o, wl__owner_t)->watch,
              (unsigned long long)t);
      return -1;
    }
    n++;
    prev = at;
    at = next;
  }
  return WL__LINK(m, head)->prev == prev ? n : -1;
}

/* Whether the held list at head (already walked) is in grant order: tokens
 * increasing, none 0 and none past the manager's grant counter. */
static int tokens_ok(wl_manager_t *m, wl_off_t head, size_t link) {
  wl_off_t at;
  uint64_t last = 0;

  for (at = WL__LINK(m, head)->next; at != head; at = WL__LINK(m, at)->next) {
    uint64_t token = REQ(m, at - link)->token;
    if (token <= last || token > WL__HDR(m)->grants)
      return 0;
    last = token;
  }
  return 1;
}

static int check(wl_manager_t *m);

int wl__check(wl_manager_t *m) {
  int rc;

  if (wl__lock(m) != 0)
    return report("the mutex cannot be taken");
  rc = check(m);
  wl__unlock(m);
  return rc;
}

static int check(wl_manager_t *m) {
  wl__hdr_t *h = WL__HDR(m);
  wl_off_t order = wl__off_of(m, &h->order), ln, at;
  uint64_t names = 0, idle = 0, limit = h->used / 32 + 2;
  long listed = 0, records = 0, agents_listed = 0, owners = 0, vacant = 0;
  long owners_listed = walk_owners(m, wl__off_of(m, &h->owners), WL__OWNER);
  long vacant_listed = walk_owners(m, wl__off_of(m, &h->vacant), WL__VACANT);

  for (ln = WL__LINK(m, order)->next; ln != order;
       ln = WL__LINK(m, ln)->next) {
    wl_off_t n = wl__record_of(ln, wl__name_t, order);
    wl__name_t *name = WL__REC(m, n, wl__name_t);
    uint64_t nexclusive = 0;
    long q, held;
    if (--limit == 0 || wl__block(m, n)->kind != WL__NAME)
      return report("the names' order list is corrupt");
    q = walk(m, AT(n, wl__name_t, queue), offsetof(wl__req_t, qlink),
             WL__QUEUED, offsetof(wl__req_t, name), n, NULL);
    held = walk(m, AT(n, wl__name_t, held), offsetof(wl__req_t, qlink),
                WL__HELD, offsetof(wl__req_t, name), n, &nexclusive);
    if (q < 0 || held < 0)
      return report("a name's queue or held list is corrupt");
    if ((uint64_t)held != name->nheld || nexclusive != name->nexclusive)
      return report("a name's counters disagree with its held list");
    if (!tokens_ok(m, AT(n, wl__name_t, held), offsetof(wl__req_t, qlink)))
      return report("a name's held list is not in token order");
    if ((q + held == 0) != wl__linked(m, AT(n, wl__name_t, ilink)))
      return report("a name is idle with entries, or has none and is not idle");
    idle += q + held == 0;
    size_t len;
    const uint16_t *units = wl__units(m, n, &len);
    if (wl__ops(m)->names_find(m, name->hash, units, len) != n)
      return report("a name cannot be found in the table");
    listed += q + held;
    names++;
  }
  if (names != h->count || idle != h->nidle)
    return report("the table's counts disagree with its order list");
  for (at = (sizeof(*h) + 15) & ~(uint64_t)15; at < h->used;
       at += (uint64_t)1 << (WL__REC(m, at, wl__block_t)->cls + WL__MIN_SHIFT)) {
    wl_off_t rec = at + sizeof(wl__block_t);
    wl__block_t *b = WL__REC(m, at, wl__block_t);
    owners += b->kind == WL__OWNER;
    vacant += b->kind == WL__VACANT;
    if (b->kind == WL__REQUEST &&
        (REQ(m, rec)->state == WL__QUEUED || REQ(m, rec)->state == WL__HELD))
      records++;
    if (b->kind == WL__REQUEST && REQ(m, rec)->state >= WL__HELD &&
        (REQ(m, rec)->token == 0 || REQ(m, rec)->token > h->grants))
      return report("a granted request has no token, or one never given");
    if (b->kind == WL__AGENT) {
      long q = walk(m, AT(rec, wl__agent_t, queued), offsetof(wl__req_t, alink),
                    WL__QUEUED, offsetof(wl__req_t, agent), rec, NULL);
      long held = walk(m, AT(rec, wl__agent_t, held), offsetof(wl__req_t, alink),
                       WL__HELD, offsetof(wl__req_t, agent), rec, NULL);
      long stolen = walk(m, AT(rec, wl__agent_t, stolen),
                         offsetof(wl__req_t, alink), WL__STOLEN,
                         offsetof(wl__req_t, agent), rec, NULL);
      long mail = walk(m, AT(rec, wl__agent_t, mail), offsetof(wl__req_t, mlink),
                       -1, offsetof(wl__req_t, agent), rec, NULL);
      if (q < 0 || held < 0 || stolen < 0 || mail < 0)
        return report("an agent's lists are corrupt");
      if (!tokens_ok(m, AT(rec, wl__agent_t, held), offsetof(wl__req_t, alink)))
        return report("an agent's held list is not in token order");
      agents_listed += q + held;
    }
  }
  if (records != listed || records != agents_listed)
    return report("queued and held records disagree with the lists");
  if (owners_listed < 0 || vacant_listed < 0)
    return report("the owners' ring or the vacant records' list is corrupt");
  if (owners != owners_listed || vacant != vacant_listed)
    return report("owner records disagree with the owners' and vacant lists");
  return 0;
}
