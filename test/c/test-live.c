/* Proof of life: a process killed with SIGKILL while it holds a lock of a
 * machine-wide manager, or in the middle of an algorithm, or from another pid
 * namespace, has its agents ended by the next sweep, and the requests that
 * waited behind its locks are granted, in order. */
#define _GNU_SOURCE

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#define SIZE (1 << 20)

static char path[128];

/* Forks a child (in a new pid namespace if asked) that holds x and y, says
 * so on `ready`, then either waits to be killed or, told to go on `go`,
 * releases x with a fault point armed and dies at that point. */
static pid_t holder(int ready[2], int go[2], const char *point, int new_pid_ns,
                    pid_t *victim) {
  int pids[2];
  pid_t pid;

  ASSERT_EQ(0, pipe(pids));
  pid = fork();
  ASSERT(pid >= 0);
  if (pid != 0) {
    *victim = pid;
    if (new_pid_ns)
      ASSERT_EQ(sizeof(*victim), read(pids[0], victim, sizeof(*victim)));
    close(pids[0]);
    close(pids[1]);
    return pid;
  }
  if (new_pid_ns)
    tpidns_enter(pids[1]);
  {
    wl_manager_t *m = tscope_open(path, SIZE);
    wl_agent_t c;
    wl_request_t x, y;
    ASSERT_EQ(0, wl_agent_init(m, &c, "holder", 6, tignore_notify));
    ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&c, &x, NAME("x"), WL_EXCLUSIVE, 0));
    ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&c, &y, NAME("y"), WL_SHARED, 0));
    ASSERT_EQ(1, write(ready[1], "h", 1));
    if (point != NULL) {
      char byte;
      ASSERT_EQ(1, read(go[0], &byte, 1));
      tkill_at(point);
      wl_release(&x);
    }
    for (;;)
      pause();
  }
}

static void expect_granted_after_death(const char *point, int new_pid_ns) {
  int ready[2], go[2], status;
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t x1, x2, y;
  unsigned events;
  char byte;
  pid_t pid, victim;

  tshm_path(path, sizeof(path), "live");
  ASSERT_EQ(0, pipe(ready));
  ASSERT_EQ(0, pipe(go));
  pid = holder(ready, go, point, new_pid_ns, &victim);
  /* Only the holder writes ready: a holder that fails ends the read. */
  close(ready[1]);
  close(go[0]);
  ASSERT_EQ(1, read(ready[0], &byte, 1));
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, "waiter", 6, tignore_notify));
  ASSERT_EQ(0, wl_request(&a, &x1, NAME("x"), WL_SHARED, 0));
  ASSERT_EQ(0, wl_request(&a, &y, NAME("y"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_request(&a, &x2, NAME("x"), WL_SHARED, 0));
  ASSERT(wl_agent_next(&a, &events) == NULL);
  if (point != NULL)
    ASSERT_EQ(1, write(go[1], "r", 1));
  else
    ASSERT_EQ(0, kill(victim, SIGKILL));
  ASSERT_EQ(pid, waitpid(pid, &status, 0));
  if (!new_pid_ns)
    ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ASSERT_EQ(0, wl_sweep(m));
  /* Its locks are released in the order it was granted them: x, then y. */
  ASSERT(wl_agent_next(&a, &events) == &x1 && events == WL_EV_GRANTED);
  ASSERT(wl_agent_next(&a, &events) == &x2 && events == WL_EV_GRANTED);
  ASSERT(wl_agent_next(&a, &events) == &y && events == WL_EV_GRANTED);
  ASSERT(wl_agent_next(&a, &events) == NULL);
  ASSERT_EQ(0, wl__check(m));
  ASSERT_EQ(1, wl_release(&x1));
  ASSERT_EQ(1, wl_release(&x2));
  ASSERT_EQ(1, wl_release(&y));
  ASSERT_EQ(0, wl__name_count(m));
  wl_agent_close(&a);
  wl_scope_close(m);
  close(ready[0]);
  close(go[1]);
  unlink(path);
}

static void test_killed_holder(void) { expect_granted_after_death(NULL, 0); }

static void test_killed_inside_an_algorithm(void) {
  expect_granted_after_death("end", 0);
}

static void test_killed_in_another_pid_namespace(void) {
  if (geteuid() != 0) {
    printf("  skipped: making a pid namespace needs root\n");
    return;
  }
  expect_granted_after_death(NULL, 1);
}

int main(void) {
  RUN(test_killed_holder);
  RUN(test_killed_inside_an_algorithm);
  RUN(test_killed_in_another_pid_namespace);
  return 0;
}
