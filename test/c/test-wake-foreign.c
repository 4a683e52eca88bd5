/* A wake-up number read from scope A's file is formatted into the name
 * "<A>.<16 hex digits>" (os/unix/wake.c), which whoever may write A's file
 * can make name any file beside it: another scope's file B (scope
 * "A.0000000000000001"), or a hard link to it, made before the wake-up or
 * swapped in for a FIFO while it is being opened. Waking must drop none of
 * this process's locks on B: in the POSIX family, closing any descriptor of
 * B drops them all (os/posix/posix.h point 3), its mutex's byte while a
 * thread holds it and its owners' proof of life; the Linux family's OFD
 * locks and robust mutex are not dropped that way, and the test shows the
 * same there. Another process checks: it opens B, sweeps, and asks for the
 * lock that this process's agent of B holds; in the POSIX family it also
 * tests B's mutex byte. */
#define _GNU_SOURCE

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "../../src/os/posix/posix.h"

#define SIZE (1 << 20)

static char path[128], b_path[160], link_path[192], link_new[200];
static pthread_t swapper;  /* the thread whose open is raced */
static int armed, swapped; /* armed: atomic, read by every thread */

#if WL_OS_POSIX
/* Whether a process other than this one holds B's mutex byte. */
static int mutex_held(void) {
  int fd = open(b_path, O_RDWR), held;
  struct flock fl;

  ASSERT(fd >= 0);
  memset(&fl, 0, sizeof(fl));
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = WL__MUTEX_AT;
  fl.l_len = 1;
  ASSERT_EQ(0, fcntl(fd, F_GETLK, &fl));
  held = fl.l_type != F_UNLCK;
  close(fd);
  return held;
}
#endif

/* Whether another process holds "x" of B (the sweep first ends the agents
 * of owners whose proof of life is gone). */
static int x_held(void) {
  wl_manager_t *m = tscope_open(b_path, SIZE);
  wl_agent_t a;
  wl_request_t r;
  int rc;

  ASSERT(wl_sweep(m) >= 0);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("checker"), tignore_notify));
  rc = wl_request(&a, &r, NAME("x"), WL_EXCLUSIVE, WL_IF_AVAILABLE);
  ASSERT(rc >= 0);
  wl_release(&r);
  wl_agent_close(&a);
  wl_scope_close(m);
  return rc != WL_GRANTED_AT_ONCE;
}

/* 'm': B's mutex byte (the POSIX family's only), 'x': B's lock "x"; 'H'
 * held, 'F' free. */
static void checker(const char *p, int in, int out) {
  char cmd = 0, answer = 'o';

  (void)p;
  do {
    ASSERT_EQ(1, write(out, &answer, 1));
    if (read(in, &cmd, 1) != 1)
      _exit(0);
#if WL_OS_POSIX
    answer = (cmd == 'm' ? mutex_held() : x_held()) ? 'H' : 'F';
#else
    answer = x_held() ? 'H' : 'F';
#endif
  } while (1);
}

/* Opens A and B, holds "x" of B and (POSIX family) B's mutex, has A wake
 * the number 1, and checks that B's locks are still held. */
static void wake_one_and_check(void) {
  wl_manager_t *a, *b;
  wl_agent_t victim;
  wl_request_t r;
  tchild_t k;

  tchild_run(&k, path, checker);
  ASSERT_EQ('o', tchild_do(&k, 'o'));
  a = tscope_open(path, SIZE);
  b = tscope_open(b_path, SIZE);
  ASSERT_EQ(0, wl_agent_init(b, &victim, ID("victim"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE,
            wl_request(&victim, &r, NAME("x"), WL_EXCLUSIVE, 0));
#if WL_OS_POSIX
  ASSERT_EQ(0, wl__os_file_mutex_lock(b));
  ASSERT_EQ('H', tchild_do(&k, 'm'));
#endif
  if (link_path[0] != '\0')
    ASSERT_EQ(0, link(b_path, link_path));
  /* What waking an agent of A whose record's wake-up number is 1 does. */
  wl__os_wake(a, 0, 1);
#if WL_OS_POSIX
  ASSERT_EQ('H', tchild_do(&k, 'm'));
  wl__os_file_mutex_unlock(b);
#endif
  /* A file with two names is no scope's for the checker to open. */
  if (link_path[0] != '\0')
    ASSERT_EQ(0, unlink(link_path));
  ASSERT_EQ('H', tchild_do(&k, 'x'));
  ASSERT_EQ(1, wl_release(&r));
  wl_agent_close(&victim);
  wl_scope_close(b);
  wl_scope_close(a);
  tchild_kill(&k);
  tchild_reaped(&k, 1);
  tshm_remove(b_path);
  tshm_remove(path);
}

static void test_number_names_another_scope(void) {
  tshm_path(path, sizeof(path), "wake-foreign");
  snprintf(b_path, sizeof(b_path), "%s.0000000000000001", path);
  link_path[0] = '\0';
  wake_one_and_check();
}

static void test_number_names_a_hard_link(void) {
  tshm_path(path, sizeof(path), "wake-foreign");
  snprintf(b_path, sizeof(b_path), "%s-b", path);
  tshm_remove(b_path);
  snprintf(link_path, sizeof(link_path), "%s.0000000000000001", path);
  wake_one_and_check();
}

/* Between the look at the name and its open, the FIFO at it becomes a
 * hard link to B, once, in the test's thread while armed (not in the
 * managers' own threads, which open FIFOs of their own). */
static void swap_at_open(const char *point) {
  if (strcmp(point, "fifo-open") != 0 ||
      !__atomic_load_n(&armed, __ATOMIC_SEQ_CST) ||
      !pthread_equal(pthread_self(), swapper) || swapped)
    return;
  ASSERT_EQ(0, link(b_path, link_new));
  ASSERT_EQ(0, rename(link_new, link_path));
  swapped = 1;
}

static void test_fifo_swapped_for_a_hard_link(void) {
  void (*hook)(const char *) = wl__fault_hook;
  wl_manager_t *a, *b;
  wl_agent_t victim;
  wl_request_t r;
  tchild_t k;

  tshm_path(path, sizeof(path), "wake-foreign");
  snprintf(b_path, sizeof(b_path), "%s-b", path);
  tshm_remove(b_path);
  snprintf(link_path, sizeof(link_path), "%s.0000000000000001", path);
  snprintf(link_new, sizeof(link_new), "%s-new", link_path);
  tchild_run(&k, path, checker);
  ASSERT_EQ('o', tchild_do(&k, 'o'));
  /* Set after the fork (the checker runs the hook of its own) and before
   * the managers start their threads, which run it. */
  swapper = pthread_self();
  wl__fault_hook = swap_at_open;
  a = tscope_open(path, SIZE);
  b = tscope_open(b_path, SIZE);
  ASSERT_EQ(0, wl_agent_init(b, &victim, ID("victim"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE,
            wl_request(&victim, &r, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, mkfifo(link_path, 0600));
  __atomic_store_n(&armed, 1, __ATOMIC_SEQ_CST);
  wl__os_wake(a, 0, 1);
  __atomic_store_n(&armed, 0, __ATOMIC_SEQ_CST);
  ASSERT(swapped);
  ASSERT_EQ(0, unlink(link_path));
  ASSERT_EQ('H', tchild_do(&k, 'x'));
  ASSERT_EQ(1, wl_release(&r));
  wl_agent_close(&victim);
  wl_scope_close(b);
  wl_scope_close(a);
  wl__fault_hook = hook;
  tchild_kill(&k);
  tchild_reaped(&k, 1);
  tshm_remove(b_path);
  tshm_remove(path);
}

int main(void) {
  /* A checker that never answers ends the test. */
  alarm(60);
  RUN(test_number_names_another_scope);
  RUN(test_number_names_a_hard_link);
  RUN(test_fifo_swapped_for_a_hard_link);
  return 0;
}
