/* wl_release: ends a request in any state and drops its undelivered mail;
 * returns 1 only when it held its lock. */
#include "test.h"

static void test_release_held(void) {
  tagent_t a, b;
  wl_request_t r, w;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &r, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &w, "x", WL_EXCLUSIVE, 0);
  EXPECT_MAIL(&a, {&r, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&r));
  EXPECT_MAIL(&b, {&w, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&w));
  ASSERT_EQ(0, wl__name_count(wl_process()));
  tagent_close(&a);
  tagent_close(&b);
}

static void test_release_queued(void) {
  tagent_t a, b, c;
  wl_request_t h, q1, q2;
  wl_snapshot_t snap;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  tagent_init(&c, ID("c"));
  REQUEST(&a, &h, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &q1, "x", WL_EXCLUSIVE, 0);
  REQUEST(&c, &q2, "x", WL_EXCLUSIVE, 0);
  ASSERT_EQ(0, wl_release(&q1));
  ASSERT_EQ(0, wl_snapshot(wl_process(), &snap));
  EXPECT_PENDING(&snap, {NAME("x"), WL_EXCLUSIVE, ID("c")});
  wl_snapshot_free(&snap);
  ASSERT_EQ(1, wl_release(&h));
  EXPECT_NO_MAIL(&b);
  EXPECT_MAIL(&c, {&q2, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&q2));
  tagent_close(&a);
  tagent_close(&b);
  tagent_close(&c);
}

/* Releasing a lock whose grant is still in the mailbox drops the grant. */
static void test_release_drops_undelivered_grant(void) {
  tagent_t a;
  wl_request_t r;

  tagent_init(&a, ID("a"));
  REQUEST(&a, &r, "x", WL_EXCLUSIVE, 0);
  ASSERT_EQ(1, wl_release(&r));
  EXPECT_NO_MAIL(&a);
  tagent_close(&a);
}

/* Releasing one request drops its mail only; other mail stays. */
static void test_release_keeps_other_mail(void) {
  tagent_t a;
  wl_request_t r1, r2;
  unsigned events;

  tagent_init(&a, ID("a"));
  REQUEST(&a, &r1, "x", WL_EXCLUSIVE, 0);
  REQUEST(&a, &r2, "y", WL_EXCLUSIVE, 0);
  ASSERT_EQ(1, wl_release(&r1));
  ASSERT(wl_agent_next(&a.agent, &events) == &r2);
  ASSERT_EQ(WL_EV_GRANTED, events);
  ASSERT(wl_agent_next(&a.agent, &events) == NULL);
  ASSERT_EQ(1, wl_release(&r2));
  tagent_close(&a);
}

static void test_release_drops_unavailable(void) {
  tagent_t a, b;
  wl_request_t h, r;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &h, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &r, "x", WL_EXCLUSIVE, WL_IF_AVAILABLE);
  ASSERT_EQ(0, wl_release(&r));
  EXPECT_NO_MAIL(&b);
  ASSERT_EQ(1, wl_release(&h));
  tagent_close(&a);
  tagent_close(&b);
}

/* A second release finds nothing and leaves the next holder alone. */
static void test_release_twice(void) {
  tagent_t a, b, c;
  wl_request_t r, w, probe;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  tagent_init(&c, ID("c"));
  REQUEST(&a, &r, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &w, "x", WL_EXCLUSIVE, 0);
  ASSERT_EQ(1, wl_release(&r));
  ASSERT_EQ(0, wl_release(&r));
  EXPECT_MAIL(&b, {&w, WL_EV_GRANTED});
  REQUEST(&c, &probe, "x", WL_EXCLUSIVE, WL_IF_AVAILABLE);
  EXPECT_MAIL(&c, {&probe, WL_EV_UNAVAILABLE});
  ASSERT_EQ(1, wl_release(&w));
  EXPECT_NO_MAIL(&a);
  tagent_close(&a);
  tagent_close(&b);
  tagent_close(&c);
}

int main(void) {
  RUN(test_release_held);
  RUN(test_release_queued);
  RUN(test_release_drops_undelivered_grant);
  RUN(test_release_keeps_other_mail);
  RUN(test_release_drops_unavailable);
  RUN(test_release_twice);
  return 0;
}
