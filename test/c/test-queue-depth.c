/* One name with a 100k-deep queue: granted one by one in FIFO order. */
#include <stdlib.h>

#include "test.h"

#define DEPTH 100000

static wl_request_t *alloc_requests(void) {
  wl_request_t *r = malloc(DEPTH * sizeof(*r));

  ASSERT(r != NULL);
  return r;
}

/* Requests alternate between two agents; the snapshot lists the queue in
 * order and each release grants exactly the next request. */
static void test_deep_exclusive_queue(void) {
  wl_request_t *r = alloc_requests();
  tagent_t ag[2];
  wl_snapshot_t snap;
  size_t i;

  tagent_init(&ag[0], ID("even"));
  tagent_init(&ag[1], ID("odd"));
  for (i = 0; i < DEPTH; i++)
    ASSERT(wl_request(&ag[i % 2].agent, &r[i], NAME("deep"), WL_EXCLUSIVE, 0) >= 0);
  ASSERT_EQ(0, wl_snapshot(wl_process(), &snap));
  ASSERT_EQ(1, snap.nheld);
  ASSERT_EQ(DEPTH - 1, snap.npending);
  for (i = 0; i < DEPTH - 1; i++)
    ASSERT_EQ(i % 2 ? 'e' : 'o', snap.pending[i].client_id[0]);
  wl_snapshot_free(&snap);
  for (i = 0; i < DEPTH; i++) {
    EXPECT_MAIL(&ag[i % 2], {&r[i], WL_EV_GRANTED});
    EXPECT_NO_MAIL(&ag[(i + 1) % 2]);
    ASSERT_EQ(1, wl_release(&r[i]));
  }
  tagent_close(&ag[0]);
  tagent_close(&ag[1]);
  free(r);
}

/* Aborting every other queued request leaves the rest in order. */
static void test_abort_across_deep_queue(void) {
  wl_request_t *r = alloc_requests();
  tagent_t a;
  size_t i;

  tagent_init(&a, ID("a"));
  for (i = 0; i < DEPTH; i++)
    REQUEST(&a, &r[i], "deep", WL_EXCLUSIVE, 0);
  for (i = 1; i < DEPTH; i += 2)
    ASSERT_EQ(1, wl_abort(&r[i]));
  for (i = 0; i < DEPTH; i += 2) {
    EXPECT_MAIL(&a, {&r[i], WL_EV_GRANTED});
    ASSERT_EQ(1, wl_release(&r[i]));
  }
  EXPECT_NO_MAIL(&a);
  tagent_close(&a);
  free(r);
}

/* One release grants 100k queued shared requests: one notification, the
 * grants in queue order. */
static void test_deep_shared_burst(void) {
  wl_request_t *r = alloc_requests();
  tmail_t *mail = malloc(DEPTH * sizeof(*mail));
  wl_request_t e;
  tagent_t a, b;
  size_t i;

  ASSERT(mail != NULL);
  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &e, "deep", WL_EXCLUSIVE, 0);
  for (i = 0; i < DEPTH; i++)
    REQUEST(&b, &r[i], "deep", WL_SHARED, 0);
  ASSERT_EQ(0, b.notified);
  ASSERT_EQ(1, wl_release(&e));
  ASSERT_EQ(1, b.notified);
  ASSERT_EQ(DEPTH, drain(&b, mail, DEPTH));
  for (i = 0; i < DEPTH; i++)
    ASSERT(mail[i].req == &r[i] && mail[i].events == WL_EV_GRANTED);
  for (i = 0; i < DEPTH; i++)
    ASSERT_EQ(1, wl_release(&r[i]));
  tagent_close(&a);
  tagent_close(&b);
  free(mail);
  free(r);
}

int main(void) {
  RUN(test_deep_exclusive_queue);
  RUN(test_abort_across_deep_queue);
  RUN(test_deep_shared_burst);
  return 0;
}
