/* wl_abort: removes a queued request and processes its queue; does nothing
 * to a request that is not queued. */
#include "test.h"

static void test_abort_queued(void) {
  tagent_t a, b;
  wl_request_t h, r;
  wl_snapshot_t snap;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &h, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &r, "x", WL_EXCLUSIVE, 0);
  ASSERT_EQ(1, wl_abort(&r));
  ASSERT_EQ(0, wl_snapshot(wl_process(), &snap));
  ASSERT_EQ(0, snap.npending);
  ASSERT_EQ(1, snap.nheld);
  wl_snapshot_free(&snap);
  ASSERT_EQ(0, wl_abort(&r));
  ASSERT_EQ(1, wl_release(&h));
  ASSERT_EQ(0, wl__name_count(wl_process()));
  EXPECT_NO_MAIL(&b);
  ASSERT_EQ(0, b.notified);
  tagent_close(&a);
  tagent_close(&b);
}

/* Aborting the exclusive head lets the shared request behind it join the
 * shared holder at once. */
static void test_abort_grants_next(void) {
  tagent_t a, b, c;
  wl_request_t s1, e, s2;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  tagent_init(&c, ID("c"));
  REQUEST(&a, &s1, "x", WL_SHARED, 0);
  REQUEST(&b, &e, "x", WL_EXCLUSIVE, 0);
  REQUEST(&c, &s2, "x", WL_SHARED, 0);
  EXPECT_NO_MAIL(&c);
  ASSERT_EQ(1, wl_abort(&e));
  EXPECT_MAIL(&c, {&s2, WL_EV_GRANTED});
  EXPECT_NO_MAIL(&b);
  ASSERT_EQ(1, wl_release(&s1));
  ASSERT_EQ(1, wl_release(&s2));
  tagent_close(&a);
  tagent_close(&b);
  tagent_close(&c);
}

static void test_abort_keeps_order(void) {
  tagent_t a, b;
  wl_request_t h, q[3];

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &h, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &q[0], "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &q[1], "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &q[2], "x", WL_EXCLUSIVE, 0);
  ASSERT_EQ(1, wl_abort(&q[1]));
  ASSERT_EQ(1, wl_release(&h));
  EXPECT_MAIL(&b, {&q[0], WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&q[0]));
  EXPECT_MAIL(&b, {&q[2], WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&q[2]));
  tagent_close(&a);
  tagent_close(&b);
}

/* After the grant, even an undelivered one, abort changes nothing. */
static void test_abort_after_grant(void) {
  tagent_t a, b;
  wl_request_t r, w;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &r, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &w, "x", WL_EXCLUSIVE, 0);
  ASSERT_EQ(0, wl_abort(&r));
  EXPECT_MAIL(&a, {&r, WL_EV_GRANTED});
  ASSERT_EQ(0, wl_abort(&r));
  EXPECT_NO_MAIL(&b);
  ASSERT_EQ(1, wl_release(&r));
  EXPECT_MAIL(&b, {&w, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&w));
  tagent_close(&a);
  tagent_close(&b);
}

static void test_abort_stolen(void) {
  tagent_t a, b;
  wl_request_t h, t;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &h, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &t, "x", WL_EXCLUSIVE, WL_STEAL);
  ASSERT_EQ(0, wl_abort(&h));
  EXPECT_MAIL(&a, {&h, WL_EV_GRANTED | WL_EV_STOLEN});
  ASSERT_EQ(0, wl_release(&h));
  ASSERT_EQ(1, wl_release(&t));
  tagent_close(&a);
  tagent_close(&b);
}

int main(void) {
  RUN(test_abort_queued);
  RUN(test_abort_grants_next);
  RUN(test_abort_keeps_order);
  RUN(test_abort_after_grant);
  RUN(test_abort_stolen);
  return 0;
}
