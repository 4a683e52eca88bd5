/* A corrupt or hostile manager file: offsets, lengths and counts in it that
 * point outside the region, or lists that loop, make the operation that
 * meets them end with WL_ECORRUPT (and the handle refuse every later one),
 * never a stray memory access (this runs under ASan) or a hang. */
#define _GNU_SOURCE

#include <unistd.h>

#include "test.h"

#define SIZE (1 << 20)

static char path[128];

/* The first record of a kind, found by walking the blocks. */
static wl_off_t find(wl_manager_t *m, uint32_t kind) {
  wl__hdr_t *h = WL__HDR(m);
  wl_off_t at = (sizeof(*h) + 15) & ~(uint64_t)15;

  while (at < h->used) {
    wl__block_t *b = (wl__block_t *)(m->base + at);
    if (b->kind == kind)
      return at + sizeof(*b);
    at += (uint64_t)1 << (b->cls + WL__MIN_SHIFT);
  }
  ASSERT(0);
  return 0;
}

typedef void (*corrupt_fn)(wl_manager_t *m);

static void far_queue_link(wl_manager_t *m) {
  wl__name_t *n = (wl__name_t *)(m->base + find(m, WL__NAME));
  n->queue.next = (uint64_t)1 << 40;
}

static void far_agent(wl_manager_t *m) {
  ((wl__req_t *)(m->base + find(m, WL__REQUEST)))->agent = SIZE * 4;
}

static void long_client_id(wl_manager_t *m) {
  ((wl__agent_t *)(m->base + find(m, WL__AGENT)))->client_id_len = 5000;
}

static void bad_bucket_count(wl_manager_t *m) { WL__HDR(m)->nbuckets = 3; }

static void long_name(wl_manager_t *m) {
  ((wl__name_t *)(m->base + find(m, WL__NAME)))->len = UINT32_MAX;
}

/* The name's queue loops on its first request forever. */
static void looping_queue(wl_manager_t *m) {
  wl_off_t n = find(m, WL__NAME), q = n + offsetof(wl__name_t, queue);
  wl__link_t *head = (wl__link_t *)(m->base + q);
  wl__link_t *first = (wl__link_t *)(m->base + head->next);
  first->next = head->next;
  first->prev = head->next;
}

static void far_free_list(wl_manager_t *m) {
  int c;
  for (c = 0; c < WL__NCLASSES; c++)
    WL__HDR(m)->free[c] = SIZE * 8;
}

/* Holds x, queues another request on it, corrupts the file through one
 * handle, then works through another. */
static void expect_corrupt_after(const char *what, corrupt_fn corruption) {
  wl_manager_t *m1, *m2;
  wl_agent_t a, b;
  wl_request_t h, w, v;
  wl_snapshot_t snap;
  int rc[4];

  tshm_path(path, sizeof(path), "corruption");
  m1 = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m1, &a, ID("a"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &h, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_request(&a, &w, NAME("x"), WL_EXCLUSIVE, 0));
  m2 = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m2, &b, ID("b"), tignore_notify));
  corruption(m1);
  rc[0] = wl_snapshot(m2, &snap);
  if (rc[0] == 0)
    wl_snapshot_free(&snap);
  rc[1] = wl_request(&b, &v, NAME("x"), WL_SHARED, 0);
  rc[2] = wl_request(&b, &v, NAME("y"), WL_SHARED, 0);
  rc[3] = wl_release(&h);
  if (rc[0] != WL_ECORRUPT && rc[1] != WL_ECORRUPT && rc[2] != WL_ECORRUPT &&
      rc[3] != WL_ECORRUPT) {
    fprintf(stderr, "%s: no operation reported the corruption (%d %d %d %d)\n",
            what, rc[0], rc[1], rc[2], rc[3]);
    ASSERT(0);
  }
  /* Once corrupt, a handle refuses everything. */
  ASSERT_EQ(WL_ECORRUPT, wl_request(&b, &v, NAME("z"), WL_SHARED, 0));
  printf("  %s: reported\n", what);
  wl_agent_close(&a);
  wl_agent_close(&b);
  wl_scope_close(m1);
  wl_scope_close(m2);
  unlink(path);
}

static void test_corrupt_files(void) {
  expect_corrupt_after("a queue link far outside the region", far_queue_link);
  expect_corrupt_after("a request's agent outside the region", far_agent);
  expect_corrupt_after("a client id longer than its record", long_client_id);
  expect_corrupt_after("a bucket count that is not a power of two",
                       bad_bucket_count);
  expect_corrupt_after("a name longer than the region", long_name);
  expect_corrupt_after("a queue that loops", looping_queue);
  expect_corrupt_after("free lists outside the region", far_free_list);
}

int main(void) {
  RUN(test_corrupt_files);
  return 0;
}
