/* wl_agent_close: ends the agent's queued and held requests only, drops its
 * mail, then grants the others in queue order. */
#include "test.h"

static void test_close_releases_held(void) {
  tagent_t a, b;
  wl_request_t h, w;
  wl_snapshot_t snap;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &h, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &w, "x", WL_EXCLUSIVE, 0);
  EXPECT_MAIL(&a, {&h, WL_EV_GRANTED});
  tagent_close(&a);
  EXPECT_MAIL(&b, {&w, WL_EV_GRANTED});
  ASSERT_EQ(0, wl_snapshot(wl_process(), &snap));
  EXPECT_HELD(&snap, {NAME("x"), WL_EXCLUSIVE, ID("b")});
  ASSERT_EQ(0, snap.npending);
  wl_snapshot_free(&snap);
  ASSERT_EQ(0, wl_release(&h));
  ASSERT_EQ(1, wl_release(&w));
  tagent_close(&b);
}

/* Requests of other agents interleaved with the closing agent's keep their
 * places and their order. */
static void test_close_removes_only_its_requests(void) {
  tagent_t a, b, c;
  wl_request_t h, a1, b1, a2, b2;
  wl_snapshot_t snap;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  tagent_init(&c, ID("c"));
  REQUEST(&c, &h, "x", WL_EXCLUSIVE, 0);
  REQUEST(&a, &a1, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &b1, "x", WL_EXCLUSIVE, 0);
  REQUEST(&a, &a2, "x", WL_SHARED, 0);
  REQUEST(&b, &b2, "x", WL_SHARED, 0);
  tagent_close(&a);
  ASSERT_EQ(0, wl_snapshot(wl_process(), &snap));
  EXPECT_HELD(&snap, {NAME("x"), WL_EXCLUSIVE, ID("c")});
  EXPECT_PENDING(&snap, {NAME("x"), WL_EXCLUSIVE, ID("b")},
                 {NAME("x"), WL_SHARED, ID("b")});
  wl_snapshot_free(&snap);
  EXPECT_NO_MAIL(&b);
  ASSERT_EQ(1, wl_release(&h));
  EXPECT_MAIL(&b, {&b1, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&b1));
  EXPECT_MAIL(&b, {&b2, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&b2));
  tagent_close(&b);
  tagent_close(&c);
}

/* The agent's own request queued behind its own lock is never granted on
 * the way out: the other agent's request behind both is. */
static void test_no_grant_to_closing_agent(void) {
  tagent_t a, b;
  wl_request_t h, mine, w;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &h, "x", WL_EXCLUSIVE, 0);
  REQUEST(&a, &mine, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &w, "x", WL_EXCLUSIVE, 0);
  EXPECT_MAIL(&a, {&h, WL_EV_GRANTED});
  ASSERT_EQ(1, a.notified);
  tagent_close(&a);
  ASSERT_EQ(1, a.notified);
  EXPECT_NO_MAIL(&a);
  EXPECT_MAIL(&b, {&w, WL_EV_GRANTED});
  ASSERT_EQ(0, wl_release(&mine));
  ASSERT_EQ(1, wl_release(&w));
  tagent_close(&b);
}

/* Every name the agent touched is processed; each queue grants its own
 * head run and no further. */
static void test_close_processes_every_name(void) {
  tagent_t a, b, c;
  wl_request_t hx, hy, bx, cx, cx2, by;
  tmail_t mail[4];

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  tagent_init(&c, ID("c"));
  REQUEST(&a, &hx, "x", WL_EXCLUSIVE, 0);
  REQUEST(&a, &hy, "y", WL_SHARED, 0);
  REQUEST(&b, &bx, "x", WL_SHARED, 0);
  REQUEST(&c, &cx, "x", WL_SHARED, 0);
  REQUEST(&c, &cx2, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &by, "y", WL_EXCLUSIVE, 0);
  tagent_close(&a);
  ASSERT_EQ(1, b.notified);
  ASSERT_EQ(2, drain(&b, mail, 4));
  ASSERT((mail[0].req == &bx && mail[1].req == &by) ||
         (mail[0].req == &by && mail[1].req == &bx));
  ASSERT_EQ(WL_EV_GRANTED, mail[0].events);
  ASSERT_EQ(WL_EV_GRANTED, mail[1].events);
  EXPECT_MAIL(&c, {&cx, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&bx));
  ASSERT_EQ(1, wl_release(&cx));
  EXPECT_MAIL(&c, {&cx2, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&cx2));
  ASSERT_EQ(1, wl_release(&by));
  tagent_close(&b);
  tagent_close(&c);
}

/* Undelivered grant, unavailability and theft are all dropped. */
static void test_close_drops_mail(void) {
  tagent_t a, b;
  wl_request_t g, u, s, i, t;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &i, "w", WL_EXCLUSIVE, 0);
  REQUEST(&a, &g, "x", WL_EXCLUSIVE, 0);
  REQUEST(&a, &u, "x", WL_EXCLUSIVE, WL_IF_AVAILABLE);
  REQUEST(&a, &s, "y", WL_EXCLUSIVE, 0);
  REQUEST(&b, &t, "y", WL_EXCLUSIVE, WL_STEAL);
  tagent_close(&a);
  EXPECT_NO_MAIL(&a);
  ASSERT_EQ(1, wl__name_count(wl_process()));
  EXPECT_MAIL(&b, {&t, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&t));
  tagent_close(&b);
}

/* Spec 2.6 releases the agent's locks in the order of the held set, which is
 * grant order (here not request order): the waiter behind all of them is
 * granted in that order, as if the agent had released them one by one. */
static void test_close_releases_in_grant_order(void) {
  tagent_t a, b, c;
  wl_request_t hd, ra, rb, rc, rd, wa, wb, wc, wd;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  tagent_init(&c, ID("c"));
  REQUEST(&c, &hd, "d", WL_EXCLUSIVE, 0);
  REQUEST(&a, &rd, "d", WL_EXCLUSIVE, 0);
  REQUEST(&a, &ra, "a", WL_EXCLUSIVE, 0);
  REQUEST(&a, &rb, "b", WL_EXCLUSIVE, 0);
  REQUEST(&a, &rc, "c", WL_EXCLUSIVE, 0);
  ASSERT_EQ(1, wl_release(&hd));
  EXPECT_MAIL(&a, {&ra, WL_EV_GRANTED}, {&rb, WL_EV_GRANTED},
              {&rc, WL_EV_GRANTED}, {&rd, WL_EV_GRANTED});
  REQUEST(&b, &wd, "d", WL_EXCLUSIVE, 0);
  REQUEST(&b, &wc, "c", WL_EXCLUSIVE, 0);
  REQUEST(&b, &wb, "b", WL_EXCLUSIVE, 0);
  REQUEST(&b, &wa, "a", WL_EXCLUSIVE, 0);
  tagent_close(&a);
  EXPECT_MAIL(&b, {&wa, WL_EV_GRANTED}, {&wb, WL_EV_GRANTED},
              {&wc, WL_EV_GRANTED}, {&wd, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&wa));
  ASSERT_EQ(1, wl_release(&wb));
  ASSERT_EQ(1, wl_release(&wc));
  ASSERT_EQ(1, wl_release(&wd));
  tagent_close(&b);
  tagent_close(&c);
}

/* Queued requests are aborted before held locks are released, each queue
 * processed at once: a shared waiter behind the agent's aborted exclusive
 * request is granted beside the agent's shared lock, before the names the
 * agent releases afterwards. */
static void test_close_aborts_before_releasing(void) {
  tagent_t a, b, c;
  wl_request_t ax, as, hy, ay, bx, by;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  tagent_init(&c, ID("c"));
  REQUEST(&a, &ay, "y", WL_EXCLUSIVE, 0);
  REQUEST(&b, &by, "y", WL_EXCLUSIVE, 0);
  REQUEST(&c, &hy, "x", WL_SHARED, 0);
  REQUEST(&a, &as, "x", WL_SHARED, 0);
  REQUEST(&a, &ax, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &bx, "x", WL_SHARED, 0);
  EXPECT_MAIL(&a, {&ay, WL_EV_GRANTED}, {&as, WL_EV_GRANTED});
  tagent_close(&a);
  EXPECT_MAIL(&b, {&bx, WL_EV_GRANTED}, {&by, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&hy));
  ASSERT_EQ(1, wl_release(&bx));
  ASSERT_EQ(1, wl_release(&by));
  tagent_close(&b);
  tagent_close(&c);
}

/* A closed agent can be initialised again and used as new. */
static void test_reinit_after_close(void) {
  tagent_t a;
  wl_request_t r1, r2;

  tagent_init(&a, ID("a"));
  REQUEST(&a, &r1, "x", WL_EXCLUSIVE, 0);
  tagent_close(&a);
  tagent_init(&a, ID("a2"));
  REQUEST(&a, &r2, "x", WL_EXCLUSIVE, 0);
  EXPECT_MAIL(&a, {&r2, WL_EV_GRANTED});
  tagent_close(&a);
}

int main(void) {
  RUN(test_close_releases_held);
  RUN(test_close_removes_only_its_requests);
  RUN(test_no_grant_to_closing_agent);
  RUN(test_close_processes_every_name);
  RUN(test_close_drops_mail);
  RUN(test_close_releases_in_grant_order);
  RUN(test_close_aborts_before_releasing);
  RUN(test_reinit_after_close);
  return 0;
}
