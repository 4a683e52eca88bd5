/* Prompt notice of a death: a process killed with SIGKILL while it holds a
 * lock has the requests waiting behind it granted in another process,
 * without anyone calling wl_sweep or opening the manager again, however
 * much memory it had (its OFD lock is released only once that memory is
 * torn down, about 100 ms per GiB; its watcher's robust futex before). */
#define _GNU_SOURCE

#include <signal.h>
#include <unistd.h>

#include "test.h"

#define SIZE (1 << 20)

static char path[128];

/* Kills a child that holds x while this process waits for x; returns the
 * milliseconds from the kill to the grant. */
static double kill_and_wait(tchild_t *c) {
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t r;
  unsigned events;
  uint64_t killed, granted;

  ASSERT_EQ('o', tchild_do(c, 'o'));
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("waiter"), tfifo_notify));
  ASSERT_EQ(0, wl_request(&a, &r, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT(wl_agent_next(&a, &events) == NULL);
  killed = tchild_kill(c);
  granted = tawait_grant(&a, &r);
  tchild_reap(c);
  ASSERT_EQ(0, wl__check(m));
  ASSERT_EQ(1, wl_release(&r));
  wl_agent_close(&a);
  wl_scope_close(m);
  unlink(path);
  return (double)(granted - killed) / 1e6;
}

static void test_killed_holder(void) {
  tchild_t c;

  tshm_path(path, sizeof(path), "death");
  tchild_fork(&c, path, SIZE, "x", 0, NULL);
  printf("  granted %.2f ms after the kill\n", kill_and_wait(&c));
}

static void test_killed_holder_of_1_gib(void) {
  tchild_t c;
  double ms;

  tshm_path(path, sizeof(path), "death-big");
  tchild_fork(&c, path, SIZE, "x", 0, NULL);
  if (tchild_do(&c, 'b') != 'b') {
    printf("  skipped: 1 GiB cannot be allocated\n");
    kill(c.pid, SIGKILL);
    tchild_reap(&c);
    return;
  }
  ms = kill_and_wait(&c);
  /* Granted at all (no one sweeps; tawait_grant fails after 5 s). How soon
   * is printed, not asserted: a bound flakes on a loaded machine (1 s did,
   * under TSan). The OFD lock alone takes about 100 ms here. */
  printf("  granted %.2f ms after the kill of a process of 1 GiB\n", ms);
}

/* A watcher's TID in another pid namespace is the one the kernel compares
 * there. */
static void test_killed_in_another_pid_namespace(void) {
  tchild_t c;

  if (geteuid() != 0) {
    printf("  skipped: making a pid namespace needs root\n");
    return;
  }
  tshm_path(path, sizeof(path), "death-ns");
  tchild_fork(&c, path, SIZE, "x", TCHILD_NEW_PID_NS, NULL);
  printf("  granted %.2f ms after the kill\n", kill_and_wait(&c));
}

int main(void) {
  RUN(test_killed_holder);
  RUN(test_killed_holder_of_1_gib);
  RUN(test_killed_in_another_pid_namespace);
  return 0;
}
