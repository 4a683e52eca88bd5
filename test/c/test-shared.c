/* Shared locks: shared holders coexist, exclusive waits for all of them,
 * and the queue stays FIFO even for a compatible shared request. */
#include "test.h"

static void test_shared_holders_coexist(void) {
  tagent_t a, b;
  wl_request_t s1, s2;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &s1, "x", WL_SHARED, 0);
  REQUEST(&b, &s2, "x", WL_SHARED, 0);
  EXPECT_MAIL(&a, {&s1, WL_EV_GRANTED});
  EXPECT_MAIL(&b, {&s2, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&s1));
  ASSERT_EQ(1, wl_release(&s2));
  tagent_close(&a);
  tagent_close(&b);
}

/* One release of an exclusive lock grants every shared request behind it. */
static void test_shared_after_exclusive(void) {
  tagent_t a, b, c;
  wl_request_t e, s1, s2;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  tagent_init(&c, ID("c"));
  REQUEST(&a, &e, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &s1, "x", WL_SHARED, 0);
  REQUEST(&c, &s2, "x", WL_SHARED, 0);
  EXPECT_MAIL(&a, {&e, WL_EV_GRANTED});
  EXPECT_NO_MAIL(&b);
  EXPECT_NO_MAIL(&c);
  ASSERT_EQ(1, wl_release(&e));
  EXPECT_MAIL(&b, {&s1, WL_EV_GRANTED});
  EXPECT_MAIL(&c, {&s2, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&s1));
  ASSERT_EQ(1, wl_release(&s2));
  tagent_close(&a);
  tagent_close(&b);
  tagent_close(&c);
}

static void test_exclusive_waits_for_every_shared(void) {
  tagent_t a, b, c;
  wl_request_t s1, s2, e;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  tagent_init(&c, ID("c"));
  REQUEST(&a, &s1, "x", WL_SHARED, 0);
  REQUEST(&b, &s2, "x", WL_SHARED, 0);
  REQUEST(&c, &e, "x", WL_EXCLUSIVE, 0);
  EXPECT_MAIL(&a, {&s1, WL_EV_GRANTED});
  EXPECT_MAIL(&b, {&s2, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&s1));
  EXPECT_NO_MAIL(&c);
  ASSERT_EQ(1, wl_release(&s2));
  EXPECT_MAIL(&c, {&e, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&e));
  tagent_close(&a);
  tagent_close(&b);
  tagent_close(&c);
}

/* A shared request behind a queued exclusive one waits although it is
 * compatible with the current holders. */
static void test_shared_behind_queued_exclusive_waits(void) {
  tagent_t a, b, c;
  wl_request_t s1, e, s2;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  tagent_init(&c, ID("c"));
  REQUEST(&a, &s1, "x", WL_SHARED, 0);
  REQUEST(&b, &e, "x", WL_EXCLUSIVE, 0);
  REQUEST(&c, &s2, "x", WL_SHARED, 0);
  EXPECT_MAIL(&a, {&s1, WL_EV_GRANTED});
  EXPECT_NO_MAIL(&b);
  EXPECT_NO_MAIL(&c);
  ASSERT_EQ(1, wl_release(&s1));
  EXPECT_MAIL(&b, {&e, WL_EV_GRANTED});
  EXPECT_NO_MAIL(&c);
  ASSERT_EQ(1, wl_release(&e));
  EXPECT_MAIL(&c, {&s2, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&s2));
  tagent_close(&a);
  tagent_close(&b);
  tagent_close(&c);
}

/* A release grants the run of shared requests at the head of the queue, in
 * order, and stops at the first exclusive one. */
static void test_grant_run_stops_at_exclusive(void) {
  tagent_t a, b, c;
  wl_request_t e1, s1, s2, e2, s3;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  tagent_init(&c, ID("c"));
  REQUEST(&a, &e1, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &s1, "x", WL_SHARED, 0);
  REQUEST(&b, &s2, "x", WL_SHARED, 0);
  REQUEST(&c, &e2, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &s3, "x", WL_SHARED, 0);
  EXPECT_MAIL(&a, {&e1, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&e1));
  EXPECT_MAIL(&b, {&s1, WL_EV_GRANTED}, {&s2, WL_EV_GRANTED});
  EXPECT_NO_MAIL(&c);
  ASSERT_EQ(1, wl_release(&s1));
  EXPECT_NO_MAIL(&c);
  ASSERT_EQ(1, wl_release(&s2));
  EXPECT_MAIL(&c, {&e2, WL_EV_GRANTED});
  EXPECT_NO_MAIL(&b);
  ASSERT_EQ(1, wl_release(&e2));
  EXPECT_MAIL(&b, {&s3, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&s3));
  tagent_close(&a);
  tagent_close(&b);
  tagent_close(&c);
}

int main(void) {
  RUN(test_shared_holders_coexist);
  RUN(test_shared_after_exclusive);
  RUN(test_exclusive_waits_for_every_shared);
  RUN(test_shared_behind_queued_exclusive_waits);
  RUN(test_grant_run_stops_at_exclusive);
  return 0;
}
