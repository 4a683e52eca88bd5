/* Owners watch each other in a ring, mended by every change of membership:
 * a death anywhere in it is noticed (by another child or by this process)
 * without a call to wl_sweep, after clean closes too, and two neighbours
 * killed at once are both swept. Each child holds its own name, on which
 * this process waits. */
#define _GNU_SOURCE

#include <unistd.h>

#include "test.h"

#define SIZE (1 << 20)
#define N 4

static char path[128];

typedef struct {
  tchild_t c[N];
  char names[N][3];
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t r[N];
} ring_t;

static void request(ring_t *g, int i) {
  uint16_t units[2] = {(uint16_t)g->names[i][0], (uint16_t)g->names[i][1]};
  ASSERT_EQ(0, wl_request(&g->a, &g->r[i], units, 2, WL_EXCLUSIVE, 0));
}

/* This process opens first, then children 0..n-1, each holding "c<i>" as
 * this one waits for it: the ring runs this, c0, c1, ..., back to this. */
static void ring_open(ring_t *g, int n) {
  int i;

  tshm_path(path, sizeof(path), "ring");
  for (i = 0; i < n; i++) {
    g->names[i][0] = 'c';
    g->names[i][1] = (char)('0' + i);
    g->names[i][2] = 0;
    tchild_fork(&g->c[i], path, SIZE, g->names[i], 0, NULL);
  }
  g->m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(g->m, &g->a, ID("parent"), tfifo_notify));
  for (i = 0; i < n; i++) {
    ASSERT_EQ('o', tchild_do(&g->c[i], 'o'));
    request(g, i);
  }
  ASSERT_EQ(0, wl__check(g->m));
}

static void granted(ring_t *g, int i) {
  ASSERT_EQ(1, wl_release(&g->r[i]));
  ASSERT_EQ(0, wl__check(g->m));
}

static void kill_one(ring_t *g, int i) {
  tchild_kill(&g->c[i]);
  tawait_grant(&g->a, &g->r[i]);
  tchild_reap(&g->c[i]);
  granted(g, i);
}

static void close_one(ring_t *g, int i) {
  tchild_close(&g->c[i]);
  tawait_grant(&g->a, &g->r[i]);
  tchild_reap(&g->c[i]);
  granted(g, i);
}

static void ring_close(ring_t *g) {
  wl_agent_close(&g->a);
  wl_scope_close(g->m);
  unlink(path);
}

/* c1 is noticed by c0, c3 by c2, c0 by this process. */
static void test_each_death_noticed(void) {
  ring_t g;

  ring_open(&g, 4);
  kill_one(&g, 1);
  kill_one(&g, 3);
  kill_one(&g, 0);
  close_one(&g, 2);
  ring_close(&g);
}

/* c1 leaves cleanly: c0 then watches c2. */
static void test_clean_close_keeps_the_ring(void) {
  ring_t g;

  ring_open(&g, 3);
  close_one(&g, 1);
  kill_one(&g, 2);
  kill_one(&g, 0);
  ring_close(&g);
}

/* c2's watcher (c1) dies with it. */
static void test_two_neighbours_at_once(void) {
  wl_request_t *both[2];
  ring_t g;

  ring_open(&g, 4);
  both[0] = &g.r[1];
  both[1] = &g.r[2];
  tchild_kill(&g.c[1]);
  tchild_kill(&g.c[2]);
  tawait_grants(&g.a, both, 2);
  tchild_reap(&g.c[1]);
  tchild_reap(&g.c[2]);
  granted(&g, 1);
  granted(&g, 2);
  kill_one(&g, 3);
  close_one(&g, 0);
  ring_close(&g);
}

int main(void) {
  RUN(test_each_death_noticed);
  RUN(test_clean_close_keeps_the_ring);
  RUN(test_two_neighbours_at_once);
  return 0;
}
