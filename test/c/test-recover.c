/* Crash safety of a machine-wide manager: a process killed (SIGKILL) at a named
 * point inside an algorithm, holding the manager's robust mutex, leaves a
 * state that the next process to take the mutex repairs: every list and
 * counter agrees with the records again, and the survivor goes on. */
#define _GNU_SOURCE

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#define SIZE (1 << 20)

static char path[128];

/* The child's work: it passes every named point. */
static void child_work(void) {
  wl_manager_t *m = tscope_open(path, SIZE);
  wl_agent_t c;
  wl_request_t q, z, s, u;

  ASSERT_EQ(0, wl_agent_init(m, &c, "child", 5, tignore_notify));
  ASSERT_EQ(0, wl_request(&c, &q, NAME("x"), WL_SHARED, 0));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&c, &z, NAME("z"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(1, wl_abort(&q));
  ASSERT_EQ(WL_GRANTED_AT_ONCE,
            wl_request(&c, &s, NAME("x"), WL_EXCLUSIVE, WL_STEAL));
  ASSERT_EQ(0, wl_request(&c, &u, NAME("y"), WL_EXCLUSIVE, WL_IF_AVAILABLE));
  ASSERT_EQ(1, wl_release(&z));
  ASSERT_EQ(1, wl_release(&s));
  wl_agent_close(&c);
  _exit(0);
}

static void crash_at(const char *point) {
  wl_manager_t *m;
  wl_agent_t p;
  wl_request_t x, y, w;
  wl_snapshot_t snap;
  int go[2], status;
  char byte;
  pid_t pid;

  tshm_path(path, sizeof(path), "recover");
  /* Forked before this process has threads (TSan cannot follow a child
   * that starts threads after a fork of a process with threads); it starts
   * when this one holds its locks. */
  ASSERT_EQ(0, pipe(go));
  pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    ASSERT_EQ(1, read(go[0], &byte, 1));
    tkill_at(point);
    child_work();
  }
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &p, "parent", 6, tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&p, &x, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&p, &y, NAME("y"), WL_SHARED, 0));
  ASSERT_EQ(1, write(go[1], "g", 1));
  ASSERT_EQ(pid, waitpid(pid, &status, 0));
  close(go[0]);
  close(go[1]);
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
    fprintf(stderr, "the child was not killed at '%s'\n", point);
    ASSERT(0);
  }
  /* The next lock finds EOWNERDEAD and repairs the state. */
  ASSERT(wl_request(&p, &w, NAME("w"), WL_EXCLUSIVE, 0) >= 0);
  if (wl__check(m) != 0) {
    fprintf(stderr, "after a crash at '%s'\n", point);
    ASSERT(0);
  }
  ASSERT_EQ(0, wl_snapshot(m, &snap));
  ASSERT(snap.nheld >= 2);
  wl_snapshot_free(&snap);
  wl_release(&x);
  ASSERT_EQ(1, wl_release(&y));
  ASSERT_EQ(1, wl_release(&w));
  ASSERT_EQ(0, wl__check(m));
  wl_agent_close(&p);
  ASSERT_EQ(0, wl__check(m));
  wl_scope_close(m);
  unlink(path);
  printf("  recovered after a crash at '%s'\n", point);
}

static void test_crash_at_every_point(void) {
  static const char *points[] = {"alloc",          "free",          "hold",
                                 "unhold",         "steal",         "end",
                                 "mail",
                                 "request-alloc",  "request-name",  "request-queued",
                                 "request-stole",  "ring"};
  size_t i;

  for (i = 0; i < sizeof(points) / sizeof(points[0]); i++)
    crash_at(points[i]);
}

/* A process that joins and holds "x" when told, then releases it, dying
 * at "end": after the lock is let go, before the queue behind it is
 * processed, which the repair does. */
static void hold_then_die_at_end(const char *p, int in, int out) {
  wl_manager_t *m = tscope_open(p, SIZE);
  wl_agent_t a;
  wl_request_t x;
  char cmd;

  ASSERT_EQ(0, wl_agent_init(m, &a, ID("first"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &x, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(1, write(out, "o", 1));
  ASSERT_EQ(1, read(in, &cmd, 1));
  tkill_at("end");
  wl_release(&x);
  _exit(1);
}

/* A process that joins and waits for "x", dying at "hold", as the repair
 * it makes after the first one's crash grants it: in the middle of it. */
static void wait_then_die_in_repair(const char *p, int in, int out) {
  wl_manager_t *m = tscope_open(p, SIZE);
  wl_agent_t a;
  wl_request_t x;
  char cmd;

  ASSERT_EQ(0, wl_agent_init(m, &a, ID("second"), tignore_notify));
  ASSERT_EQ(0, wl_request(&a, &x, NAME("x"), WL_EXCLUSIVE, 0));
  tkill_at("hold");
  ASSERT_EQ(1, write(out, "o", 1));
  /* Its sweeper, woken by the first one's death, repairs: killed there. */
  ASSERT_EQ(0, read(in, &cmd, 1));
  _exit(1);
}

/* A process killed in the middle of a repair leaves the mutex to the next,
 * which repairs again from the same records. */
static void test_crash_in_the_repair(void) {
  tchild_t first, second;
  wl_manager_t *m;
  wl_agent_t p;
  wl_request_t x;
  wl_snapshot_t snap;

  tshm_path(path, sizeof(path), "recover-twice");
  tchild_run(&first, path, hold_then_die_at_end);
  tchild_run(&second, path, wait_then_die_in_repair);
  ASSERT_EQ('o', tchild_do(&first, 's'));
  ASSERT_EQ('o', tchild_do(&second, 's'));
  ASSERT_EQ(0, tchild_do(&first, 'k'));
  tchild_reaped(&first, 1);
  alarm(30); /* the second one's death, or this test's */
  tchild_reaped(&second, 1);
  alarm(0);
  /* Opening takes the mutex: the repair is made again, then both agents
   * end. */
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl__check(m));
  ASSERT_EQ(0, wl_snapshot(m, &snap));
  ASSERT_EQ(0, snap.nheld + snap.npending);
  wl_snapshot_free(&snap);
  ASSERT_EQ(0, wl_agent_init(m, &p, ID("third"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&p, &x, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(1, wl_release(&x));
  wl_agent_close(&p);
  wl_scope_close(m);
  tshm_remove(path);
}

int main(void) {
  RUN(test_crash_at_every_point);
  RUN(test_crash_in_the_repair);
  return 0;
}
