/* The harness behind test.h. */
#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

void (*wl__fault_hook)(const char *point);

/* Read by whichever thread passes a fault point (a sweeper's too). */
static const char *armed;

void tkill_at(const char *point) {
  __atomic_store_n(&armed, point, __ATOMIC_SEQ_CST);
}

static void kill_here(const char *point) {
  const char *at = __atomic_load_n(&armed, __ATOMIC_SEQ_CST);
  if (at != NULL && strcmp(point, at) == 0)
    raise(SIGKILL);
}

/* And, as Node does, ignore SIGPIPE: a wake-up written to the FIFO of an
 * agent that is gone fails with EPIPE (os/unix/wake.c). */
__attribute__((constructor)) static void install_fault_hook(void) {
  wl__fault_hook = kill_here;
  signal(SIGPIPE, SIG_IGN);
}

void tpidns_enter(int fd) {
  pid_t inner;
  int status;

  ASSERT_EQ(0, unshare(CLONE_NEWPID));
  inner = fork();
  ASSERT(inner >= 0);
  if (inner != 0) {
    /* This process stays outside and says its child's pid. */
    ASSERT_EQ(sizeof(inner), write(fd, &inner, sizeof(inner)));
    waitpid(inner, &status, 0);
    _exit(0);
  }
  ASSERT_EQ(1, getpid());
}

void tshm_path(char *buf, size_t len, const char *what) {
  snprintf(buf, len, "/dev/shm/wl-%s-%d", what, (int)getpid());
  tshm_remove(buf);
}

void tshm_remove(const char *path) {
  const char *base = strrchr(path, '/') + 1;
  size_t len = strlen(base);
  char beside[512];
  struct dirent *e;
  DIR *dir = opendir("/dev/shm");

  unlink(path);
  if (dir == NULL)
    return;
  while ((e = readdir(dir)) != NULL) {
    if (strncmp(e->d_name, base, len) == 0 && e->d_name[len] == '.') {
      snprintf(beside, sizeof(beside), "/dev/shm/%s", e->d_name);
      unlink(beside);
    }
  }
  closedir(dir);
}

wl_manager_t *tscope_open(const char *path, uint64_t size) {
  char err[512];
  wl_manager_t *m = NULL;
  int rc = wl_scope_open(path, size, 0600, &m, err, sizeof(err));
  if (rc != 0)
    fprintf(stderr, "wl_scope_open: %d: %s\n", rc, err);
  ASSERT_EQ(0, rc);
  return m;
}

void tignore_notify(wl_agent_t *agent) { (void)agent; }

void tfifo_notify(wl_agent_t *agent) {
  /* EAGAIN: a byte is pending already. */
  if (write(wl_agent_wake_fd(agent), "n", 1) < 0)
    return;
}

#define GIB ((size_t)1 << 30)

/* Mapped rather than malloc'd: a sanitizer's allocator would abort, not
 * fail, when there is not enough memory. */
static char tchild_touch(void) {
  char *p = mmap(NULL, GIB, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return 'n';
  memset(p, 1, GIB);
  return 'b'; /* kept until the child dies */
}

static _Noreturn void tchild_main(const char *path, uint64_t size,
                                  const char *name, int in, int out) {
  wl_manager_t *m = NULL;
  wl_agent_t a;
  wl_request_t r;
  uint16_t units[64];
  size_t len = strlen(name), i;
  char cmd, answer;

  ASSERT(len <= 64);
  for (i = 0; i < len; i++)
    units[i] = (uint16_t)name[i];
  while (read(in, &cmd, 1) == 1) {
    answer = cmd;
    if (cmd == 'b') {
      answer = tchild_touch();
    } else if (cmd == 'o') {
      m = tscope_open(path, size);
      ASSERT_EQ(0, wl_agent_init(m, &a, ID("child"), tignore_notify));
      ASSERT_EQ(WL_GRANTED_AT_ONCE,
                wl_request(&a, &r, units, len, WL_EXCLUSIVE, 0));
    } else if (cmd == 'R') {
      tkill_at("ring");
    } else if (cmd == 'c') {
      ASSERT_EQ(1, wl_release(&r));
      wl_agent_close(&a);
      wl_scope_close(m);
      ASSERT_EQ(1, write(out, &answer, 1));
      _exit(0);
    }
    ASSERT_EQ(1, write(out, &answer, 1));
  }
  _exit(0);
}

/* Forks with a pipe each way: 1 in the child, with *in and *out its ends;
 * 0 here, with c's. */
static int tchild__fork(tchild_t *c, int *in, int *out) {
  int to[2], from[2];

  fflush(stdout);
  ASSERT_EQ(0, pipe(to));
  ASSERT_EQ(0, pipe(from));
  c->reap = fork();
  ASSERT(c->reap >= 0);
  if (c->reap == 0) {
    close(to[1]);
    close(from[0]);
    *in = to[0];
    *out = from[1];
    return 1;
  }
  close(to[0]);
  close(from[1]);
  c->to = to[1];
  c->from = from[0];
  c->pid = c->reap;
  return 0;
}

void tchild_fork(tchild_t *c, const char *path, uint64_t size,
                 const char *name, int flags, void (*prepare)(void)) {
  int in, out;

  if (tchild__fork(c, &in, &out)) {
    if (flags & TCHILD_NEW_PID_NS)
      tpidns_enter(out);
    if (prepare != NULL)
      prepare();
    tchild_main(path, size, name, in, out);
  }
  if (flags & TCHILD_NEW_PID_NS)
    ASSERT_EQ(sizeof(c->pid), read(c->from, &c->pid, sizeof(c->pid)));
}

void tchild_run(tchild_t *c, const char *path,
                void (*fn)(const char *path, int in, int out)) {
  int in, out;
  char byte;

  if (tchild__fork(c, &in, &out)) {
    ASSERT_EQ(1, read(in, &byte, 1));
    fn(path, in, out);
    _exit(0);
  }
}

char tchild_do(tchild_t *c, char cmd) {
  char answer;

  ASSERT_EQ(1, write(c->to, &cmd, 1));
  return read(c->from, &answer, 1) == 1 ? answer : 0;
}

uint64_t tchild_kill(tchild_t *c) {
  uint64_t t = tnow_ns();

  ASSERT_EQ(0, kill(c->pid, SIGKILL));
  return t;
}

void tchild_close(tchild_t *c) { ASSERT_EQ('c', tchild_do(c, 'c')); }

int tchild_reap(tchild_t *c) {
  int status;

  ASSERT_EQ(c->reap, waitpid(c->reap, &status, 0));
  close(c->to);
  close(c->from);
  c->pid = c->reap = -1;
  return status;
}

void tchild_reaped(tchild_t *c, int killed) {
  int status = tchild_reap(c);

  if (killed)
    ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  else
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

#if TDENY
#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#else
#define ARCH AUDIT_ARCH_AARCH64
#endif

void tdeny(long nr) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};

  ASSERT_EQ(0, prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
  ASSERT_EQ(0, prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog));
}
#endif

uint64_t tnow_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t tawait_grants(wl_agent_t *agent, wl_request_t *const *r, size_t n) {
  struct pollfd p = {wl_agent_wake_fd(agent), POLLIN, 0};
  uint64_t deadline = tnow_ns() + 5000000000u, now = 0;
  wl_request_t *got;
  unsigned events;
  size_t granted = 0, i;

  while (granted < n) {
    now = tnow_ns();
    if (now >= deadline || poll(&p, 1, (int)((deadline - now) / 1000000)) == 0) {
      fflush(stdout);
      fprintf(stderr, "%zu of %zu grants within 5 s\n", granted, n);
      _Exit(1);
    }
    now = tnow_ns();
    wl_agent_woken(agent);
    while ((got = wl_agent_next(agent, &events)) != NULL) {
      for (i = 0; i < n && r[i] != got; i++)
        ;
      ASSERT(i < n);
      ASSERT_EQ(WL_EV_GRANTED, events);
      granted++;
    }
  }
  return now;
}

uint64_t tawait_grant(wl_agent_t *agent, wl_request_t *r) {
  return tawait_grants(agent, &r, 1);
}

/* A file of a task (/proc/.../task/<tid>/<what>) into buf. */
static int task_read(const char *dir, const char *tid, const char *what,
                     char *buf, size_t len) {
  char file[300];
  size_t n;
  FILE *f;

  snprintf(file, sizeof(file), "%s/%s/%s", dir, tid, what);
  if ((f = fopen(file, "r")) == NULL)
    return -1;
  n = fread(buf, 1, len - 1, f);
  fclose(f);
  buf[n] = 0;
  return 0;
}

/* utime and stime, fields 14 and 15 of its stat, after its name. */
static long task_ticks(const char *dir, const char *tid) {
  unsigned long utime, stime;
  char buf[512], *at;

  if (task_read(dir, tid, "stat", buf, sizeof(buf)) != 0 ||
      (at = strrchr(buf, ')')) == NULL ||
      sscanf(at + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
             &utime, &stime) != 2)
    return -1;
  return (long)(utime + stime);
}

static long task_sleeps(const char *dir, const char *tid) {
  char buf[4096], *at;

  if (task_read(dir, tid, "status", buf, sizeof(buf)) != 0 ||
      (at = strstr(buf, "\nvoluntary_ctxt_switches:")) == NULL)
    return -1;
  return strtol(at + strlen("\nvoluntary_ctxt_switches:"), NULL, 10);
}

/* The sum of `count` over the threads of pid named comm, or -1. */
static long threads_sum(pid_t pid, const char *comm,
                        long (*count)(const char *, const char *)) {
  char dir[64], name[64];
  struct dirent *e;
  long total = -1, n;
  size_t len = strlen(comm);
  DIR *d;

  if (pid == 0)
    snprintf(dir, sizeof(dir), "/proc/self/task");
  else
    snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
  ASSERT((d = opendir(dir)) != NULL);
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' ||
        task_read(dir, e->d_name, "comm", name, sizeof(name)) != 0 ||
        strncmp(name, comm, len) != 0 || name[len] != '\n' ||
        (n = count(dir, e->d_name)) < 0)
      continue;
    total = total < 0 ? n : total + n;
  }
  closedir(d);
  return total;
}

long tthread_ticks(pid_t pid, const char *comm) {
  return threads_sum(pid, comm, task_ticks);
}

long tthread_sleeps(pid_t pid, const char *comm) {
  return threads_sum(pid, comm, task_sleeps);
}
