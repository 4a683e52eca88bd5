/* The POSIX family's own mechanism (os/posix/posix.h), attacked where its
 * assumptions could break: a process killed at each step of taking and
 * giving back the mutex; a repair that a third process waits behind, done
 * or cut short; threads of one process through two handles of one file;
 * descriptors of the file closed by this layer (kept) and by someone else
 * (the locks are lost: what the design assumes away); and a pid reused
 * while the death watch names it; and two processes each with two scopes,
 * whose threads the system's deadlock check takes for a cycle. Built for
 * the POSIX flavours only (Makefile). */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "../../src/os/posix/posix.h"

#define SIZE (1 << 20)

static char path[128];

static char code_of(int rc) {
  return rc == 0                ? '0'
         : rc == WL__EOWNERDEAD ? 'D'
         : rc == WL_ECORRUPT    ? 'C'
                                : '?';
}

/* A child with a handle of its own on the file (opened on its first
 * command, answered 'o'), that takes and gives back the mutex when told,
 * answering each command with a letter:
 *   'l' takes it: '0', 'D' (WL__EOWNERDEAD), 'C' (WL_ECORRUPT);
 *   'c' marks it consistent; 'u' gives it back;
 *   'L', 'H' take it, and 'F', 'B' give it back, dying at "mutex-locked",
 *   "mutex-held", "mutex-freed", "mutex-broken";
 *   'k' dies at once (SIGKILL); 'q' closes its handle and exits.
 * A quiet one stops its sweeper once open, so that a holder's death is
 * repaired by the test's takers only, when told. */
static void run_taker(const char *p, int in, int out, int quiet) {
  static const char *points[] = {"L", "mutex-locked", "H", "mutex-held",
                                 "F", "mutex-freed",  "B", "mutex-broken"};
  wl_manager_t *m = tscope_open(p, SIZE);
  char cmd, answer = 'o';
  size_t i;

  if (quiet)
    wl__os_watch_stop_sweeper(m);
  do {
    ASSERT_EQ(1, write(out, &answer, 1));
    if (read(in, &cmd, 1) != 1)
      _exit(0);
    for (i = 0; i < sizeof(points) / sizeof(points[0]); i += 2) {
      if (cmd == points[i][0])
        tkill_at(points[i + 1]);
    }
    answer = cmd;
    if (cmd == 'l' || cmd == 'L' || cmd == 'H')
      answer = code_of(wl__os_file_mutex_lock(m));
    else if (cmd == 'c')
      wl__os_file_mutex_consistent(m);
    else if (cmd == 'u' || cmd == 'F' || cmd == 'B')
      wl__os_file_mutex_unlock(m);
    else if (cmd == 'k')
      raise(SIGKILL);
    else if (cmd == 'q')
      wl_scope_close(m);
  } while (cmd != 'q' && cmd != 'L' && cmd != 'H' && cmd != 'F' && cmd != 'B');
  if (cmd != 'q')
    _exit(1); /* not killed at its point */
  ASSERT_EQ(1, write(out, &answer, 1));
  _exit(0);
}

/* Has a taker close its handle and exit. */
static void quit(tchild_t *c) {
  ASSERT_EQ('q', tchild_do(c, 'q'));
  tchild_reaped(c, 0);
}

static void taker(const char *p, int in, int out) {
  run_taker(p, in, out, 0);
}

static void quiet_taker(const char *p, int in, int out) {
  run_taker(p, in, out, 1);
}

static void start(tchild_t *c, void (*fn)(const char *, int, int)) {
  tchild_run(c, path, fn);
  ASSERT_EQ('o', tchild_do(c, 'o'));
}

/* Dies at its point: the answer never comes. */
static void dies(tchild_t *c, char cmd) {
  ASSERT_EQ(0, tchild_do(c, cmd));
  tchild_reaped(c, 1);
}

/* This process opens the scope: it must find its state whole, and go on. */
static void expect_whole(void) {
  wl_manager_t *m = tscope_open(path, SIZE);
  wl_agent_t a;
  wl_request_t r;

  ASSERT_EQ(0, wl__check(m));
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("after"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &r, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(1, wl_release(&r));
  wl_agent_close(&a);
  wl_scope_close(m);
}

static void expect_unusable(void) {
  char err[256];
  wl_manager_t *m;

  ASSERT_EQ(WL_ECORRUPT,
            wl_scope_open(path, SIZE, 0600, &m, err, sizeof(err)));
  ASSERT(strstr(err, "corrupt") != NULL);
}

/* Killed before it marks the mutex held, or after it has cleared it: the
 * next taker finds nothing to repair. Killed once it is marked: the next
 * taker repairs; given back repaired, it is whole again. */
static void test_killed_at_each_step(void) {
  tchild_t a, b;

  tshm_path(path, sizeof(path), "posix-steps");
  tchild_run(&a, path, taker);
  tchild_run(&b, path, quiet_taker);
  ASSERT_EQ('o', tchild_do(&a, 'o'));
  ASSERT_EQ('o', tchild_do(&b, 'o'));
  dies(&a, 'L');
  ASSERT_EQ('0', tchild_do(&b, 'l'));
  ASSERT_EQ('u', tchild_do(&b, 'u'));
  quit(&b);
  expect_whole();

  start(&a, taker);
  start(&b, quiet_taker);
  ASSERT_EQ('0', tchild_do(&a, 'l'));
  dies(&a, 'F');
  ASSERT_EQ('0', tchild_do(&b, 'l'));
  ASSERT_EQ('u', tchild_do(&b, 'u'));
  quit(&b);
  expect_whole();

  start(&a, taker);
  start(&b, quiet_taker);
  dies(&a, 'H');
  ASSERT_EQ('D', tchild_do(&b, 'l'));
  ASSERT_EQ('c', tchild_do(&b, 'c'));
  ASSERT_EQ('u', tchild_do(&b, 'u'));
  ASSERT_EQ('0', tchild_do(&b, 'l'));
  ASSERT_EQ('u', tchild_do(&b, 'u'));
  quit(&b);
  expect_whole();
  tshm_remove(path);
}

/* A taker that found its holder dead and gives it back without marking it
 * consistent leaves it unusable for good, to every process, whether it
 * lives on or dies at "mutex-broken". */
static void test_unrepaired_is_unusable(void) {
  tchild_t a, b;
  int die;

  for (die = 0; die < 2; die++) {
    tshm_path(path, sizeof(path), "posix-broken");
    tchild_run(&a, path, taker);
    tchild_run(&b, path, quiet_taker);
    ASSERT_EQ('o', tchild_do(&a, 'o'));
    ASSERT_EQ('o', tchild_do(&b, 'o'));
    dies(&a, 'H');
    ASSERT_EQ('D', tchild_do(&b, 'l'));
    if (die) {
      dies(&b, 'B');
    } else {
      ASSERT_EQ('u', tchild_do(&b, 'u'));
      ASSERT_EQ('C', tchild_do(&b, 'l'));
      ASSERT_EQ('C', tchild_do(&b, 'l'));
    }
    expect_unusable();
    if (!die) {
      tchild_kill(&b);
      tchild_reaped(&b, 1);
    }
    tshm_remove(path);
  }
}

/* Waits (5 s at most) until process pid's main thread sleeps in a lock
 * wait (F_SETLKW: "fcntl_setlk" here; older kernels name a "lock"
 * function). */
static void await_lock_wait(pid_t pid) {
  uint64_t until = tnow_ns() + 5000000000u;
  char file[64], wchan[128];
  FILE *f;
  size_t n;

  snprintf(file, sizeof(file), "/proc/%d/wchan", (int)pid);
  for (;;) {
    ASSERT((f = fopen(file, "r")) != NULL);
    n = fread(wchan, 1, sizeof(wchan) - 1, f);
    fclose(f);
    wchan[n] = '\0';
    if (strstr(wchan, "setlk") != NULL || strstr(wchan, "lock") != NULL)
      return;
    ASSERT(tnow_ns() < until);
    sched_yield();
  }
}

/* A third process takes the mutex while a repairer holds it: it waits, and
 * takes it whole once the repairer marked it consistent and gave it back,
 * or repairs again if the repairer died repairing, even after marking it
 * consistent (before giving it back). Its taking is its opening of the
 * scope, which repairs what it finds to repair. */
static void test_third_waits_for_the_repair(void) {
  tchild_t a, b, c;
  int die;

  for (die = 0; die < 2; die++) {
    tshm_path(path, sizeof(path), "posix-third");
    tchild_run(&a, path, taker);
    tchild_run(&b, path, quiet_taker);
    tchild_run(&c, path, quiet_taker);
    ASSERT_EQ('o', tchild_do(&a, 'o'));
    ASSERT_EQ('o', tchild_do(&b, 'o'));
    dies(&a, 'H');
    ASSERT_EQ('D', tchild_do(&b, 'l'));
    ASSERT_EQ(1, write(c.to, "o", 1));
    await_lock_wait(c.pid);
    ASSERT_EQ('c', tchild_do(&b, 'c'));
    if (die)
      dies(&b, 'k');
    else
      ASSERT_EQ('u', tchild_do(&b, 'u'));
    ASSERT_EQ(1, read(c.from, &(char){0}, 1));
    ASSERT_EQ('0', tchild_do(&c, 'l'));
    ASSERT_EQ('u', tchild_do(&c, 'u'));
    if (!die) {
      quit(&b);
    }
    quit(&c);
    expect_whole();
    tshm_remove(path);
  }
}

/* Threads of this process, through two handles of one file, and another
 * process, add one to a word of the file under the mutex, reading it and
 * writing it back after a while: no addition is lost. An unused word of the
 * file's first page, past its header. */
#define BUMPS 20000
#define WORD(m) ((volatile uint64_t *)((char *)(m)->map + 2048))

static void bump(wl_manager_t *m) {
  int i, spin;

  for (i = 0; i < BUMPS; i++) {
    uint64_t v;
    ASSERT_EQ(0, wl__os_file_mutex_lock(m));
    v = *WORD(m);
    for (spin = 0; spin < 50; spin++)
      __asm__ volatile("" ::: "memory");
    *WORD(m) = v + 1;
    wl__os_file_mutex_unlock(m);
  }
}

static void *bump_thread(void *m) {
  bump(m);
  return NULL;
}

static void bumper(const char *p, int in, int out) {
  wl_manager_t *m = tscope_open(p, SIZE);

  (void)in;
  bump(m);
  wl_scope_close(m);
  ASSERT_EQ(1, write(out, "b", 1));
}

static void test_threads_and_handles_of_one_process(void) {
  wl_manager_t *m1, *m2;
  pthread_t t1, t2;
  tchild_t c;

  tshm_path(path, sizeof(path), "posix-bump");
  tchild_run(&c, path, bumper);
  m1 = tscope_open(path, SIZE);
  m2 = tscope_open(path, SIZE);
  ASSERT_EQ(1, write(c.to, "g", 1));
  ASSERT_EQ(0, pthread_create(&t1, NULL, bump_thread, m1));
  ASSERT_EQ(0, pthread_create(&t2, NULL, bump_thread, m2));
  ASSERT_EQ(0, pthread_join(t1, NULL));
  ASSERT_EQ(0, pthread_join(t2, NULL));
  ASSERT_EQ(1, read(c.from, &(char){0}, 1));
  tchild_reaped(&c, 0);
  ASSERT_EQ(3 * BUMPS, (long long)*WORD(m1));
  wl_scope_close(m1);
  wl_scope_close(m2);
  tshm_remove(path);
}

/* A process with a descriptor of its own on the file (no handle: its
 * descriptors are its own business) that says who holds a byte: 'm' the
 * mutex's, 'o' followed by an owner's offset (8 bytes) its proof of life.
 * It answers 'P' for its parent, 'F' for no process, '?' otherwise. */
static void checker(const char *p, int in, int out) {
  int fd = open(p, O_RDWR);
  char cmd, answer = 'o';
  wl_off_t o;

  ASSERT(fd >= 0);
  do {
    struct flock fl;
    ASSERT_EQ(1, write(out, &answer, 1));
    if (read(in, &cmd, 1) != 1)
      _exit(0);
    memset(&fl, 0, sizeof(fl));
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = WL__MUTEX_AT;
    fl.l_len = 1;
    if (cmd == 'o') {
      ASSERT_EQ(sizeof(o), read(in, &o, sizeof(o)));
      fl.l_start = WL__LIFE_AT + (off_t)o;
    }
    ASSERT_EQ(0, fcntl(fd, F_GETLK, &fl));
    answer = fl.l_type == F_UNLCK ? 'F' : fl.l_pid == getppid() ? 'P' : '?';
  } while (1);
}

/* The checker's answer to 'o' and an offset. */
static char holder_of_life(tchild_t *k, wl_off_t o) {
  char answer;

  ASSERT_EQ(1, write(k->to, "o", 1));
  ASSERT_EQ(sizeof(o), write(k->to, &o, sizeof(o)));
  ASSERT_EQ(1, read(k->from, &answer, 1));
  return answer;
}

/* What this layer opens of the file it keeps open while a handle of the
 * process has it (point 3 of posix.h): second opens that fail (the file
 * has two names; it is another user's), and a second handle opened and
 * closed, leave this process's mutex byte and proof of life held. A descriptor that someone else in the
 * process opens and closes drops them: what the design assumes away. */
static void test_descriptors_of_the_file(void) {
  char err[256], link_path[160];
  wl_manager_t *m1, *m2;
  tchild_t k;
  wl_off_t self;

  tshm_path(path, sizeof(path), "posix-fds");
  snprintf(link_path, sizeof(link_path), "%s-link", path);
  tchild_run(&k, path, checker);
  m1 = tscope_open(path, SIZE);
  self = m1->self;
  ASSERT_EQ('o', tchild_do(&k, 'o'));
  ASSERT_EQ('F', tchild_do(&k, 'm'));
  ASSERT_EQ('P', holder_of_life(&k, self));
  ASSERT_EQ(0, wl__os_file_mutex_lock(m1));
  ASSERT_EQ('P', tchild_do(&k, 'm'));
  ASSERT_EQ(0, link(path, link_path));
  ASSERT_EQ(-EMLINK, wl_scope_open(path, SIZE, 0600, &m2, err, sizeof(err)));
  ASSERT_EQ(0, unlink(link_path));
  ASSERT_EQ('P', tchild_do(&k, 'm'));
  ASSERT_EQ('P', holder_of_life(&k, self));
  if (geteuid() == 0) {
    /* Refused before it is mapped: another user's, not open to others. */
    ASSERT_EQ(0, chown(path, 12345, 12345));
    ASSERT_EQ(WL_EACCES, wl_scope_open(path, SIZE, 0600, &m2, err, sizeof(err)));
    ASSERT_EQ(0, chown(path, 0, 0));
    ASSERT_EQ('P', tchild_do(&k, 'm'));
    ASSERT_EQ('P', holder_of_life(&k, self));
  }
  wl__os_file_mutex_unlock(m1);
  m2 = tscope_open(path, SIZE);
  ASSERT_EQ('P', holder_of_life(&k, m2->self));
  wl_scope_close(m2);
  ASSERT_EQ('P', holder_of_life(&k, self));
  ASSERT_EQ(0, close(open(path, O_RDONLY)));
  ASSERT_EQ('F', holder_of_life(&k, self));
  wl_scope_close(m1);
  tchild_kill(&k);
  tchild_reaped(&k, 1);
  tshm_remove(path);
}

/* The death watch names a process by the pid that the system says holds
 * its target's byte, and opens what tells of its exit by that pid. The
 * pid of a process that died (and was reaped) in between names another
 * process, the next to get it: the watcher must ask who holds the byte
 * again, see that it is let go, and sweep, rather than wait for the
 * impostor's exit. Made real in a pid namespace of its own, where
 * ns_last_pid picks the next pid, with this process's watcher held at
 * "watch-pid" (between the two) by a hook of this test's: root only. */
static void (*kill_hook)(const char *point);
static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static int hold_armed, held_there, hold_released;

static void hold_hook(const char *point) {
  if (strcmp(point, "watch-pid") == 0) {
    pthread_mutex_lock(&hold_mu);
    if (hold_armed) {
      hold_armed = 0;
      held_there = 1;
      pthread_cond_broadcast(&hold_cond);
      while (!hold_released)
        pthread_cond_wait(&hold_cond, &hold_mu);
    }
    pthread_mutex_unlock(&hold_mu);
  }
  kill_hook(point);
}

static void pid_reused_in_namespace(void) {
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t r;
  tchild_t h;
  pid_t victim, impostor;
  FILE *f;

  tchild_fork(&h, path, SIZE, "x", 0, NULL);
  ASSERT_EQ('o', tchild_do(&h, 'o'));
  hold_armed = 1;
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("waiter"), tfifo_notify));
  ASSERT_EQ(0, wl_request(&a, &r, NAME("x"), WL_EXCLUSIVE, 0));
  pthread_mutex_lock(&hold_mu);
  while (!held_there)
    pthread_cond_wait(&hold_cond, &hold_mu);
  pthread_mutex_unlock(&hold_mu);
  victim = h.pid;
  tchild_kill(&h);
  tchild_reaped(&h, 1);
  ASSERT((f = fopen("/proc/sys/kernel/ns_last_pid", "w")) != NULL);
  ASSERT(fprintf(f, "%d", (int)victim - 1) > 0);
  ASSERT_EQ(0, fclose(f));
  impostor = fork();
  ASSERT(impostor >= 0);
  if (impostor == 0) {
    for (;;)
      pause();
  }
  ASSERT_EQ(victim, impostor);
  pthread_mutex_lock(&hold_mu);
  hold_released = 1;
  pthread_cond_broadcast(&hold_cond);
  pthread_mutex_unlock(&hold_mu);
  tawait_grant(&a, &r);
  ASSERT_EQ(1, wl_release(&r));
  ASSERT_EQ(0, wl__check(m));
  wl_agent_close(&a);
  wl_scope_close(m);
  kill(impostor, SIGKILL);
  waitpid(impostor, NULL, 0);
  tshm_remove(path);
}

static void test_pid_reused_while_watched(void) {
  pid_t outer, inner;
  int status;

  if (geteuid() != 0) {
    printf("  skipped: a pid namespace and ns_last_pid need root\n");
    return;
  }
  tshm_path(path, sizeof(path), "posix-pid");
  fflush(stdout);
  outer = fork();
  ASSERT(outer >= 0);
  if (outer == 0) {
    ASSERT_EQ(0, unshare(CLONE_NEWPID));
    inner = fork();
    ASSERT(inner >= 0);
    if (inner == 0) {
      kill_hook = wl__fault_hook;
      wl__fault_hook = hold_hook;
      pid_reused_in_namespace();
      _exit(0);
    }
    ASSERT_EQ(inner, waitpid(inner, &status, 0));
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
  }
  ASSERT_EQ(outer, waitpid(outer, &status, 0));
  ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ---- Two scopes, two processes: a cycle the system sees, not there ----- */

/* The system's check of a blocking wait (F_SETLKW) follows processes, not
 * threads, across every file: process A's thread waiting for scope 1's
 * byte, which B holds, while A holds scope 2's, makes B's thread asking
 * for scope 2 look like a cycle (EDEADLK), though A's holder of scope 2
 * waits for nothing. Each child runs one side; path2 is the second scope. */
static char path2[128];
static wl_manager_t *cross1, *cross2;
static pid_t cross_tid;
static int cross_release[2];

/* The helper's second thread: waits for scope 1's mutex, held by the
 * victim. */
static void *cross_waiter(void *arg) {
  (void)arg;
  __atomic_store_n(&cross_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
  ASSERT_EQ(0, wl__os_file_mutex_lock(cross1));
  wl__os_file_mutex_unlock(cross1);
  return NULL;
}

/* The victim's second thread: holds scope 1's mutex until told. */
static void *cross_holder(void *arg) {
  char c;

  (void)arg;
  ASSERT_EQ(0, wl__os_file_mutex_lock(cross1));
  __atomic_store_n(&cross_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
  ASSERT_EQ(1, read(cross_release[0], &c, 1));
  wl__os_file_mutex_unlock(cross1);
  return NULL;
}

/* Each child opens both scopes on its first command ('o'), then:
 * 'h': takes scope 2's mutex, then a thread waits for scope 1's (answers
 * with its tid); 'r': gives scope 2's back; 'j': joins that thread. */
static void cross_helper(const char *p, int in, int out) {
  pthread_t t;
  pid_t tid;
  char cmd;

  (void)p;
  cross1 = tscope_open(path, SIZE);
  cross2 = tscope_open(path2, SIZE);
  ASSERT_EQ(1, write(out, "o", 1));
  while (read(in, &cmd, 1) == 1) {
    if (cmd == 'h') {
      ASSERT_EQ(0, wl__os_file_mutex_lock(cross2));
      ASSERT_EQ(0, pthread_create(&t, NULL, cross_waiter, NULL));
      while ((tid = __atomic_load_n(&cross_tid, __ATOMIC_SEQ_CST)) == 0)
        sched_yield();
      ASSERT_EQ(sizeof(tid), write(out, &tid, sizeof(tid)));
      continue;
    }
    if (cmd == 'r')
      wl__os_file_mutex_unlock(cross2);
    else if (cmd == 'j')
      pthread_join(t, NULL);
    ASSERT_EQ(1, write(out, &cmd, 1));
    if (cmd == 'q')
      break;
  }
  wl_scope_close(cross1);
  wl_scope_close(cross2);
  _exit(0);
}

/* 'v': a thread holds scope 1's mutex; 'w': takes and gives back scope
 * 2's (answers with what the lock returned); 'u': that thread lets go. */
static void cross_victim(const char *p, int in, int out) {
  pthread_t t;
  char cmd, c;
  int rc;

  (void)p;
  ASSERT_EQ(0, pipe(cross_release));
  cross1 = tscope_open(path, SIZE);
  cross2 = tscope_open(path2, SIZE);
  ASSERT_EQ(1, write(out, "o", 1));
  while (read(in, &cmd, 1) == 1) {
    c = cmd;
    if (cmd == 'v') {
      ASSERT_EQ(0, pthread_create(&t, NULL, cross_holder, NULL));
      while (__atomic_load_n(&cross_tid, __ATOMIC_SEQ_CST) == 0)
        sched_yield();
    } else if (cmd == 'w') {
      c = code_of(rc = wl__os_file_mutex_lock(cross2));
      if (rc == 0)
        wl__os_file_mutex_unlock(cross2);
    } else if (cmd == 'u') {
      ASSERT_EQ(1, write(cross_release[1], "u", 1));
      pthread_join(t, NULL);
    }
    ASSERT_EQ(1, write(out, &c, 1));
    if (cmd == 'q')
      break;
  }
  wl_scope_close(cross1);
  wl_scope_close(cross2);
  _exit(0);
}

/* Thread tid of pid's wait channel: where it sleeps in the kernel. */
static void wchan_of(pid_t pid, pid_t tid, char *wchan, size_t len) {
  char file[96];
  FILE *f;
  size_t n;

  snprintf(file, sizeof(file), "/proc/%d/task/%d/wchan", (int)pid, (int)tid);
  ASSERT((f = fopen(file, "r")) != NULL);
  n = fread(wchan, 1, len - 1, f);
  fclose(f);
  wchan[n] = '\0';
}

static int waits_for_lock(const char *wchan) {
  return strstr(wchan, "setlk") != NULL || strstr(wchan, "lock") != NULL;
}

/* Until thread tid of pid sleeps in a wait for a lock (5 s at most). */
static void until_waiting(pid_t pid, pid_t tid) {
  uint64_t until = tnow_ns() + 5000000000u;
  char wchan[128];

  for (;;) {
    wchan_of(pid, tid, wchan, sizeof(wchan));
    if (waits_for_lock(wchan))
      return;
    ASSERT(tnow_ns() < until);
    sched_yield();
  }
}

/* Until process pid's main thread has asked for a lock: it has answered
 * on fd, or sleeps to ask again after a false EDEADLK (a nanosleep in
 * wl__mutex_byte_take), or waits for the lock (5 s at most). */
static void until_asked(pid_t pid, int fd) {
  uint64_t until = tnow_ns() + 5000000000u;
  struct pollfd p = {fd, POLLIN, 0};
  char wchan[128];

  for (;;) {
    if (poll(&p, 1, 0) == 1)
      return;
    wchan_of(pid, pid, wchan, sizeof(wchan));
    if (strstr(wchan, "nanosleep") != NULL || waits_for_lock(wchan))
      return;
    ASSERT(tnow_ns() < until);
    sched_yield();
  }
}

static void test_false_cycle_across_scopes(void) {
  tchild_t h, v;
  struct pollfd p;
  pid_t tid;
  char code = 0;

  tshm_path(path, sizeof(path), "posix-cross1");
  tshm_path(path2, sizeof(path2), "posix-cross2");
  wl_scope_close(tscope_open(path, SIZE));
  wl_scope_close(tscope_open(path2, SIZE));
  tchild_run(&h, path, cross_helper);
  tchild_run(&v, path, cross_victim);
  ASSERT_EQ('o', tchild_do(&h, 'g'));
  ASSERT_EQ('o', tchild_do(&v, 'g'));
  ASSERT_EQ('v', tchild_do(&v, 'v'));
  ASSERT_EQ(1, write(h.to, "h", 1));
  ASSERT_EQ(sizeof(tid), read(h.from, &tid, sizeof(tid)));
  until_waiting(h.pid, tid);
  /* The victim's ask waits for scope 2's mutex (EDEADLK made it
   * WL_ECORRUPT at once: the manager then unusable for good). Such an
   * answer comes before the victim sleeps to ask again: once it has asked,
   * an answer not there yet does not come while scope 2 is held. */
  ASSERT_EQ(1, write(v.to, "w", 1));
  until_asked(v.pid, v.from);
  p.fd = v.from;
  p.events = POLLIN;
  if (poll(&p, 1, 0) == 1)
    ASSERT_EQ(1, read(v.from, &code, 1));
  ASSERT_EQ('r', tchild_do(&h, 'r'));
  if (code == 0)
    ASSERT_EQ(1, read(v.from, &code, 1));
  ASSERT_EQ('u', tchild_do(&v, 'u'));
  ASSERT_EQ('j', tchild_do(&h, 'j'));
  ASSERT_EQ('q', tchild_do(&v, 'q'));
  tchild_reaped(&v, 0);
  ASSERT_EQ('q', tchild_do(&h, 'q'));
  tchild_reaped(&h, 0);
  tshm_remove(path);
  tshm_remove(path2);
  ASSERT_EQ('0', code);
}

int main(void) {
  RUN(test_killed_at_each_step);
  RUN(test_unrepaired_is_unusable);
  RUN(test_third_waits_for_the_repair);
  RUN(test_threads_and_handles_of_one_process);
  RUN(test_descriptors_of_the_file);
  RUN(test_pid_reused_while_watched);
  RUN(test_false_cycle_across_scopes);
  return 0;
}
