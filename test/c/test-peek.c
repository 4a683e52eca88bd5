/* wl_scope_peek: a look at a scope's file that changes nothing. Of a live
 * scope, of one whose processes were killed and not swept (their entries
 * dead), of one whose mutex's holder died (left for its next opener to
 * repair, the file's bytes as they were), and of corrupt files (refused,
 * never marked). */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#define SIZE (1 << 20)
#define WAIT_MS 10000
/* Where the mutex's futex word is (the mutex is at offset 40 of the file):
 * glibc's __lock, musl's second int. */
#ifdef __GLIBC__
#define FUTEX_AT 40
#else
#define FUTEX_AT 44
#endif

static char path[128];
static char err[512];

static void fresh_path(const char *what) {
  tshm_path(path, sizeof(path), what);
}

/* The file's bytes, read by a process that does not have it open (in the
 * POSIX family closing a descriptor would drop this process's locks). */
static char *file_bytes(void) {
  char *bytes = malloc(SIZE);
  int fd = open(path, O_RDONLY);

  ASSERT(bytes != NULL && fd >= 0);
  ASSERT_EQ(SIZE, pread(fd, bytes, SIZE, 0));
  close(fd);
  return bytes;
}

/* The same bytes; under musl but for the links of the mutex's robust list
 * (_m_prev, _m_next), which its unlock leaves naming its last taker's
 * thread, and which mean nothing while it is not held. */
static int same_bytes(const char *a, const char *b) {
#if !WL_OS_POSIX && !defined(__GLIBC__)
  size_t links = 40 + 3 * sizeof(void *), end = links + 2 * sizeof(void *);
  return memcmp(a, b, links) == 0 && memcmp(a + end, b + end, SIZE - end) == 0;
#else
  return memcmp(a, b, SIZE) == 0;
#endif
}

static void expect_unchanged(const char *before) {
  char *after = file_bytes();

  ASSERT(same_bytes(before, after));
  free(after);
}

static int peek(wl_snapshot_t *snap) {
  err[0] = '\0';
  return wl_scope_peek(path, 0600, WAIT_MS, snap, err, sizeof(err));
}

static void expect_entry(const wl_info_t *info, const char *name,
                         wl_mode_t mode, const char *client_id, pid_t pid,
                         int alive) {
  size_t i;

  ASSERT_EQ(strlen(name), info->name_len);
  for (i = 0; i < info->name_len; i++)
    ASSERT_EQ(name[i], info->name[i]);
  ASSERT_EQ(mode, info->mode);
  ASSERT_EQ(strlen(client_id), info->client_id_len);
  ASSERT(memcmp(client_id, info->client_id, info->client_id_len) == 0);
  ASSERT_EQ(pid, info->pid);
  ASSERT_EQ(alive, info->alive);
  ASSERT(info->serial > 0);
  ASSERT(info->since > 0 && info->since <= wl__os_now() / 1000);
}

/* This process holds "x" and queues for it again: both alive, in order;
 * the mapping's bytes as they were (nothing else runs on the scope). */
static void test_live(void) {
  wl_manager_t *m;
  wl_agent_t a, b;
  wl_request_t x, y;
  wl_snapshot_t snap;
  char *before = malloc(SIZE);

  fresh_path("peek-live");
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("holder"), tignore_notify));
  ASSERT_EQ(0, wl_agent_init(m, &b, ID("waiter"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &x, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_request(&b, &y, NAME("x"), WL_SHARED, 0));
  memcpy(before, m->map, SIZE);
  ASSERT_EQ(0, peek(&snap));
  ASSERT(same_bytes(before, m->map));
  ASSERT_EQ(1, snap.nheld);
  ASSERT_EQ(1, snap.npending);
  expect_entry(&snap.held[0], "x", WL_EXCLUSIVE, "holder", getpid(), 1);
  expect_entry(&snap.pending[0], "x", WL_SHARED, "waiter", getpid(), 1);
  ASSERT_EQ(wl_request_serial(&x), snap.held[0].serial);
  ASSERT_EQ(wl_request_serial(&y), snap.pending[0].serial);
  wl_snapshot_free(&snap);
  free(before);
  ASSERT_EQ(1, wl_release(&x));
  ASSERT_EQ(1, wl_release(&y));
  wl_agent_close(&a);
  wl_agent_close(&b);
  wl_scope_close(m);
  tshm_remove(path);
}

/* Holds "x" and queues for it with a second agent, then waits to be
 * killed. */
static void hold_and_wait(const char *p, int in, int out) {
  wl_manager_t *m = tscope_open(p, SIZE);
  wl_agent_t a, b;
  wl_request_t x, y;
  char cmd;

  ASSERT_EQ(0, wl_agent_init(m, &a, ID("holder"), tignore_notify));
  ASSERT_EQ(0, wl_agent_init(m, &b, ID("waiter"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &x, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_request(&b, &y, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(1, write(out, "o", 1));
  ASSERT_EQ(0, read(in, &cmd, 1));
  _exit(1);
}

/* The only process of the scope is killed: nothing sweeps, and a look
 * shows its entries dead, again and again, the file unchanged. */
static void test_dead_unswept(void) {
  tchild_t c;
  wl_snapshot_t snap;
  char *before;
  pid_t pid;

  fresh_path("peek-dead");
  tchild_run(&c, path, hold_and_wait);
  ASSERT_EQ('o', tchild_do(&c, 's'));
  ASSERT_EQ(0, peek(&snap));
  expect_entry(&snap.held[0], "x", WL_EXCLUSIVE, "holder", c.pid, 1);
  wl_snapshot_free(&snap);
  pid = c.pid;
  tchild_kill(&c);
  tchild_reaped(&c, 1);
  before = file_bytes();
  for (int n = 0; n < 2; n++) {
    ASSERT_EQ(0, peek(&snap));
    ASSERT_EQ(1, snap.nheld);
    ASSERT_EQ(1, snap.npending);
    expect_entry(&snap.held[0], "x", WL_EXCLUSIVE, "holder", pid, 0);
    expect_entry(&snap.pending[0], "x", WL_EXCLUSIVE, "waiter", pid, 0);
    wl_snapshot_free(&snap);
    expect_unchanged(before);
  }
  free(before);
  tshm_remove(path);
}

/* Opens the scope and takes its mutex, then waits to be killed. */
static void hold_the_mutex(const char *p, int in, int out) {
  wl_manager_t *m = tscope_open(p, SIZE);
  char cmd;

  ASSERT_EQ(0, wl__lock(m));
  ASSERT_EQ(1, write(out, "o", 1));
  ASSERT_EQ(0, read(in, &cmd, 1));
  _exit(1);
}

typedef struct {
  wl_snapshot_t snap;
  int rc;
} tlook_t;

static void *peek_thread(void *arg) {
  tlook_t *l = arg;

  l->rc = peek(&l->snap);
  return NULL;
}

/* Whether a thread waits for the mutex (it marked its futex word so, and
 * no other thread has waited for it since it was taken). The
 * POSIX family's look asks again and again: it cannot be seen waiting. */
static int someone_waits(void) {
#if WL_OS_POSIX
  return 1;
#else
  unsigned word = 0;
  int fd = open(path, O_RDONLY);
  ASSERT(fd >= 0);
  ASSERT_EQ(sizeof(word),
            pread(fd, &word, sizeof(word), FUTEX_AT));
  close(fd);
  return (word & 0x80000000u) != 0;
#endif
}

/* A look that waits for the mutex while its holder dies, and one after
 * that: neither repairs (WL_EREPAIR), and the second leaves the file's
 * bytes as they were; the next opener repairs, and the scope goes on. */
static void test_mutex_holder_died(void) {
  tchild_t c;
  tlook_t look;
  pthread_t thread;
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t x;
  wl_snapshot_t snap;
  char *before;

  fresh_path("peek-mutex");
  tchild_run(&c, path, hold_the_mutex);
  ASSERT_EQ('o', tchild_do(&c, 's'));
  ASSERT_EQ(0, pthread_create(&thread, NULL, peek_thread, &look));
  while (!someone_waits())
    sched_yield();
  tchild_kill(&c);
  tchild_reaped(&c, 1);
  ASSERT_EQ(0, pthread_join(thread, NULL));
  ASSERT_EQ(WL_EREPAIR, look.rc);
  ASSERT(strstr(err, "needs a repair") != NULL);
  before = file_bytes();
  ASSERT_EQ(WL_EREPAIR, peek(&snap));
  ASSERT(strstr(err, "needs a repair") != NULL && strstr(err, path) != NULL);
  expect_unchanged(before);
  free(before);
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl__check(m));
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("next"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &x, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(1, wl_release(&x));
  wl_agent_close(&a);
  wl_scope_close(m);
  tshm_remove(path);
}

/* A live process holds the mutex throughout: the look gives up. */
static void test_mutex_busy(void) {
  tchild_t c;
  wl_snapshot_t snap;

  fresh_path("peek-busy");
  tchild_run(&c, path, hold_the_mutex);
  ASSERT_EQ('o', tchild_do(&c, 's'));
  err[0] = '\0';
  ASSERT_EQ(-ETIMEDOUT,
            wl_scope_peek(path, 0600, 50, &snap, err, sizeof(err)));
  ASSERT(strstr(err, "busy") != NULL && strstr(err, path) != NULL);
  tchild_kill(&c);
  tchild_reaped(&c, 1);
  tshm_remove(path);
}

static void write_file(const void *bytes, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

  ASSERT(fd >= 0);
  ASSERT_EQ((long long)len, write(fd, bytes, len));
  close(fd);
}

static void expect_refused(int want, const char *fault) {
  wl_snapshot_t snap;
  int rc = peek(&snap);

  if (rc != want || strstr(err, path) == NULL || strstr(err, fault) == NULL) {
    fprintf(stderr, "want %d naming %s and '%s'; got %d: %s\n", want, path,
            fault, rc, err);
    ASSERT(0);
  }
}

/* No file, a file of garbage, one marked corrupt, and one whose list
 * loops: refused, nothing created or marked. */
static void test_bad_files(void) {
  static char garbage[8192];
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t x;
  wl_off_t link, saved;
  char *before;
  uint32_t one = 1;

  fresh_path("peek-bad");
  expect_refused(-ENOENT, "there is no scope's file at");
  ASSERT(access(path, F_OK) != 0);

  memset(garbage, 0x5a, sizeof(garbage));
  write_file(garbage, sizeof(garbage));
  expect_refused(WL_ECORRUPT, "not a web-locks manager file");
  unlink(path);

  /* A request whose link in its name's held list points at itself: the
   * walk never comes back to the list's head. */
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("a"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &x, NAME("x"), WL_EXCLUSIVE, 0));
  link = x.off + offsetof(wl__req_t, qlink);
  saved = WL__LINK(m, link)->next;
  WL__LINK(m, link)->next = link;
  before = malloc(SIZE);
  memcpy(before, m->map, SIZE);
  expect_refused(WL_ECORRUPT, "is corrupt");
  ASSERT(same_bytes(before, m->map));
  ASSERT_EQ(0, WL__HDR(m)->corrupt);
  WL__LINK(m, link)->next = saved;
  ASSERT_EQ(1, wl_release(&x));
  wl_agent_close(&a);

  /* Marked corrupt by a process that found it so. */
  __atomic_store_n(&WL__HDR(m)->corrupt, one, __ATOMIC_RELAXED);
  memcpy(before, m->map, SIZE);
  expect_refused(WL_ECORRUPT, "is corrupt");
  ASSERT(same_bytes(before, m->map));
  free(before);
  wl_scope_close(m);
  tshm_remove(path);
}

int main(void) {
  RUN(test_live);
  RUN(test_dead_unswept);
  RUN(test_mutex_holder_died);
  RUN(test_mutex_busy);
  RUN(test_bad_files);
  return 0;
}
