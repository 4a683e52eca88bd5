/* A process killed inside ring maintenance (the fault point "ring"), holding
 * the manager's mutex: the next process to take the mutex recovers a ring in
 * which every owner watches the next one again, and deaths are noticed as
 * before, without a call to wl_sweep. */
#define _GNU_SOURCE

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#define SIZE (1 << 20)

static char path[128];

static wl_off_t watch_of(wl_manager_t *m, wl_off_t at) {
  wl__owner_t *o = (wl__owner_t *)(m->base + wl__record_of(at, wl__owner_t, link));
  return __atomic_load_n(&o->watch, __ATOMIC_SEQ_CST);
}

/* The ring runs this process, d, then c, which dies joining it after its
 * own watch is set and before d's is: nobody watches c, d still watches
 * this process, and the mutex stays dead until this process takes it. */
static void test_killed_joining_the_ring(void) {
  tchild_t c, d;
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t r;
  wl_off_t owners, lc, ld;

  tshm_path(path, sizeof(path), "fault-join");
  tchild_fork(&c, path, SIZE, "c", 0, NULL);
  tchild_fork(&d, path, SIZE, "d", 0, NULL);
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("waiter"), tfifo_notify));
  ASSERT_EQ('o', tchild_do(&d, 'o'));
  ASSERT_EQ('R', tchild_do(&c, 'R'));
  ASSERT_EQ(0, tchild_do(&c, 'o')); /* killed before it answers */
  tchild_reaped(&c, 1);
  /* Read without the mutex, whose holder died: c and d both watch this
   * process. */
  owners = wl__off_of(m, &WL__HDR(m)->owners);
  lc = WL__LINK(m, owners)->prev;
  ld = WL__LINK(m, lc)->prev;
  ASSERT_EQ(m->self, watch_of(m, lc));
  ASSERT_EQ(m->self, watch_of(m, ld));
  ASSERT_EQ(0, wl__check(m));
  ASSERT_EQ(0, wl_request(&a, &r, NAME("d"), WL_EXCLUSIVE, 0));
  tchild_kill(&d);
  tawait_grant(&a, &r);
  tchild_reap(&d);
  ASSERT_EQ(1, wl_release(&r));
  ASSERT_EQ(0, wl__check(m));
  wl_agent_close(&a);
  wl_scope_close(m);
  unlink(path);
}

/* The ring runs this process, c0, c1. c1 is killed; c0 notices, sweeps,
 * ends c1's agent (granting c1's name here) and dies mending the ring,
 * holding the mutex; this process, watching c0, notices, recovers and
 * sweeps c0, granting c0's name here. */
static void test_sweeper_killed_mending_the_ring(void) {
  wl_request_t r[2], *both[2] = {&r[0], &r[1]};
  tchild_t c[2];
  wl_manager_t *m;
  wl_agent_t a;

  tshm_path(path, sizeof(path), "fault-sweep");
  tchild_fork(&c[0], path, SIZE, "c0", 0, NULL);
  tchild_fork(&c[1], path, SIZE, "c1", 0, NULL);
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("waiter"), tfifo_notify));
  ASSERT_EQ('o', tchild_do(&c[0], 'o'));
  ASSERT_EQ('o', tchild_do(&c[1], 'o'));
  ASSERT_EQ(0, wl_request(&a, &r[0], NAME("c0"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_request(&a, &r[1], NAME("c1"), WL_EXCLUSIVE, 0));
  ASSERT_EQ('R', tchild_do(&c[0], 'R'));
  tchild_kill(&c[1]);
  tawait_grants(&a, both, 2);
  tchild_reaped(&c[0], 1);
  tchild_reaped(&c[1], 1);
  ASSERT_EQ(0, wl__check(m));
  ASSERT_EQ(1, wl_release(&r[0]));
  ASSERT_EQ(1, wl_release(&r[1]));
  wl_agent_close(&a);
  wl_scope_close(m);
  unlink(path);
}

int main(void) {
  RUN(test_killed_joining_the_ring);
  RUN(test_sweeper_killed_mending_the_ring);
  return 0;
}
