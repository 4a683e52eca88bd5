/* wl_agent_waits: whether only an agent itself can end its queued requests'
 * wait (its thread then need not stay alive for them), in the process-wide
 * manager and in a shared one. */
#include <unistd.h>

#include "test.h"

#define SIZE (1 << 20)

static void take_mail(wl_agent_t *a) {
  unsigned events;
  while (wl_agent_next(a, &events) != NULL) {
  }
}

/* The cases, on agents a and b of one manager. */
static void check_waits(wl_agent_t *a, wl_agent_t *b) {
  wl_request_t ax, ax2, ay, bx, by, as, as2;

  ASSERT_EQ(WL_WAITS_NOTHING, wl_agent_waits(a));
  /* Behind its own exclusive lock. */
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(a, &ax, NAME("x"), WL_EXCLUSIVE, 0));
  /* An undelivered grant counts as waiting for others: it is to be run. */
  ASSERT_EQ(WL_WAITS_ON_OTHERS, wl_agent_waits(a));
  take_mail(a);
  ASSERT_EQ(WL_WAITS_NOTHING, wl_agent_waits(a));
  ASSERT_EQ(0, wl_request(a, &ax2, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(WL_WAITS_ON_SELF, wl_agent_waits(a));
  /* Behind another agent's lock too: some request may be granted. */
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(b, &by, NAME("y"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_request(a, &ay, NAME("y"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(WL_WAITS_ON_OTHERS, wl_agent_waits(a));
  ASSERT_EQ(1, wl_abort(&ay));
  ASSERT_EQ(WL_WAITS_ON_SELF, wl_agent_waits(a));
  /* b waits behind a's lock: that is waiting for others, for b. */
  ASSERT_EQ(0, wl_request(b, &bx, NAME("x"), WL_SHARED, 0));
  take_mail(b);
  ASSERT_EQ(WL_WAITS_ON_OTHERS, wl_agent_waits(b));
  /* Its own shared lock, shared with another agent, still blocks a's
   * exclusive request. */
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(a, &as, NAME("s"), WL_SHARED, 0));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(b, &as2, NAME("s"), WL_SHARED, 0));
  take_mail(a);
  take_mail(b);
  ASSERT_EQ(0, wl_request(a, &ay, NAME("s"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(WL_WAITS_ON_SELF, wl_agent_waits(a));
  ASSERT_EQ(1, wl_abort(&ay));
  /* Its lock stolen: a's request now waits behind b's lock. */
  ASSERT_EQ(1, wl_abort(&bx));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(b, &bx, NAME("x"), WL_EXCLUSIVE, WL_STEAL));
  take_mail(b);
  ASSERT_EQ(WL_WAITS_ON_OTHERS, wl_agent_waits(a)); /* the steal's mail */
  take_mail(a);
  ASSERT_EQ(WL_WAITS_ON_OTHERS, wl_agent_waits(a));
  ASSERT_EQ(1, wl_release(&bx));
  take_mail(a);
  ASSERT_EQ(WL_WAITS_NOTHING, wl_agent_waits(a));
  wl_release(&ax);
  wl_release(&ax2);
  wl_release(&as);
  wl_release(&as2);
  wl_release(&by);
}

/* A request with another agent's request in its way waits on that agent
 * (its abort may grant it), unless something of its own agent is in its way
 * too: a lock held in a conflicting mode, or a request ahead of it. */
static void check_in_the_way(wl_agent_t *a, wl_agent_t *b) {
  wl_request_t as, as2, ax, ao, bx, bx2, bo;

  /* The nested read: a shares cfg, b's exclusive request waits for it, and
   * a's second shared request waits behind b's. */
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(a, &as, NAME("cfg"), WL_SHARED, 0));
  take_mail(a);
  ASSERT_EQ(0, wl_request(b, &bx, NAME("cfg"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_request(a, &as2, NAME("cfg"), WL_SHARED, 0));
  ASSERT_EQ(WL_WAITS_ON_OTHERS, wl_agent_waits(a));
  /* b gives up: a's request is granted, and a told. */
  ASSERT_EQ(1, wl_abort(&bx));
  ASSERT_EQ(WL_WAITS_ON_OTHERS, wl_agent_waits(a));
  take_mail(a);
  ASSERT_EQ(WL_WAITS_NOTHING, wl_agent_waits(a));
  ASSERT_EQ(1, wl_release(&as2));
  /* An exclusive request of a behind b's is in the way of its own shared
   * lock whatever b does, and a shared one behind it in the way of that
   * request: b's abort grants neither. */
  ASSERT_EQ(0, wl_request(b, &bx, NAME("cfg"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_request(a, &ax, NAME("cfg"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_request(a, &as2, NAME("cfg"), WL_SHARED, 0));
  ASSERT_EQ(WL_WAITS_ON_SELF, wl_agent_waits(a));
  ASSERT_EQ(1, wl_abort(&bx));
  ASSERT_EQ(WL_WAITS_ON_SELF, wl_agent_waits(a));
  /* a's own abort grants the shared request. */
  ASSERT_EQ(1, wl_abort(&ax));
  ASSERT_EQ(WL_WAITS_ON_OTHERS, wl_agent_waits(a));
  take_mail(a);
  ASSERT_EQ(WL_WAITS_NOTHING, wl_agent_waits(a));
  ASSERT_EQ(1, wl_release(&as2));
  ASSERT_EQ(1, wl_release(&as));
  /* Behind its own exclusive lock a shared request waits on a, whoever is
   * queued between. */
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(a, &ax, NAME("cfg"), WL_EXCLUSIVE, 0));
  take_mail(a);
  ASSERT_EQ(0, wl_request(b, &bx, NAME("cfg"), WL_SHARED, 0));
  ASSERT_EQ(0, wl_request(a, &as, NAME("cfg"), WL_SHARED, 0));
  ASSERT_EQ(WL_WAITS_ON_SELF, wl_agent_waits(a));
  ASSERT_EQ(1, wl_release(&ax));
  take_mail(a);
  take_mail(b);
  ASSERT_EQ(WL_WAITS_NOTHING, wl_agent_waits(a));
  /* a and b share it. a's exclusive request first, then b's, then a's
   * shared one: on a alone (its first request stays ahead). */
  ASSERT_EQ(0, wl_request(a, &ax, NAME("cfg"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_request(b, &bx2, NAME("cfg"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_request(a, &as2, NAME("cfg"), WL_SHARED, 0));
  ASSERT_EQ(WL_WAITS_ON_SELF, wl_agent_waits(a));
  /* A request on another name that waits on b: the answer is b's. */
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(b, &bo, NAME("other"), WL_EXCLUSIVE, 0));
  take_mail(b);
  ASSERT_EQ(0, wl_request(a, &ao, NAME("other"), WL_SHARED, 0));
  ASSERT_EQ(WL_WAITS_ON_OTHERS, wl_agent_waits(a));
  ASSERT_EQ(1, wl_abort(&ao));
  ASSERT_EQ(WL_WAITS_ON_SELF, wl_agent_waits(a));
  ASSERT_EQ(1, wl_release(&bo));
  ASSERT_EQ(1, wl_abort(&as2));
  ASSERT_EQ(1, wl_abort(&bx2));
  ASSERT_EQ(1, wl_abort(&ax));
  ASSERT_EQ(1, wl_release(&as));
  ASSERT_EQ(1, wl_release(&bx));
  take_mail(a);
  take_mail(b);
  ASSERT_EQ(WL_WAITS_NOTHING, wl_agent_waits(a));
  ASSERT_EQ(WL_WAITS_NOTHING, wl_agent_waits(b));
}

static void test_process_wide(void) {
  tagent_t a, b;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  check_waits(&a.agent, &b.agent);
  check_in_the_way(&a.agent, &b.agent);
  tagent_close(&a);
  tagent_close(&b);
}

static void test_shared(void) {
  char path[256];
  wl_manager_t *m;
  wl_agent_t a, b;

  tshm_path(path, sizeof(path), "waits");
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("a"), tignore_notify));
  ASSERT_EQ(0, wl_agent_init(m, &b, ID("b"), tignore_notify));
  check_waits(&a, &b);
  check_in_the_way(&a, &b);
  wl_agent_close(&a);
  wl_agent_close(&b);
  wl_scope_close(m);
  tshm_remove(path);
}

/* A queue that loops (a corrupt file) ends the walk: ECORRUPT, no hang. */
static void test_corrupt_queue(void) {
  char path[256];
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t h, q;
  wl__agent_t *rec;

  tshm_path(path, sizeof(path), "waits-corrupt");
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("a"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &h, NAME("x"), WL_EXCLUSIVE, 0));
  take_mail(&a);
  ASSERT_EQ(0, wl_request(&a, &q, NAME("x"), WL_EXCLUSIVE, 0));
  rec = (wl__agent_t *)(m->base + a.off);
  /* The queued request's link points back to itself, never to the head. */
  WL__LINK(m, rec->queued.next)->next = rec->queued.next;
  ASSERT_EQ(WL_ECORRUPT, wl_agent_waits(&a));
  wl_agent_close(&a);
  wl_scope_close(m);
  tshm_remove(path);
}

int main(void) {
  RUN(test_process_wide);
  RUN(test_shared);
  RUN(test_corrupt_queue);
  return 0;
}
