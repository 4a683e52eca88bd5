/* wl_scope_open: a manager in a file shared by processes. Creating and
 * attaching, the same algorithms across two mappings and across a fork, and
 * every kind of bad file refused with its path and its fault named. */
#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#define SIZE (1 << 20)

static char path[128];
static char err[512];

static void fresh_path(void) {
  static int n;
  char what[32];
  snprintf(what, sizeof(what), "test-%d", ++n);
  tshm_path(path, sizeof(path), what);
}

/* Waits for an agent's wake descriptor (another mapping, or another
 * process, woke it), then takes its next mail. */
static wl_request_t *next_when_woken(wl_agent_t *agent, unsigned *events) {
  struct pollfd p = {wl_agent_wake_fd(agent), POLLIN, 0};

  ASSERT_EQ(1, poll(&p, 1, 10000));
  wl_agent_woken(agent);
  return wl_agent_next(agent, events);
}

static void expect_open_fails(int want, const char *fault) {
  wl_manager_t *m = NULL;
  int rc = wl_scope_open(path, SIZE, 0600, &m, err, sizeof(err));
  if (rc != want || strstr(err, path) == NULL || strstr(err, fault) == NULL) {
    fprintf(stderr, "want %d naming %s and '%s'; got %d: %s\n", want, path,
            fault, rc, err);
    ASSERT(0);
  }
}

static void write_file(const void *bytes, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT(fd >= 0);
  ASSERT_EQ((long long)len, write(fd, bytes, len));
  close(fd);
}

/* Patches bytes of an existing manager file. */
static void patch(off_t at, const void *bytes, size_t len) {
  int fd = open(path, O_WRONLY);
  ASSERT(fd >= 0);
  ASSERT_EQ((long long)len, pwrite(fd, bytes, len, at));
  close(fd);
}

static void test_create_then_attach(void) {
  wl_manager_t *m1, *m2;
  wl_agent_t a, b;
  wl_request_t ra, rb;
  wl_snapshot_t snap;
  struct stat st;
  unsigned events;

  fresh_path();
  m1 = tscope_open(path, SIZE);
  ASSERT_EQ(0, stat(path, &st));
  ASSERT_EQ(0600, st.st_mode & 0777);
  ASSERT_EQ(SIZE, st.st_size);
  m2 = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m1, &a, ID("a"), tignore_notify));
  ASSERT_EQ(0, wl_agent_init(m2, &b, ID("b"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE,
            wl_request(&a, &ra, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_request(&b, &rb, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_snapshot(m2, &snap));
  EXPECT_HELD(&snap, {NAME("x"), WL_EXCLUSIVE, ID("a")});
  EXPECT_PENDING(&snap, {NAME("x"), WL_EXCLUSIVE, ID("b")});
  wl_snapshot_free(&snap);
  ASSERT(wl_agent_next(&a, &events) == &ra);
  ASSERT_EQ(1, wl_release(&ra));
  ASSERT(next_when_woken(&b, &events) == &rb);
  ASSERT_EQ(WL_EV_GRANTED, events);
  ASSERT_EQ(1, wl_release(&rb));
  ASSERT_EQ(0, wl__name_count(m1));
  wl_agent_close(&a);
  wl_agent_close(&b);
  wl_scope_close(m1);
  wl_scope_close(m2);
  unlink(path);
}

/* A child process holds the lock; this one queues behind it and is granted
 * when the child releases it. */
static void test_across_a_fork(void) {
  int to_child[2], to_parent[2], status;
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t r;
  unsigned events;
  char byte;
  pid_t pid;

  fresh_path();
  m = tscope_open(path, SIZE);
  wl_scope_close(m);
  ASSERT_EQ(0, pipe(to_child));
  ASSERT_EQ(0, pipe(to_parent));
  pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    wl_agent_t c;
    wl_request_t h;
    close(to_child[1]);
    close(to_parent[0]);
    m = tscope_open(path, SIZE);
    ASSERT_EQ(0, wl_agent_init(m, &c, ID("child"), tignore_notify));
    ASSERT_EQ(WL_GRANTED_AT_ONCE,
              wl_request(&c, &h, NAME("x"), WL_EXCLUSIVE, 0));
    ASSERT_EQ(1, write(to_parent[1], "h", 1));
    ASSERT_EQ(1, read(to_child[0], &byte, 1));
    ASSERT_EQ(1, wl_release(&h));
    wl_agent_close(&c);
    wl_scope_close(m);
    _exit(0);
  }
  /* Only the child writes to_parent: a child that fails ends the read. */
  close(to_child[0]);
  close(to_parent[1]);
  ASSERT_EQ(1, read(to_parent[0], &byte, 1));
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("parent"), tignore_notify));
  ASSERT_EQ(0, wl_request(&a, &r, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT(wl_agent_next(&a, &events) == NULL);
  ASSERT_EQ(1, write(to_child[1], "r", 1));
  ASSERT_EQ(pid, waitpid(pid, &status, 0));
  ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT(next_when_woken(&a, &events) == &r);
  ASSERT_EQ(WL_EV_GRANTED, events);
  ASSERT_EQ(1, wl_release(&r));
  wl_agent_close(&a);
  wl_scope_close(m);
  close(to_child[1]);
  close(to_parent[0]);
  unlink(path);
}

static void test_bad_files(void) {
  static char garbage[8192];
  wl_manager_t *m;
  uint32_t layout = WL_LAYOUT + 1, zero = 0;
  uint64_t huge = (uint64_t)1 << 40;

  fresh_path();
  write_file("web-lock", 8);
  expect_open_fails(WL_ECORRUPT, "too short");

  memset(garbage, 0x5a, sizeof(garbage));
  write_file(garbage, sizeof(garbage));
  expect_open_fails(WL_ECORRUPT, "not a web-locks manager file");

  unlink(path);
  m = tscope_open(path, SIZE);
  wl_scope_close(m);
  patch(8, &layout, sizeof(layout));
  {
    char want[96];
    snprintf(want, sizeof(want),
             "has web-locks layout %u; this version of web-locks uses "
             "layout %u",
             (unsigned)WL_LAYOUT + 1, (unsigned)WL_LAYOUT);
    expect_open_fails(WL_ELAYOUT, want);
  }

  /* The ABI word (offset 12): the same sizes under another C library. */
  unlink(path);
  m = tscope_open(path, SIZE);
  wl_scope_close(m);
  {
    uint32_t abi;
    int fd = open(path, O_RDONLY);
    ASSERT_EQ(sizeof(abi), pread(fd, &abi, sizeof(abi), 12));
    close(fd);
    abi ^= 3u << 24;
    patch(12, &abi, sizeof(abi));
  }
  expect_open_fails(WL_ELAYOUT, "another machine architecture, C library or build");

  unlink(path);
  m = tscope_open(path, SIZE);
  wl_scope_close(m);
  ASSERT_EQ(0, truncate(path, SIZE * 2));
  expect_open_fails(WL_ECORRUPT, "it says it is 1048576 bytes");

  /* The region's header: its `used` mark (the second word) past its end. */
  unlink(path);
  m = tscope_open(path, SIZE);
  wl_scope_close(m);
  patch(4096 + 8, &huge, sizeof(huge));
  expect_open_fails(WL_ECORRUPT, "region header is inconsistent");

  /* A file not marked ready was not made whole by web-locks (which puts
   * only whole files in place): it is refused, never initialised. */
  unlink(path);
  m = tscope_open(path, SIZE);
  wl_scope_close(m);
  patch(32, &zero, sizeof(zero));
  expect_open_fails(WL_ECORRUPT, "not marked ready");
  unlink(path);
}

/* Someone's file at the path (a disk image, say: 8 KiB or more that begins
 * with zeros) is refused and left byte for byte as it was. */
static void test_foreign_file_never_written(void) {
  static char image[3 * 4096], after[sizeof(image)];
  size_t i;
  int fd;

  for (i = 512; i < sizeof(image); i++)
    image[i] = (char)(i * 7 + 3);
  fresh_path();
  write_file(image, sizeof(image));
  expect_open_fails(WL_ECORRUPT, "not a web-locks manager file");
  fd = open(path, O_RDONLY);
  ASSERT(fd >= 0);
  ASSERT_EQ((long long)sizeof(after), read(fd, after, sizeof(after)));
  close(fd);
  ASSERT(memcmp(image, after, sizeof(image)) == 0);
  unlink(path);
}

/* A scope's file with a second name (a hard link) is refused by both: its
 * agents would look for each other's FIFOs under two names. */
static void test_hard_link_refused(void) {
  char other[sizeof(path) + 8];
  wl_manager_t *m, *n;

  fresh_path();
  snprintf(other, sizeof(other), "%s.link", path);
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, link(path, other));
  expect_open_fails(-EMLINK, "has 2 names (hard links)");
  ASSERT_EQ(-EMLINK, wl_scope_open(other, SIZE, 0600, &n, err, sizeof(err)));
  ASSERT(strstr(err, other) != NULL);
  ASSERT_EQ(0, unlink(other));
  wl_scope_close(tscope_open(path, SIZE));
  wl_scope_close(m);
  unlink(path);
}

static void test_owner_and_permissions(void) {
  wl_manager_t *m;
  struct stat st;

  fresh_path();
  ASSERT_EQ(0, wl_scope_open(path, SIZE, 0660, &m, err, sizeof(err)));
  ASSERT_EQ(0, stat(path, &st));
  ASSERT_EQ(0660, st.st_mode & 0777);
  wl_scope_close(m);
  /* Bits that let a user only read the file, or only write it: that user
   * could hold its locks. Refused when asked for, and in a file. */
  ASSERT_EQ(WL_EINVAL, wl_scope_open(path, SIZE, 0640, &m, err, sizeof(err)));
  ASSERT_EQ(WL_EINVAL, wl_scope_open(path, SIZE, 0620, &m, err, sizeof(err)));
  ASSERT_EQ(WL_EINVAL, wl_scope_open(path, SIZE, 0604, &m, err, sizeof(err)));
  ASSERT_EQ(WL_EINVAL, wl_scope_open(path, SIZE, 0400, &m, err, sizeof(err)));
  ASSERT_EQ(0, chmod(path, 0640));
  expect_open_fails(WL_EACCES, "has the permission bits 0640");
  ASSERT_EQ(0, chmod(path, 0662));
  expect_open_fails(WL_EACCES, "has the permission bits 0662");
  ASSERT_EQ(0, chmod(path, 0660));
  if (geteuid() == 0) {
    /* Another user's file is refused unless its owner opened it to others,
     * and this process too (a private scope trusts no one else's file). */
    ASSERT_EQ(0, chown(path, 12345, 12345));
    ASSERT_EQ(0, chmod(path, 0600));
    expect_open_fails(WL_EACCES, "belongs to another user (uid 12345)");
    ASSERT_EQ(0, chmod(path, 0660));
    expect_open_fails(WL_EACCES, "opened as private (mode 0600)");
    ASSERT_EQ(0, wl_scope_open(path, SIZE, 0660, &m, err, sizeof(err)));
    /* Open already: the same test, asked of the open file. */
    ASSERT_EQ(0, wl_scope_admit(m, 0660, err, sizeof(err)));
    ASSERT_EQ(WL_EACCES, wl_scope_admit(m, 0600, err, sizeof(err)));
    ASSERT(strstr(err, "opened as private (mode 0600)") != NULL);
    ASSERT_EQ(WL_EINVAL, wl_scope_admit(m, 0640, err, sizeof(err)));
    ASSERT_EQ(0, chmod(path, 0640));
    ASSERT_EQ(WL_EACCES, wl_scope_admit(m, 0660, err, sizeof(err)));
    wl_scope_close(m);
  }
  unlink(path);

  /* A symbolic link is not followed: scopes cannot be redirected. */
  ASSERT_EQ(0, symlink("/dev/null", path));
  expect_open_fails(-ELOOP, path);
  unlink(path);

  ASSERT_EQ(WL_EINVAL, wl_scope_open(path, 5000, 0600, &m, err, sizeof(err)));
  ASSERT_EQ(WL_EINVAL, wl_scope_open(path, SIZE, 01600, &m, err, sizeof(err)));
}

/* Where O_TMPFILE is not used (a path with no directory in it, a file
 * system without it, or the POSIX family), the whole file is made under a
 * name drawn at random and renamed into place (RENAME_NOREPLACE): it has
 * one name, nothing else is left in the directory (but FIFOs: in the POSIX
 * family each handle's watcher has one), and a second opener opens that
 * file. */
static void test_made_under_a_temporary_name(void) {
  char cwd[512], base[64];
  wl_manager_t *m1, *m2;
  struct dirent *e;
  struct stat st;
  DIR *d;

  ASSERT(getcwd(cwd, sizeof(cwd)) != NULL);
  ASSERT_EQ(0, chdir("/dev/shm"));
  snprintf(base, sizeof(base), "wl-relative-%d", (int)getpid());
  ASSERT_EQ(0, wl_scope_open(base, SIZE, 0600, &m1, err, sizeof(err)));
  ASSERT_EQ(0, wl_scope_open(base, SIZE, 0600, &m2, err, sizeof(err)));
  ASSERT_EQ(0, stat(base, &st));
  ASSERT_EQ(1, (long long)st.st_nlink);
  ASSERT_EQ(SIZE, st.st_size);
  d = opendir(".");
  ASSERT(d != NULL);
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, base, strlen(base)) != 0 ||
        strcmp(e->d_name, base) == 0)
      continue;
    ASSERT_EQ(0, lstat(e->d_name, &st));
    ASSERT(WL_OS_POSIX && S_ISFIFO(st.st_mode));
  }
  closedir(d);
  wl_scope_close(m1);
  wl_scope_close(m2);
  unlink(base);
  ASSERT_EQ(0, chdir(cwd));
}

static uint64_t monotonic_us(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000;
}

/* How early a time that a record keeps may be (wl__os_now_coarse: a tick,
 * or more where ticks are deferred), and how far apart the steps below
 * are, so that each is told from the one before. */
#define COARSE_US 50000
#define STEP_US 150000

/* A scope's entries say when they were made (pending) or granted (held),
 * on the machine's monotonic clock (early by a tick at most), and which
 * process they are of. */
static void test_snapshot_times(void) {
  uint64_t t0, t01, t1, t2, t3;
  wl_manager_t *m;
  wl_agent_t a, b;
  wl_request_t held, waits;
  wl_snapshot_t snap;
  uint16_t x = 'x';

  fresh_path();
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("a"), tignore_notify));
  ASSERT_EQ(0, wl_agent_init(m, &b, ID("b"), tignore_notify));
  held.parent = waits.parent = 0;
  t0 = monotonic_us();
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &held, &x, 1, WL_EXCLUSIVE, 0));
  t01 = monotonic_us();
  usleep(STEP_US);
  t1 = monotonic_us();
  ASSERT_EQ(0, wl_request(&b, &waits, &x, 1, WL_EXCLUSIVE, 0));
  t2 = monotonic_us();
  ASSERT_EQ(0, wl_snapshot(m, &snap));
  ASSERT_EQ(1, snap.nheld);
  ASSERT_EQ(1, snap.npending);
  ASSERT(snap.held[0].since + COARSE_US >= t0 && snap.held[0].since <= t01 + 2);
  ASSERT(snap.pending[0].since + COARSE_US >= t1 && snap.pending[0].since <= t2 + 2);
  ASSERT_EQ(wl_request_serial(&waits), snap.pending[0].serial);
  ASSERT_EQ((uint32_t)getpid(), snap.held[0].pid);
  ASSERT_EQ((uint32_t)getpid(), snap.pending[0].pid);
  wl_snapshot_free(&snap);
  /* Granted later: held since its grant, not its request. */
  usleep(STEP_US);
  t2 = monotonic_us();
  ASSERT_EQ(1, wl_release(&held));
  t3 = monotonic_us();
  ASSERT_EQ(0, wl_snapshot(m, &snap));
  ASSERT_EQ(1, snap.nheld);
  ASSERT(snap.held[0].since + COARSE_US >= t2 && snap.held[0].since <= t3 + 2);
  ASSERT_EQ(wl_request_serial(&waits), snap.held[0].serial);
  wl_snapshot_free(&snap);
  wl_agent_close(&a);
  wl_agent_close(&b);
  wl_scope_close(m);
  unlink(path);
}

int main(void) {
  RUN(test_create_then_attach);
  RUN(test_across_a_fork);
  RUN(test_bad_files);
  RUN(test_owner_and_permissions);
  RUN(test_foreign_file_never_written);
  RUN(test_hard_link_refused);
  RUN(test_made_under_a_temporary_name);
  RUN(test_snapshot_times);
  return 0;
}
