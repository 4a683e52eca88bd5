/* How long after a process holding a lock is killed (SIGKILL) another
 * process's request waiting behind it is granted, with nobody calling
 * wl_sweep, against the process's own end (when waitpid reaps it: its
 * memory torn down and its files closed, which is when the lock that proves
 * it alive is released). On Linux the death watch is the watcher threads'
 * robust futex, marked before the memory goes; in the POSIX family a
 * pidfd (kqueue on macOS), readable once the process has exited. For a
 * small victim and one that has touched 1 GiB.
 *
 *   make -C bench/c            # builds build/death and runs it
 *   make -C bench/c posix      # the same on the POSIX family
 *   bench/c/build/death [runs] # 30 runs per size by default
 */
#define _GNU_SOURCE

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "wl.h"

#define SIZE (1 << 20)

static char path[64];

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void fail(const char *what) {
  fprintf(stderr, "death: %s\n", what);
  exit(1);
}

/* Grants made by this process's own sweeper reach the agent here. */
static void notify(wl_agent_t *agent) {
  if (write(wl_agent_wake_fd(agent), "n", 1) < 0)
    return;
}

static wl_manager_t *open_manager(void) {
  char err[256];
  wl_manager_t *m;
  if (wl_scope_open(path, SIZE, 0600, &m, err, sizeof(err)) != 0)
    fail(err);
  return m;
}

/* Touches `bytes`, holds x, says so, and waits to be killed. */
static void victim(size_t bytes, int ready) {
  static const uint16_t x[] = {'x'};
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t r;
  char *mem = bytes ? malloc(bytes) : NULL;

  if (bytes && mem == NULL)
    _exit(2);
  if (bytes)
    memset(mem, 1, bytes);
  m = open_manager();
  if (wl_agent_init(m, &a, "victim", 6, notify) != 0 ||
      wl_request(&a, &r, x, 1, WL_EXCLUSIVE, 0) != WL_GRANTED_AT_ONCE ||
      write(ready, "r", 1) != 1)
    _exit(3);
  for (;;)
    pause();
}

/* One run: the milliseconds from the kill to the grant and to the reap. */
static int run(size_t bytes, double *grant, double *reap) {
  static const uint16_t x[] = {'x'};
  int ready[2], status;
  struct pollfd p;
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t r, *got;
  unsigned events;
  double t0;
  char byte;
  pid_t pid;

  if (pipe(ready) != 0)
    fail("pipe");
  /* Forked while this process has no threads; it opens its own handle. */
  pid = fork();
  if (pid < 0)
    fail("fork");
  if (pid == 0)
    victim(bytes, ready[1]);
  close(ready[1]);
  if (read(ready[0], &byte, 1) != 1) {
    close(ready[0]);
    waitpid(pid, &status, 0);
    return -1;
  }
  close(ready[0]);
  m = open_manager();
  if (wl_agent_init(m, &a, "waiter", 6, notify) != 0 ||
      wl_request(&a, &r, x, 1, WL_EXCLUSIVE, 0) != 0)
    fail("queueing behind the victim");
  p.fd = wl_agent_wake_fd(&a);
  p.events = POLLIN;
  t0 = now_ms();
  kill(pid, SIGKILL);
  for (got = NULL; got == NULL;) {
    if (poll(&p, 1, 10000) != 1)
      fail("no grant within 10 s");
    wl_agent_woken(&a);
    got = wl_agent_next(&a, &events);
  }
  *grant = now_ms() - t0;
  waitpid(pid, &status, 0);
  *reap = now_ms() - t0;
  if (got != &r || events != WL_EV_GRANTED || wl_release(&r) != 1)
    fail("an unexpected event");
  wl_agent_close(&a);
  wl_scope_close(m);
  return 0;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The nearest-rank percentile of n sorted values. */
static double pct(const double *v, int n, int p) {
  int i = (p * n + 99) / 100 - 1;
  return v[i < 0 ? 0 : i];
}

static void series(const char *what, size_t bytes, int runs) {
  double *grant = calloc(runs, sizeof(double)), *reap = calloc(runs, sizeof(double));
  int i;

  if (grant == NULL || reap == NULL)
    fail("out of memory");
  for (i = 0; i < runs; i++) {
    if (run(bytes, &grant[i], &reap[i]) != 0) {
      printf("%-14s skipped: the victim could not allocate its memory\n", what);
      goto done;
    }
  }
  qsort(grant, runs, sizeof(double), by_value);
  qsort(reap, runs, sizeof(double), by_value);
  printf("%-14s %4d runs   grant p50 %7.2f ms  p99 %7.2f ms   "
         "reaped p50 %7.2f ms  p99 %7.2f ms\n",
         what, runs, pct(grant, runs, 50), pct(grant, runs, 99),
         pct(reap, runs, 50), pct(reap, runs, 99));
done:
  free(grant);
  free(reap);
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 30;

  if (runs < 1)
    fail("usage: death [runs]");
  snprintf(path, sizeof(path), "/dev/shm/wl-death-%d", (int)getpid());
  unlink(path);
  series("small victim", 0, runs);
  series("1 GiB victim", (size_t)1 << 30, runs);
  unlink(path);
  return 0;
}
