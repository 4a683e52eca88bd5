/* notify: called once each time a mailbox goes from empty to non-empty. */
#include "test.h"

static void test_one_notify_per_burst(void) {
  tagent_t a;
  wl_request_t r1, r2, r3, r4;

  tagent_init(&a, ID("a"));
  REQUEST(&a, &r1, "x", WL_EXCLUSIVE, 0);
  REQUEST(&a, &r2, "y", WL_SHARED, 0);
  REQUEST(&a, &r3, "y", WL_EXCLUSIVE, WL_IF_AVAILABLE);
  ASSERT_EQ(1, a.notified);
  EXPECT_MAIL(&a, {&r1, WL_EV_GRANTED}, {&r2, WL_EV_GRANTED},
              {&r3, WL_EV_UNAVAILABLE});
  ASSERT_EQ(1, a.notified);
  REQUEST(&a, &r4, "z", WL_EXCLUSIVE, 0);
  ASSERT_EQ(2, a.notified);
  EXPECT_MAIL(&a, {&r4, WL_EV_GRANTED});
  tagent_close(&a);
}

/* Once the mailbox has been emptied, the next event notifies again. */
static void test_event_after_empty_notifies(void) {
  tagent_t a;
  wl_request_t r1, r2;
  unsigned events;

  tagent_init(&a, ID("a"));
  REQUEST(&a, &r1, "x", WL_EXCLUSIVE, 0);
  ASSERT(wl_agent_next(&a.agent, &events) == &r1);
  ASSERT_EQ(WL_EV_GRANTED, events);
  ASSERT_EQ(1, a.notified);
  REQUEST(&a, &r2, "y", WL_EXCLUSIVE, 0);
  ASSERT_EQ(2, a.notified);
  EXPECT_MAIL(&a, {&r2, WL_EV_GRANTED});
  tagent_close(&a);
}

/* An event that arrives while a drain is under way and mail is left does
 * not notify, and is delivered after that mail, in order. */
static void test_event_during_drain_keeps_order(void) {
  tagent_t a;
  wl_request_t r1, r2, r3;
  unsigned events;

  tagent_init(&a, ID("a"));
  REQUEST(&a, &r1, "x", WL_EXCLUSIVE, 0);
  REQUEST(&a, &r2, "y", WL_EXCLUSIVE, 0);
  ASSERT(wl_agent_next(&a.agent, &events) == &r1);
  REQUEST(&a, &r3, "z", WL_EXCLUSIVE, 0);
  ASSERT_EQ(1, a.notified);
  EXPECT_MAIL(&a, {&r2, WL_EV_GRANTED}, {&r3, WL_EV_GRANTED});
  tagent_close(&a);
}

/* A steal of a lock whose grant is not yet delivered joins that entry: no
 * new notification, both events together. */
static void test_event_joins_undelivered_entry(void) {
  tagent_t a, b;
  wl_request_t h, t;
  unsigned events;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &h, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &t, "x", WL_EXCLUSIVE, WL_STEAL);
  ASSERT_EQ(1, a.notified);
  ASSERT(wl_agent_next(&a.agent, &events) == &h);
  ASSERT_EQ(WL_EV_GRANTED | WL_EV_STOLEN, events);
  ASSERT(wl_agent_next(&a.agent, &events) == NULL);
  ASSERT_EQ(0, wl_release(&h));
  ASSERT_EQ(1, wl_release(&t));
  tagent_close(&a);
  tagent_close(&b);
}

/* A later event for a request already in the mailbox keeps its place. */
static void test_event_keeps_mail_order(void) {
  tagent_t a, b;
  wl_request_t r1, r2, t;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &r1, "x", WL_EXCLUSIVE, 0);
  REQUEST(&a, &r2, "y", WL_EXCLUSIVE, 0);
  REQUEST(&b, &t, "x", WL_EXCLUSIVE, WL_STEAL);
  ASSERT_EQ(1, a.notified);
  EXPECT_MAIL(&a, {&r1, WL_EV_GRANTED | WL_EV_STOLEN}, {&r2, WL_EV_GRANTED});
  tagent_close(&a);
  tagent_close(&b);
}

/* When a release drops the only mail, the mailbox is empty again and the
 * next event notifies. */
static void test_notify_after_mail_dropped(void) {
  tagent_t a;
  wl_request_t r1, r2;

  tagent_init(&a, ID("a"));
  REQUEST(&a, &r1, "x", WL_EXCLUSIVE, 0);
  ASSERT_EQ(1, wl_release(&r1));
  REQUEST(&a, &r2, "x", WL_EXCLUSIVE, 0);
  ASSERT_EQ(2, a.notified);
  EXPECT_MAIL(&a, {&r2, WL_EV_GRANTED});
  tagent_close(&a);
}

/* Only the agent that gets mail is notified, whoever causes it. */
static void test_only_recipient_notified(void) {
  tagent_t a, b, c;
  wl_request_t h, wb, wc;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  tagent_init(&c, ID("c"));
  REQUEST(&a, &h, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &wb, "x", WL_EXCLUSIVE, 0);
  REQUEST(&c, &wc, "x", WL_EXCLUSIVE, 0);
  ASSERT_EQ(0, b.notified);
  ASSERT_EQ(1, wl_release(&h));
  ASSERT_EQ(1, a.notified);
  ASSERT_EQ(1, b.notified);
  ASSERT_EQ(0, c.notified);
  EXPECT_MAIL(&b, {&wb, WL_EV_GRANTED});
  tagent_close(&a);
  tagent_close(&b);
  tagent_close(&c);
}

int main(void) {
  RUN(test_one_notify_per_burst);
  RUN(test_event_after_empty_notifies);
  RUN(test_event_during_drain_keeps_order);
  RUN(test_event_joins_undelivered_entry);
  RUN(test_event_keeps_mail_order);
  RUN(test_notify_after_mail_dropped);
  RUN(test_only_recipient_notified);
  return 0;
}
