/* Wake-ups across processes: an agent of a machine-wide manager sleeps in poll()
 * on its wake descriptor, and a release in another process wakes it with
 * its grant in the mailbox. */
#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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
  m = tscope_open(path, SIZE);
  first = wait_once(m, queued);
  ASSERT_EQ(1, read(go, &byte, 1));
  ASSERT_EQ(first, wait_once(m, queued));
  wl_scope_close(m);
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
  m = tscope_open(path, SIZE);
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
  wl_scope_close(m);
  close(go[1]);
  close(queued[0]);
  unlink(path);
}

/* The process-wide manager's agents have no wake descriptor. */
static void test_process_agents_have_none(void) {
  tagent_t a;

  tagent_init(&a, ID("local"));
  ASSERT_EQ(-1, wl_agent_wake_fd(&a.agent));
  tagent_close(&a);
}

/* The numbers the core draws, as the test chooses them (this definition
 * takes the C library's place in the test's binary); the kernel's when the
 * test has chosen none. */
static const uint64_t *scripted;
static size_t nscripted;

int getentropy(void *buf, size_t len) {
  if (nscripted > 0 && len == sizeof(uint64_t)) {
    memcpy(buf, scripted++, len);
    nscripted--;
    return 0;
  }
  return syscall(SYS_getrandom, buf, len, 0) == (long)len ? 0 : -1;
}

/* The path of the FIFO of an agent whose record holds `wake`. */
static void fifo_of(char *buf, size_t len, uint64_t wake) {
  snprintf(buf, len, "%s.%016llx", path, (unsigned long long)wake);
}

/* An agent's FIFO is named by the number in its record, drawn at random:
 * the next agent at the same record has an unrelated name, so no other user
 * can make a file at it first. The FIFO is writable (only) by those the
 * file admits, whatever the umask. */
static void test_names_and_modes(void) {
  static const unsigned modes[][2] = {
      {0600, 0600}, {0660, 0620}, {0666, 0622}, {0606, 0602}};
  wl_manager_t *m;
  wl_agent_t a;
  char fifo[256], err[512];
  struct stat st;
  wl_off_t off;
  uint64_t first;
  size_t i;
  mode_t umask_was = umask(0077);

  tshm_path(path, sizeof(path), "wake-names");
  for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
    ASSERT_EQ(0, wl_scope_open(path, SIZE, modes[i][0], &m, err,
                                 sizeof(err)));
    ASSERT_EQ(0, wl_agent_init(m, &a, ID("a"), tignore_notify));
    first = WL__REC(m, a.off, wl__agent_t)->wake;
    ASSERT(first != 0 && first == a.wake);
    fifo_of(fifo, sizeof(fifo), first);
    ASSERT_EQ(0, lstat(fifo, &st));
    ASSERT(S_ISFIFO(st.st_mode));
    ASSERT_EQ(modes[i][1], st.st_mode & 0777);
    off = a.off;
    wl_agent_close(&a);
    ASSERT_EQ(-1, lstat(fifo, &st));
    ASSERT_EQ(0, wl_agent_init(m, &a, ID("b"), tignore_notify));
    ASSERT_EQ(off, a.off);
    ASSERT(a.wake != first && a.wake != first + 1 && a.wake != 0);
    wl_agent_close(&a);
    wl_scope_close(m);
    tshm_remove(path);
  }
  umask(umask_was);
}

/* FIFOs beside the file that no process reads (left by agents that died
 * where no sweep could remove them) are removed by the next process that
 * opens the scope; one that is read, another user's, or anything but a
 * FIFO of this scope's pattern is left alone. */
static void test_orphans_removed(void) {
  char dead[256], read_one[256], others[256], plain[256], odd[256];
  wl_manager_t *m;
  struct stat st;
  int fd;

  tshm_path(path, sizeof(path), "wake-orphans");
  wl_scope_close(tscope_open(path, SIZE));
  fifo_of(dead, sizeof(dead), 0x1234);
  fifo_of(read_one, sizeof(read_one), 0x5678);
  fifo_of(others, sizeof(others), 0x9abc);
  fifo_of(plain, sizeof(plain), 0xdef0);
  snprintf(odd, sizeof(odd), "%s.%s", path, "123");
  ASSERT_EQ(0, mkfifo(dead, 0600));
  ASSERT_EQ(0, mkfifo(read_one, 0600));
  ASSERT_EQ(0, mkfifo(odd, 0600));
  fd = open(read_one, O_RDWR | O_NONBLOCK);
  ASSERT(fd >= 0);
  close(open(plain, O_WRONLY | O_CREAT | O_EXCL, 0600));
  if (geteuid() == 0) {
    ASSERT_EQ(0, mkfifo(others, 0600));
    ASSERT_EQ(0, chown(others, 12345, 12345));
  }
  m = tscope_open(path, SIZE);
  ASSERT(lstat(dead, &st) == -1 && errno == ENOENT);
  ASSERT_EQ(0, lstat(read_one, &st));
  ASSERT_EQ(0, lstat(plain, &st));
  ASSERT_EQ(0, lstat(odd, &st));
  if (geteuid() == 0)
    ASSERT_EQ(0, lstat(others, &st));
  wl_scope_close(m);
  close(fd);
  unlink(read_one);
  unlink(others);
  unlink(plain);
  unlink(odd);
  tshm_remove(path);
}

/* A name that is taken (by another user's file, say, in a sticky directory
 * where this user could not remove it) is drawn again, and that file is
 * left as it was; so is a zero drawn (no FIFO has it). */
static void test_taken_name_drawn_again(void) {
  static const uint64_t draws[] = {0x1111, 0, 0x2222};
  wl_manager_t *m;
  wl_agent_t a;
  char taken[256];
  struct stat st;
  int fd;

  tshm_path(path, sizeof(path), "wake-taken");
  m = tscope_open(path, SIZE);
  fifo_of(taken, sizeof(taken), 0x1111);
  fd = open(taken, O_WRONLY | O_CREAT | O_EXCL, 0644);
  ASSERT(fd >= 0);
  ASSERT_EQ(4, write(fd, "mine", 4));
  close(fd);
  if (geteuid() == 0)
    ASSERT_EQ(0, chown(taken, 12345, 12345));
  scripted = draws;
  nscripted = 3;
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("a"), tignore_notify));
  ASSERT_EQ(0, (long long)nscripted);
  ASSERT_EQ(0x2222, (long long)a.wake);
  ASSERT_EQ(0x2222, (long long)WL__REC(m, a.off, wl__agent_t)->wake);
  ASSERT_EQ(0, lstat(taken, &st));
  ASSERT(S_ISREG(st.st_mode) && st.st_size == 4);
  wl_agent_close(&a);
  ASSERT_EQ(0, lstat(taken, &st));
  wl_scope_close(m);
  unlink(taken);
  tshm_remove(path);
}

/* The FIFOs that the next opener removes are those no process reads,
 * however many the scope's live agents of this user have beside them: a
 * user with more live agents than WL__ORPHANS still has its dead ones
 * removed. Made dead first and last, so that one of them is past the first
 * WL__ORPHANS entries whichever order the directory lists them in. */
static void test_orphans_among_many_live(void) {
  char first[256], last[256], live[256];
  int fds[WL__ORPHANS + 1];
  wl_manager_t *m;
  struct stat st;
  unsigned i;

  tshm_path(path, sizeof(path), "wake-orphans-many");
  wl_scope_close(tscope_open(path, SIZE));
  fifo_of(first, sizeof(first), 0x1000);
  ASSERT_EQ(0, mkfifo(first, 0600));
  for (i = 0; i <= WL__ORPHANS; i++) {
    fifo_of(live, sizeof(live), 0x2000 + i);
    ASSERT_EQ(0, mkfifo(live, 0600));
    fds[i] = open(live, O_RDWR | O_NONBLOCK);
    ASSERT(fds[i] >= 0);
  }
  fifo_of(last, sizeof(last), 0x3000);
  ASSERT_EQ(0, mkfifo(last, 0600));
  m = tscope_open(path, SIZE);
  ASSERT(lstat(first, &st) == -1 && errno == ENOENT);
  ASSERT(lstat(last, &st) == -1 && errno == ENOENT);
  wl_scope_close(m);
  for (i = 0; i <= WL__ORPHANS; i++) {
    fifo_of(live, sizeof(live), 0x2000 + i);
      close(fds[i]);
    unlink(live);
  }
  unlink(first);
  unlink(last);
  tshm_remove(path);
}

/* A number in a dead agent's record names a FIFO to remove only if a FIFO
 * is there: anyone who may write the file can write any number, and
 * "<path>.<16 hex digits>" is also the file of another scope (scope
 * "s.0123456789abcdef" beside scope "s"), which the sweep must leave. */
#define OTHER_SCOPE 0x0123456789abcdefULL
static void agent_naming_another_file(const char *file, int in, int out) {
  wl_manager_t *m = tscope_open(file, SIZE);
  wl_agent_t a;
  char byte;

  ASSERT_EQ(0, wl_agent_init(m, &a, ID("h"), tignore_notify));
  WL__REC(m, a.off, wl__agent_t)->wake = OTHER_SCOPE;
  ASSERT_EQ(1, write(out, "r", 1));
  (void)read(in, &byte, 1);
  _exit(0);
}

static void test_sweep_removes_only_fifos(void) {
  char other[256];
  wl_manager_t *m;
  tchild_t child;
  struct stat st;
  int fd;

  tshm_path(path, sizeof(path), "wake-other-file");
  fifo_of(other, sizeof(other), OTHER_SCOPE);
  fd = open(other, O_WRONLY | O_CREAT | O_EXCL, 0600);
  ASSERT(fd >= 0);
  ASSERT_EQ(4, write(fd, "mine", 4));
  close(fd);
  tchild_run(&child, path, agent_naming_another_file);
  ASSERT_EQ('r', tchild_do(&child, 'g'));
  tchild_kill(&child);
  tchild_reaped(&child, 1);
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, lstat(other, &st));
  ASSERT(S_ISREG(st.st_mode) && st.st_size == 4);
  wl_scope_close(m);
  unlink(other);
  tshm_remove(path);
}

/* How many files beside the scope's file are named as its FIFOs are. */
static int fifos_beside(void) {
  const char *base = strrchr(path, '/') + 1;
  size_t baselen = strlen(base);
  char dir[128];
  struct dirent *e;
  int n = 0;
  DIR *d;

  memcpy(dir, path, (size_t)(base - 1 - path));
  dir[base - 1 - path] = '\0';
  d = opendir(dir);
  ASSERT(d != NULL);
  while ((e = readdir(d)) != NULL)
    n += strncmp(e->d_name, base, baselen) == 0 && e->d_name[baselen] == '.';
  closedir(d);
  return n;
}

/* A process killed with agents open leaves their FIFOs (and, in the POSIX
 * family, its watcher's: os/posix/watch.c), which the scope's other
 * processes remove at once (README): when they notice the death, the dead
 * process may not have closed its FIFOs yet, so the sweep cannot ask
 * whether one still has a reader. */
#define WATCHER_FIFOS (WL_OS_POSIX ? 1 : 0)
static void agents_then_wait(const char *file, int in, int out) {
  wl_manager_t *m = tscope_open(file, SIZE);
  wl_agent_t a, b;
  char byte;

  ASSERT_EQ(0, wl_agent_init(m, &a, ID("a"), tignore_notify));
  ASSERT_EQ(0, wl_agent_init(m, &b, ID("b"), tignore_notify));
  ASSERT_EQ(1, write(out, "r", 1));
  (void)read(in, &byte, 1);
  _exit(0);
}

static void test_killed_process_fifos_removed_at_once(void) {
  tchild_t kids[8];
  wl_manager_t *m;
  uint64_t until;
  int i;

  tshm_path(path, sizeof(path), "wake-killed");
  for (i = 0; i < 8; i++)
    tchild_run(&kids[i], path, agents_then_wait);
  m = tscope_open(path, SIZE);
  for (i = 0; i < 8; i++) {
    ASSERT_EQ('r', tchild_do(&kids[i], 'g'));
    /* Its two agents', and each process's watcher's. */
    ASSERT_EQ(2 + 2 * WATCHER_FIFOS, fifos_beside());
    tchild_kill(&kids[i]);
    tchild_reaped(&kids[i], 1);
    for (until = tnow_ns() + 5000000000ull;
         fifos_beside() > WATCHER_FIFOS && tnow_ns() < until;)
      usleep(1000);
    ASSERT_EQ(WATCHER_FIFOS, fifos_beside());
  }
  wl_scope_close(m);
  tshm_remove(path);
}

int main(void) {
  RUN(test_release_wakes_another_process);
  RUN(test_sweep_removes_only_fifos);
  RUN(test_killed_process_fifos_removed_at_once);
  RUN(test_taken_name_drawn_again);
  RUN(test_names_and_modes);
  RUN(test_orphans_removed);
  RUN(test_orphans_among_many_live);
  RUN(test_process_agents_have_none);
  return 0;
}
