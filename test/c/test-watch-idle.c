/* The watcher and sweeper threads use no CPU while nothing dies: over an
 * idle window they neither run nor wake, armed on a target or not, before
 * and after a death. On a kernel without the system call that its watcher
 * waits for a death with (here: a seccomp filter that says ENOSYS to
 * futex_waitv on Linux, to pidfd_open in the POSIX family) the watcher
 * waits on its bell only: still idle, its process's death still noticed by
 * others, and the deaths it watched found by a sweep. */
#define _GNU_SOURCE

#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

/* As in os/linux/watch.c and os/posix/watch.c: libc headers may not name
 * them (musl 1.2.3). */
#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#if WL_OS_POSIX
#define SYS_DEATH_WAIT SYS_pidfd_open
#else
#define SYS_DEATH_WAIT SYS_futex_waitv
#endif

#define SIZE (1 << 20)

static char path[128];

/* Neither thread of process pid runs nor wakes for 300 ms, once the
 * wake-ups of what came before (a bell rung by a change of the ring) are
 * over: 200 ms is ample for those. */
static void expect_idle(pid_t pid) {
  static const char *names[] = {"wl-watch", "wl-sweep"};
  struct timespec settle = {0, 200000000}, window = {0, 300000000};
  long ticks[2], sleeps[2];
  int i;

  nanosleep(&settle, NULL);
  for (i = 0; i < 2; i++) {
    ticks[i] = tthread_ticks(pid, names[i]);
    sleeps[i] = tthread_sleeps(pid, names[i]);
    ASSERT(ticks[i] >= 0 && sleeps[i] >= 0);
  }
  nanosleep(&window, NULL); /* a window to measure, not to wait for */
  for (i = 0; i < 2; i++) {
    long t = tthread_ticks(pid, names[i]), s = tthread_sleeps(pid, names[i]);
    if (t - ticks[i] > 1 || s != sleeps[i]) {
      fprintf(stderr, "%s of %d: %ld ticks, %ld wake-ups in 300 ms\n",
              names[i], (int)pid, t - ticks[i], s - sleeps[i]);
      ASSERT(0);
    }
  }
}

static void test_idle_threads_use_no_cpu(void) {
  tchild_t c[2];
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t r;

  tshm_path(path, sizeof(path), "idle");
  tchild_fork(&c[0], path, SIZE, "x", 0, NULL);
  tchild_fork(&c[1], path, SIZE, "y", 0, NULL);
  m = tscope_open(path, SIZE);
  expect_idle(0); /* alone: watching none */
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("waiter"), tfifo_notify));
  ASSERT_EQ('o', tchild_do(&c[0], 'o'));
  ASSERT_EQ('o', tchild_do(&c[1], 'o'));
  ASSERT_EQ(0, wl_request(&a, &r, NAME("x"), WL_EXCLUSIVE, 0));
  expect_idle(0); /* each watching another */
  expect_idle(c[0].pid);
  tchild_kill(&c[0]);
  tawait_grant(&a, &r);
  tchild_reap(&c[0]);
  expect_idle(0); /* after a death */
  expect_idle(c[1].pid);
  ASSERT_EQ(1, wl_release(&r));
  tchild_close(&c[1]);
  tchild_reap(&c[1]);
  wl_agent_close(&a);
  wl_scope_close(m);
  unlink(path);
}

#if TDENY
static void without_death_wait(void) { tdeny(SYS_DEATH_WAIT); }

/* The ring: this process, then s (no futex_waitv, or no pidfd_open), then
 * c: s watches c. */
static void test_without_death_wait(void) {
  struct timespec window = {0, 300000000};
  tchild_t s, c;
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t rs, rc;
  unsigned events;

  tshm_path(path, sizeof(path), "idle-old");
  tchild_fork(&s, path, SIZE, "s", 0, without_death_wait);
  tchild_fork(&c, path, SIZE, "c", 0, NULL);
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("waiter"), tfifo_notify));
  ASSERT_EQ('o', tchild_do(&s, 'o'));
  ASSERT_EQ('o', tchild_do(&c, 'o'));
  ASSERT_EQ(0, wl_request(&a, &rs, NAME("s"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_request(&a, &rc, NAME("c"), WL_EXCLUSIVE, 0));
  expect_idle(s.pid);
  /* Only s watches c, and s cannot: c's death waits for a sweep. */
  tchild_kill(&c);
  tchild_reap(&c);
  nanosleep(&window, NULL); /* time for a grant that must not come */
  ASSERT(wl_agent_next(&a, &events) == NULL);
  ASSERT_EQ(0, wl_sweep(m));
  tawait_grant(&a, &rc);
  ASSERT_EQ(1, wl_release(&rc));
  expect_idle(s.pid);
  /* This process watches s. */
  tchild_kill(&s);
  tawait_grant(&a, &rs);
  tchild_reap(&s);
  ASSERT_EQ(1, wl_release(&rs));
  ASSERT_EQ(0, wl__check(m));
  wl_agent_close(&a);
  wl_scope_close(m);
  unlink(path);
}
#else
static void test_without_death_wait(void) {
  printf("  skipped: no seccomp filter for this platform\n");
}
#endif

int main(void) {
  RUN(test_idle_threads_use_no_cpu);
  RUN(test_without_death_wait);
  return 0;
}
