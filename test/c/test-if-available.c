/* ifAvailable: granted only when grantable at once, otherwise UNAVAILABLE
 * with nothing queued. */
#include "test.h"

static void test_granted_when_name_unused(void) {
  tagent_t a, b;
  wl_request_t r, w;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &r, "x", WL_EXCLUSIVE, WL_IF_AVAILABLE);
  EXPECT_MAIL(&a, {&r, WL_EV_GRANTED});
  REQUEST(&b, &w, "x", WL_EXCLUSIVE, 0);
  EXPECT_NO_MAIL(&b);
  ASSERT_EQ(1, wl_release(&r));
  EXPECT_MAIL(&b, {&w, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&w));
  tagent_close(&a);
  tagent_close(&b);
}

static void test_granted_beside_shared(void) {
  tagent_t a, b;
  wl_request_t s1, s2;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &s1, "x", WL_SHARED, 0);
  REQUEST(&b, &s2, "x", WL_SHARED, WL_IF_AVAILABLE);
  EXPECT_MAIL(&a, {&s1, WL_EV_GRANTED});
  EXPECT_MAIL(&b, {&s2, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&s1));
  ASSERT_EQ(1, wl_release(&s2));
  tagent_close(&a);
  tagent_close(&b);
}

/* Checks that `mode` ifAvailable is refused on a name held in `held`, that
 * nothing is queued, and that the later release grants nothing to it. */
static void check_unavailable(wl_mode_t held, wl_mode_t mode) {
  tagent_t a, b;
  wl_request_t h, r;
  wl_snapshot_t snap;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &h, "x", held, 0);
  REQUEST(&b, &r, "x", mode, WL_IF_AVAILABLE);
  ASSERT_EQ(1, b.notified);
  EXPECT_MAIL(&b, {&r, WL_EV_UNAVAILABLE});
  ASSERT_EQ(0, wl_snapshot(wl_process(), &snap));
  ASSERT_EQ(1, snap.nheld);
  ASSERT_EQ(0, snap.npending);
  wl_snapshot_free(&snap);
  ASSERT_EQ(1, wl_release(&h));
  ASSERT_EQ(0, wl__name_count(wl_process()));
  EXPECT_NO_MAIL(&b);
  ASSERT_EQ(1, b.notified);
  tagent_close(&a);
  tagent_close(&b);
}

static void test_unavailable_when_held(void) {
  check_unavailable(WL_EXCLUSIVE, WL_EXCLUSIVE);
  check_unavailable(WL_EXCLUSIVE, WL_SHARED);
  check_unavailable(WL_SHARED, WL_EXCLUSIVE);
}

/* A shared ifAvailable request compatible with the holders is refused when
 * another request is queued, and the queue is left as it was. */
static void test_unavailable_when_queue_not_empty(void) {
  tagent_t a, b, c;
  wl_request_t s1, e, s2;
  wl_snapshot_t snap;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  tagent_init(&c, ID("c"));
  REQUEST(&a, &s1, "x", WL_SHARED, 0);
  REQUEST(&b, &e, "x", WL_EXCLUSIVE, 0);
  REQUEST(&c, &s2, "x", WL_SHARED, WL_IF_AVAILABLE);
  EXPECT_MAIL(&c, {&s2, WL_EV_UNAVAILABLE});
  ASSERT_EQ(0, wl_snapshot(wl_process(), &snap));
  EXPECT_HELD(&snap, {NAME("x"), WL_SHARED, ID("a")});
  EXPECT_PENDING(&snap, {NAME("x"), WL_EXCLUSIVE, ID("b")});
  wl_snapshot_free(&snap);
  ASSERT_EQ(1, wl_release(&s1));
  EXPECT_MAIL(&b, {&e, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&e));
  EXPECT_NO_MAIL(&c);
  tagent_close(&a);
  tagent_close(&b);
  tagent_close(&c);
}

static void test_unavailable_for_own_lock(void) {
  tagent_t a;
  wl_request_t h, r;

  tagent_init(&a, ID("a"));
  REQUEST(&a, &h, "x", WL_EXCLUSIVE, 0);
  REQUEST(&a, &r, "x", WL_EXCLUSIVE, WL_IF_AVAILABLE);
  EXPECT_MAIL(&a, {&h, WL_EV_GRANTED}, {&r, WL_EV_UNAVAILABLE});
  ASSERT_EQ(1, wl_release(&h));
  tagent_close(&a);
}

/* Once UNAVAILABLE is delivered the request is over: abort and release find
 * nothing, and its memory can carry a new request at once. */
static void test_unavailable_request_is_done(void) {
  tagent_t a, b;
  wl_request_t h, r;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &h, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &r, "x", WL_EXCLUSIVE, WL_IF_AVAILABLE);
  EXPECT_MAIL(&b, {&r, WL_EV_UNAVAILABLE});
  ASSERT_EQ(0, wl_abort(&r));
  ASSERT_EQ(0, wl_release(&r));
  REQUEST(&b, &r, "x", WL_EXCLUSIVE, 0);
  EXPECT_NO_MAIL(&b);
  ASSERT_EQ(1, wl_release(&h));
  EXPECT_MAIL(&b, {&r, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&r));
  tagent_close(&a);
  tagent_close(&b);
}

int main(void) {
  RUN(test_granted_when_name_unused);
  RUN(test_granted_beside_shared);
  RUN(test_unavailable_when_held);
  RUN(test_unavailable_when_queue_not_empty);
  RUN(test_unavailable_for_own_lock);
  RUN(test_unavailable_request_is_done);
  return 0;
}
