/* A process that holds a lock and calls exec lets go of it: the scope's
 * descriptors are close-on-exec, so the system releases its proof of life
 * (the POSIX family's fcntl lock, the Linux family's OFD lock) and the
 * Linux family's robust mutex list, and it lives on as another program,
 * never exiting while its waiters wait. The death watch notices it as a
 * death (os/posix/watch.c: NOTE_EXEC on macOS, a close of the file on
 * Linux): its waiter is granted at once, not at the next sweep. Another
 * process's close of the file (which also wakes the Linux watcher of the
 * POSIX family) is no death: the watch goes on. */
#define _GNU_SOURCE

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

#define SIZE (1 << 20)

static char path[128];

static void execer(const char *p, int in, int out) {
  wl_manager_t *m = tscope_open(p, SIZE);
  wl_agent_t a;
  wl_request_t r;
  char c;

  ASSERT_EQ(0, wl_agent_init(m, &a, ID("execer"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &r, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(1, write(out, "o", 1));
  ASSERT_EQ(1, read(in, &c, 1));
  /* Long enough to outlive the wait (tawait_grant: 5 s). */
  execl("/bin/sleep", "sleep", "10", (char *)NULL);
  _exit(1);
}

/* Opens the file and closes it, on each command: no scope, no lock. */
static void closer(const char *p, int in, int out) {
  char c = 'o';

  do {
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    ASSERT(fd >= 0);
    ASSERT_EQ(0, close(fd));
    ASSERT_EQ(1, write(out, &c, 1));
  } while (read(in, &c, 1) == 1);
  _exit(0);
}

/* Until this process's watcher has slept through 100 ms: it has taken in
 * what came before (the ring's change as the holder joined). */
static long watcher_settled(void) {
  struct timespec tick = {0, 100000000};
  long before, after = tthread_sleeps(0, "wl-watch");

  do {
    before = after;
    nanosleep(&tick, NULL);
    after = tthread_sleeps(0, "wl-watch");
  } while (after != before);
  return after;
}

static void test_exec_lets_go(void) {
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t r;
  uint64_t start;
  tchild_t c;

  tshm_path(path, sizeof(path), "watch-exec");
  tchild_run(&c, path, execer);
  ASSERT_EQ('o', tchild_do(&c, 'g'));
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("waiter"), tfifo_notify));
  ASSERT_EQ(0, wl_request(&a, &r, NAME("x"), WL_EXCLUSIVE, 0));
  start = tnow_ns();
  ASSERT_EQ(1, write(c.to, "e", 1));
  printf("  granted %.2f ms after the holder's exec\n",
         (double)(tawait_grant(&a, &r) - start) / 1e6);
  tchild_kill(&c);
  tchild_reaped(&c, 1);
  ASSERT_EQ(1, wl_release(&r));
  wl_agent_close(&a);
  wl_scope_close(m);
  tshm_remove(path);
}

/* Has k close the file once this process's watcher has settled. The
 * POSIX family's watcher wakes for it on Linux, asks for the byte, and
 * waits again (settles, not polling); the Linux family's is not woken by a
 * close. */
static void close_elsewhere(tchild_t *k) {
  long sleeps = watcher_settled();
  uint64_t until = tnow_ns() + 5000000000u;

  ASSERT_EQ('o', tchild_do(k, 'c'));
  while (WL_OS_POSIX && tthread_sleeps(0, "wl-watch") == sleeps &&
         tnow_ns() < until)
    ;
  ASSERT(!WL_OS_POSIX || tthread_sleeps(0, "wl-watch") > sleeps);
  watcher_settled();
}

static void test_close_by_another_process(void) {
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t r;
  unsigned events;
  tchild_t c, k;

  tshm_path(path, sizeof(path), "watch-exec");
  tchild_run(&c, path, execer);
  tchild_run(&k, path, closer);
  ASSERT_EQ('o', tchild_do(&c, 'g'));
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("waiter"), tfifo_notify));
  ASSERT_EQ(0, wl_request(&a, &r, NAME("x"), WL_EXCLUSIVE, 0));
  close_elsewhere(&k);
  ASSERT(wl_agent_next(&a, &events) == NULL);
  ASSERT_EQ(1, write(c.to, "e", 1));
  tawait_grant(&a, &r);
  tchild_kill(&c);
  tchild_reaped(&c, 1);
  tchild_kill(&k);
  tchild_reaped(&k, 1);
  ASSERT_EQ(1, wl_release(&r));
  wl_agent_close(&a);
  wl_scope_close(m);
  tshm_remove(path);
}

int main(void) {
  /* A watcher that never settles ends the test. */
  alarm(60);
  RUN(test_exec_lets_go);
  RUN(test_close_by_another_process);
  return 0;
}
