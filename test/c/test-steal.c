/* steal: every holder of the name gets STOLEN and the thief is granted
 * ahead of the queue. */
#include "test.h"

static void test_steal_free_name(void) {
  tagent_t a;
  wl_request_t t;

  tagent_init(&a, ID("a"));
  REQUEST(&a, &t, "x", WL_EXCLUSIVE, WL_STEAL);
  EXPECT_MAIL(&a, {&t, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&t));
  tagent_close(&a);
}

static void test_all_holders_stolen(void) {
  tagent_t a, b, c;
  wl_request_t s1, s2, s3, t;
  wl_snapshot_t snap;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  tagent_init(&c, ID("c"));
  REQUEST(&a, &s1, "x", WL_SHARED, 0);
  REQUEST(&a, &s2, "x", WL_SHARED, 0);
  REQUEST(&b, &s3, "x", WL_SHARED, 0);
  EXPECT_MAIL(&a, {&s1, WL_EV_GRANTED}, {&s2, WL_EV_GRANTED});
  EXPECT_MAIL(&b, {&s3, WL_EV_GRANTED});
  REQUEST(&c, &t, "x", WL_EXCLUSIVE, WL_STEAL);
  EXPECT_MAIL(&a, {&s1, WL_EV_STOLEN}, {&s2, WL_EV_STOLEN});
  EXPECT_MAIL(&b, {&s3, WL_EV_STOLEN});
  EXPECT_MAIL(&c, {&t, WL_EV_GRANTED});
  ASSERT_EQ(0, wl_snapshot(wl_process(), &snap));
  EXPECT_HELD(&snap, {NAME("x"), WL_EXCLUSIVE, ID("c")});
  ASSERT_EQ(0, snap.npending);
  wl_snapshot_free(&snap);
  ASSERT_EQ(0, wl_release(&s1));
  ASSERT_EQ(0, wl_release(&s2));
  ASSERT_EQ(0, wl_release(&s3));
  ASSERT_EQ(1, wl_release(&t));
  tagent_close(&a);
  tagent_close(&b);
  tagent_close(&c);
}

/* The thief goes ahead of the queue, which keeps its order behind it; the
 * release of a stolen lock grants nothing. */
static void test_thief_ahead_of_queue(void) {
  tagent_t a, b, c;
  wl_request_t h, q1, q2, t;
  wl_snapshot_t snap;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  tagent_init(&c, ID("c"));
  REQUEST(&a, &h, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &q1, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &q2, "x", WL_SHARED, 0);
  EXPECT_MAIL(&a, {&h, WL_EV_GRANTED});
  REQUEST(&c, &t, "x", WL_EXCLUSIVE, WL_STEAL);
  EXPECT_MAIL(&a, {&h, WL_EV_STOLEN});
  EXPECT_MAIL(&c, {&t, WL_EV_GRANTED});
  EXPECT_NO_MAIL(&b);
  ASSERT_EQ(0, wl_snapshot(wl_process(), &snap));
  EXPECT_PENDING(&snap, {NAME("x"), WL_EXCLUSIVE, ID("b")},
                 {NAME("x"), WL_SHARED, ID("b")});
  wl_snapshot_free(&snap);
  ASSERT_EQ(0, wl_release(&h));
  EXPECT_NO_MAIL(&b);
  ASSERT_EQ(1, wl_release(&t));
  EXPECT_MAIL(&b, {&q1, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&q1));
  EXPECT_MAIL(&b, {&q2, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&q2));
  tagent_close(&a);
  tagent_close(&b);
  tagent_close(&c);
}

/* A grant not yet delivered and the steal that followed arrive together,
 * as one mailbox entry and one notification. */
static void test_undelivered_grant_then_stolen(void) {
  tagent_t a, b;
  wl_request_t h, t;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &h, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &t, "x", WL_EXCLUSIVE, WL_STEAL);
  ASSERT_EQ(1, a.notified);
  EXPECT_MAIL(&a, {&h, WL_EV_GRANTED | WL_EV_STOLEN});
  EXPECT_MAIL(&b, {&t, WL_EV_GRANTED});
  ASSERT_EQ(0, wl_release(&h));
  ASSERT_EQ(1, wl_release(&t));
  tagent_close(&a);
  tagent_close(&b);
}

/* An agent may steal from itself; the victim's event comes first. */
static void test_steal_from_own_agent(void) {
  tagent_t a;
  wl_request_t h, t;

  tagent_init(&a, ID("a"));
  REQUEST(&a, &h, "x", WL_EXCLUSIVE, 0);
  EXPECT_MAIL(&a, {&h, WL_EV_GRANTED});
  REQUEST(&a, &t, "x", WL_EXCLUSIVE, WL_STEAL);
  EXPECT_MAIL(&a, {&h, WL_EV_STOLEN}, {&t, WL_EV_GRANTED});
  ASSERT_EQ(0, wl_release(&h));
  ASSERT_EQ(1, wl_release(&t));
  tagent_close(&a);
}

static void test_thief_robbed_by_thief(void) {
  tagent_t a, b;
  wl_request_t t1, t2;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &t1, "x", WL_EXCLUSIVE, WL_STEAL);
  EXPECT_MAIL(&a, {&t1, WL_EV_GRANTED});
  REQUEST(&b, &t2, "x", WL_EXCLUSIVE, WL_STEAL);
  EXPECT_MAIL(&a, {&t1, WL_EV_STOLEN});
  EXPECT_MAIL(&b, {&t2, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&t2));
  ASSERT_EQ(0, wl__name_count(wl_process()));
  ASSERT_EQ(0, wl_release(&t1));
  tagent_close(&a);
  tagent_close(&b);
}

/* A stolen lock is no longer the agent's: closing the agent leaves the
 * thief alone. */
static void test_close_victim_keeps_thief(void) {
  tagent_t a, b;
  wl_request_t h, t;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &h, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &t, "x", WL_EXCLUSIVE, WL_STEAL);
  tagent_close(&a);
  EXPECT_MAIL(&b, {&t, WL_EV_GRANTED});
  ASSERT_EQ(1, wl__name_count(wl_process()));
  ASSERT_EQ(1, wl_release(&t));
  tagent_close(&b);
}

int main(void) {
  RUN(test_steal_free_name);
  RUN(test_all_holders_stolen);
  RUN(test_thief_ahead_of_queue);
  RUN(test_undelivered_grant_then_stolen);
  RUN(test_steal_from_own_agent);
  RUN(test_thief_robbed_by_thief);
  RUN(test_close_victim_keeps_thief);
  return 0;
}
