/* Exclusive locks: one holder per name, waiters granted in FIFO order. */
#include "test.h"

static void test_granted_when_free(void) {
  tagent_t a;
  wl_request_t r;

  tagent_init(&a, ID("a"));
  REQUEST(&a, &r, "x", WL_EXCLUSIVE, 0);
  ASSERT_EQ(1, a.notified);
  EXPECT_MAIL(&a, {&r, WL_EV_GRANTED});
  ASSERT_EQ(1, wl__name_count(wl_process()));
  ASSERT_EQ(1, wl_release(&r));
  ASSERT_EQ(0, wl__name_count(wl_process()));
  EXPECT_NO_MAIL(&a);
  tagent_close(&a);
}

static void test_waits_for_holder(void) {
  tagent_t a, b;
  wl_request_t r1, r2;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  ASSERT_EQ(WL_GRANTED_AT_ONCE,
            wl_request(&a.agent, &r1, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_request(&b.agent, &r2, NAME("x"), WL_EXCLUSIVE, 0));
  EXPECT_MAIL(&a, {&r1, WL_EV_GRANTED});
  EXPECT_NO_MAIL(&b);
  ASSERT_EQ(0, b.notified);
  ASSERT_EQ(1, wl_release(&r1));
  EXPECT_MAIL(&b, {&r2, WL_EV_GRANTED});
  EXPECT_NO_MAIL(&a);
  ASSERT_EQ(1, wl_release(&r2));
  tagent_close(&a);
  tagent_close(&b);
}

/* Each release grants exactly the next request, to its agent only. */
static void test_fifo_across_agents(void) {
  tagent_t ag[3];
  wl_request_t r[7];
  int i;

  for (i = 0; i < 3; i++)
    tagent_init(&ag[i], ID("c"));
  for (i = 0; i < 7; i++)
    REQUEST(&ag[i % 3], &r[i], "x", WL_EXCLUSIVE, 0);
  for (i = 0; i < 7; i++) {
    EXPECT_MAIL(&ag[i % 3], {&r[i], WL_EV_GRANTED});
    EXPECT_NO_MAIL(&ag[(i + 1) % 3]);
    EXPECT_NO_MAIL(&ag[(i + 2) % 3]);
    ASSERT_EQ(1, wl_release(&r[i]));
  }
  for (i = 0; i < 3; i++)
    tagent_close(&ag[i]);
}

/* A lock is not reentrant: the same agent waits behind itself. */
static void test_same_agent_waits(void) {
  tagent_t a;
  wl_request_t r1, r2;

  tagent_init(&a, ID("a"));
  REQUEST(&a, &r1, "x", WL_EXCLUSIVE, 0);
  REQUEST(&a, &r2, "x", WL_EXCLUSIVE, 0);
  EXPECT_MAIL(&a, {&r1, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&r1));
  EXPECT_MAIL(&a, {&r2, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&r2));
  tagent_close(&a);
}

static void test_names_independent(void) {
  tagent_t a, b;
  wl_request_t x1, y1, x2;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &x1, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &y1, "y", WL_EXCLUSIVE, 0);
  REQUEST(&b, &x2, "x", WL_EXCLUSIVE, 0);
  EXPECT_MAIL(&a, {&x1, WL_EV_GRANTED});
  EXPECT_MAIL(&b, {&y1, WL_EV_GRANTED});
  ASSERT_EQ(2, wl__name_count(wl_process()));
  ASSERT_EQ(1, wl_release(&y1));
  EXPECT_NO_MAIL(&b);
  ASSERT_EQ(1, wl_release(&x1));
  EXPECT_MAIL(&b, {&x2, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&x2));
  tagent_close(&a);
  tagent_close(&b);
}

int main(void) {
  RUN(test_granted_when_free);
  RUN(test_waits_for_holder);
  RUN(test_fifo_across_agents);
  RUN(test_same_agent_waits);
  RUN(test_names_independent);
  return 0;
}
