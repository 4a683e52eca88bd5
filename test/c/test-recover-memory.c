/* The repair after a crash works in memory of its own, reserved when the
 * scope is opened (core/recover.c), so that a process that can get no more
 * memory when it finds a crash still repairs, and the scope is not corrupt
 * for want of it. The repairing process here is this program again, run
 * with its sanitizer's allocator refusing any allocation over 1 MiB
 * (returning NULL, as malloc does under a limit on memory), on a region of
 * 80000 blocks, whose repair works on more than that. */
#define _GNU_SOURCE

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#define SIZE (16 << 20)
#define LOCKS 40000

static char path[128];
static wl_request_t held[LOCKS];

/* Joins, and when told, takes the mutex and dies holding it. */
static void lock_and_die(const char *p, int in, int out) {
  wl_manager_t *m = tscope_open(p, SIZE);
  char cmd;

  ASSERT_EQ(1, write(out, "o", 1));
  ASSERT_EQ(1, read(in, &cmd, 1));
  ASSERT_EQ(0, wl__lock(m));
  raise(SIGKILL);
}

/* The process with no memory to spare: opening the scope repairs it. */
static int repair(const char *p) {
  wl_manager_t *m = tscope_open(p, SIZE);
  wl_agent_t a;
  wl_request_t r;

  ASSERT_EQ(0, wl_agent_init(m, &a, ID("repairer"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &r, NAME("after"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(1, wl_release(&r));
  ASSERT_EQ(0, wl__check(m));
  wl_agent_close(&a);
  wl_scope_close(m);
  return 0;
}

/* Sets NAME to its value with `more` appended. */
static void append_env(const char *name, const char *more) {
  const char *was = getenv(name);
  char value[512];

  snprintf(value, sizeof(value), "%s%s%s", was != NULL ? was : "",
           was != NULL && was[0] != '\0' ? ":" : "", more);
  ASSERT_EQ(0, setenv(name, value, 1));
}

static void test_repair_with_no_memory_to_spare(void) {
  tchild_t dier;
  wl_manager_t *m;
  wl_agent_t p;
  uint16_t units[2];
  int i, status;
  pid_t pid;

  tshm_path(path, sizeof(path), "recover-memory");
  tchild_run(&dier, path, lock_and_die);
  m = tscope_open(path, SIZE);
  ASSERT_EQ('o', tchild_do(&dier, 's'));
  /* Two blocks a lock; released, they stay blocks, free. */
  ASSERT_EQ(0, wl_agent_init(m, &p, ID("filler"), tignore_notify));
  for (i = 0; i < LOCKS; i++) {
    units[0] = (uint16_t)(0x100 + i % 0x4000);
    units[1] = (uint16_t)(0x100 + i / 0x4000);
    ASSERT_EQ(WL_GRANTED_AT_ONCE,
              wl_request(&p, &held[i], units, 2, WL_EXCLUSIVE, 0));
  }
  for (i = 0; i < LOCKS; i++)
    ASSERT_EQ(1, wl_release(&held[i]));
  wl_agent_close(&p);
  wl_scope_close(m);
  /* No process has the scope open but the one that dies in it. */
  ASSERT_EQ(0, tchild_do(&dier, 'k'));
  tchild_reaped(&dier, 1);
  fflush(stdout);
  pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    append_env("ASAN_OPTIONS", "allocator_may_return_null=1:max_allocation_size_mb=1");
    append_env("TSAN_OPTIONS", "allocator_may_return_null=1:max_allocation_size_mb=1");
    execl("/proc/self/exe", "test-recover-memory", "--repair", path,
          (char *)NULL);
    _exit(127);
  }
  ASSERT_EQ(pid, waitpid(pid, &status, 0));
  ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  tshm_remove(path);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--repair") == 0)
    return repair(argv[2]);
  RUN(test_repair_with_no_memory_to_spare);
  return 0;
}
