/* Wake-ups across processes: an agent of a shared manager sleeps in poll()
 * on its wake descriptor, and a release in another process wakes it with
 * its grant in the mailbox. */
#define _GNU_SOURCE

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#define SIZE (1 << 20)

static char path[128];

/* One agent's wait: queued behind the parent, asleep until woken. Returns
 * its record's offset. */
static wl_off_t wait_once(wl_manager_t *m, int queued) {
  wl_agent_t a;
  wl_request_t r;
  unsigned events;
  struct pollfd p;
  wl_off_t off;

  ASSERT_EQ(0, wl_agent_init(m, &a, ID("waiter"), tignore_notify));
  ASSERT(wl_agent_wake_fd(&a) >= 0);
  ASSERT_EQ(0, wl_request(&a, &r, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT(wl_agent_next(&a, &events) == NULL);
  ASSERT_EQ(1, write(queued, "q", 1));
  p.fd = wl_agent_wake_fd(&a);
  p.events = POLLIN;
  ASSERT_EQ(1, poll(&p, 1, 10000));
  wl_agent_woken(&a);
  ASSERT(wl_agent_next(&a, &events) == &r);
  ASSERT_EQ(WL_EV_GRANTED, events);
  /* Drained: the descriptor is quiet again. */
  ASSERT_EQ(0, poll(&p, 1, 0));
  ASSERT_EQ(1, wl_release(&r));
  off = a.off;
  wl_agent_close(&a);
  return off;
}

/* The waiting side, each time the parent holds or has queued for x: twice,
 * with a new agent at the same offset the second time, whose FIFO is a new
 * one: the parent's open write end of the first fails and it finds the
 * second by name. */
static void waiter(int go, int queued) {
  wl_manager_t *m;
  wl_off_t first;
  char byte;

  ASSERT_EQ(1, read(go, &byte, 1));
  m = tsegment_open(path, SIZE);
  first = wait_once(m, queued);
  ASSERT_EQ(1, read(go, &byte, 1));
  ASSERT_EQ(first, wait_once(m, queued));
  wl_segment_close(m);
  _exit(0);
}

static void test_release_wakes_another_process(void) {
  wl_manager_t *m;
  wl_agent_t h;
  wl_request_t x;
  int go[2], queued[2], status;
  char byte;
  pid_t pid;

  tshm_path(path, sizeof(path), "wake");
  /* Forked before this process has threads: TSan cannot follow a child
   * that starts threads after a fork of a process with threads. */
  ASSERT_EQ(0, pipe(go));
  ASSERT_EQ(0, pipe(queued));
  pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    close(go[1]);
    close(queued[0]);
    waiter(go[0], queued[1]);
  }
  /* Only the child writes `queued`: if it dies, reads see end of file. */
  close(go[0]);
  close(queued[1]);
  m = tsegment_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &h, ID("holder"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&h, &x, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(1, write(go[1], "g", 1));
  ASSERT_EQ(1, read(queued[0], &byte, 1));
  ASSERT_EQ(1, wl_release(&x));
  /* Queued behind the waiter's grant (or granted, if it has released
   * already) before the waiter's second agent queues. */
  ASSERT(wl_request(&h, &x, NAME("x"), WL_EXCLUSIVE, 0) >= 0);
  ASSERT_EQ(1, write(go[1], "g", 1));
  ASSERT_EQ(1, read(queued[0], &byte, 1));
  ASSERT_EQ(1, wl_release(&x));
  ASSERT_EQ(pid, waitpid(pid, &status, 0));
  ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  wl_agent_close(&h);
  wl_segment_close(m);
  close(go[1]);
  close(queued[0]);
  unlink(path);
}

/* The process-wide manager's agents have no wake descriptor. */
static void test_local_agents_have_none(void) {
  tagent_t a;

  tagent_init(&a, ID("local"));
  ASSERT_EQ(-1, wl_agent_wake_fd(&a.agent));
  tagent_close(&a);
}

int main(void) {
  RUN(test_release_wakes_another_process);
  RUN(test_local_agents_have_none);
  return 0;
}
