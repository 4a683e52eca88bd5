/* Invalid arguments: WL_EINVAL and no change to the manager. */
#include "test.h"

static void check_rejected(tagent_t *t, wl_mode_t mode, unsigned flags) {
  wl_request_t r;

  ASSERT_EQ(WL_EINVAL, wl_request(&t->agent, &r, NAME("x"), mode, flags));
  ASSERT_EQ(WL_EINVAL, wl_request(&t->agent, &r, NAME("unused"), mode, flags));
}

/* Rejected on a held name and on a new one: the holder keeps its lock, no
 * mail, no name created, nothing queued. */
static void test_rejected_changes_nothing(void) {
  static const unsigned bad_flags[] = {4, 8, 1u << 31, WL_IF_AVAILABLE | 16};
  tagent_t a, b;
  wl_request_t h;
  wl_snapshot_t snap;
  size_t i;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &h, "x", WL_EXCLUSIVE, 0);
  EXPECT_MAIL(&a, {&h, WL_EV_GRANTED});
  check_rejected(&b, WL_EXCLUSIVE, WL_STEAL | WL_IF_AVAILABLE);
  check_rejected(&b, WL_SHARED, WL_STEAL);
  check_rejected(&b, WL_SHARED, WL_STEAL | WL_IF_AVAILABLE);
  check_rejected(&b, (wl_mode_t)2, 0);
  check_rejected(&b, (wl_mode_t)-1, WL_IF_AVAILABLE);
  for (i = 0; i < sizeof(bad_flags) / sizeof(bad_flags[0]); i++)
    check_rejected(&b, WL_EXCLUSIVE, bad_flags[i]);
  ASSERT_EQ(0, b.notified);
  EXPECT_NO_MAIL(&a);
  ASSERT_EQ(1, wl__name_count(wl_process()));
  ASSERT_EQ(0, wl_snapshot(wl_process(), &snap));
  EXPECT_HELD(&snap, {NAME("x"), WL_EXCLUSIVE, ID("a")});
  ASSERT_EQ(0, snap.npending);
  wl_snapshot_free(&snap);
  ASSERT_EQ(1, wl_release(&h));
  tagent_close(&a);
  tagent_close(&b);
}

/* The memory of a rejected request can carry a valid one. */
static void test_rejected_request_reusable(void) {
  tagent_t a;
  wl_request_t r;

  tagent_init(&a, ID("a"));
  ASSERT_EQ(WL_EINVAL,
            wl_request(&a.agent, &r, NAME("x"), WL_SHARED, WL_STEAL));
  REQUEST(&a, &r, "x", WL_SHARED, 0);
  EXPECT_MAIL(&a, {&r, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&r));
  tagent_close(&a);
}

static void ignore_notify(wl_agent_t *agent) { (void)agent; }

static void test_client_id_too_long(void) {
  char id[WL_CLIENT_ID_MAX + 1];
  wl_agent_t agent;
  tagent_t t;

  memset(id, 'i', sizeof(id));
  ASSERT_EQ(WL_EINVAL, wl_agent_init(wl_process(), &agent, id, sizeof(id), ignore_notify));
  ASSERT_EQ(WL_EINVAL, wl_agent_init(wl_process(), &agent, id, (size_t)-1, ignore_notify));
  tagent_init(&t, id, WL_CLIENT_ID_MAX);
  tagent_close(&t);
}

int main(void) {
  RUN(test_rejected_changes_nothing);
  RUN(test_rejected_request_reusable);
  RUN(test_client_id_too_long);
  return 0;
}
