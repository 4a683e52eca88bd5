/* A machine-wide manager's file written by someone else (a group member of a
 * shared scope, or a local user who made the file first) or left by a
 * failed repair: nothing in it is used as a pointer, nothing it says
 * makes a copy longer than its buffer, and once any process finds it
 * corrupt, every handle and process refuses it, never half repaired. This
 * runs under ASan: a stray access fails it. */
#define _GNU_SOURCE

#include <fcntl.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#define SIZE (1 << 20)
/* The file's ready word: after its magic, layout, ABI, size and region
 * offset (core/scope.c). */
#define READY_AT 32

static char path[128];

static wl__req_t *rec_of(wl_manager_t *m, const wl_request_t *r) {
  return (wl__req_t *)(m->base + r->off);
}

static wl__agent_t *agent_rec_of(wl_manager_t *m, const wl_agent_t *a) {
  return (wl__agent_t *)(m->base + a->off);
}

/* A new manager whose agent a holds x and waits for it again (w). */
static wl_manager_t *hold_and_wait(wl_agent_t *a, wl_request_t *h,
                                   wl_request_t *w) {
  wl_manager_t *m;

  tshm_path(path, sizeof(path), "hostile");
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, a, ID("a"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(a, h, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_request(a, w, NAME("x"), WL_EXCLUSIVE, 0));
  return m;
}

/* a holds x, b waits for it; `forge` writes into the file; then a lets go,
 * which grants x to b. b must find the corruption, not follow what it read. */
static void expect_grant_refused(const char *what,
                                 void (*forge)(wl_manager_t *, wl_agent_t *,
                                               wl_request_t *)) {
  wl_manager_t *m;
  wl_agent_t a, b;
  wl_request_t h, w, other;
  unsigned events;

  tshm_path(path, sizeof(path), "hostile");
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("a"), tignore_notify));
  ASSERT_EQ(0, wl_agent_init(m, &b, ID("b"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &h, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&b, &other, NAME("o"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_request(&b, &w, NAME("x"), WL_EXCLUSIVE, 0));
  while (wl_agent_next(&b, &events) != NULL)
    ;
  forge(m, &b, &w);
  wl_release(&h);
  ASSERT(wl_agent_next(&b, &events) == NULL);
  ASSERT_EQ(WL_ECORRUPT, wl_agent_status(&b));
  ASSERT_EQ(WL_ECORRUPT, wl_agent_status(&a));
  ASSERT_EQ(WL_ECORRUPT, wl_request(&a, &h, NAME("y"), WL_EXCLUSIVE, 0));
  printf("  %s: refused\n", what);
  wl_agent_close(&a);
  wl_agent_close(&b);
  wl_scope_close(m);
  tshm_remove(path);
}

static void index_out_of_range(wl_manager_t *m, wl_agent_t *b, wl_request_t *w) {
  (void)b;
  rec_of(m, w)->local = 0x4141414141414141ULL;
}

/* A request index that names another request of the same agent. */
static void index_of_another(wl_manager_t *m, wl_agent_t *b, wl_request_t *w) {
  (void)b;
  rec_of(m, w)->local = 0;
}

static void agent_index_out_of_range(wl_manager_t *m, wl_agent_t *b,
                                     wl_request_t *w) {
  (void)w;
  agent_rec_of(m, b)->local = 0x4141414141414141ULL;
}

static void test_forged_indexes(void) {
  expect_grant_refused("a request index out of range", index_out_of_range);
  expect_grant_refused("a request index of another request", index_of_another);
  expect_grant_refused("an agent index out of range", agent_index_out_of_range);
}

/* A held lock's record names another name, of 256 units: the snapshot's
 * entries still have their own name's length, whatever the record says. */
static void test_snapshot_forged_name(void) {
  static uint16_t long_name[256];
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t x, l;
  wl_snapshot_t snap;
  size_t i;

  for (i = 0; i < 256; i++)
    long_name[i] = 'L';
  tshm_path(path, sizeof(path), "hostile");
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("a"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &x, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(WL_GRANTED_AT_ONCE,
            wl_request(&a, &l, long_name, 256, WL_EXCLUSIVE, 0));
  rec_of(m, &x)->name = rec_of(m, &l)->name;
  if (wl_snapshot(m, &snap) == 0) {
    ASSERT_EQ(2, snap.nheld);
    for (i = 0; i < snap.nheld; i++)
      ASSERT_EQ(snap.held[i].name[0] == 'x' ? 1 : 256, snap.held[i].name_len);
    wl_snapshot_free(&snap);
  }
  wl_agent_close(&a);
  wl_scope_close(m);
  tshm_remove(path);
}

/* The file changes between the snapshot's two walks: a queue made to loop
 * (another process writing it without the mutex). */
static wl_manager_t *looped;
static wl_request_t *loop_at;

static void loop_queue(const char *point) {
  if (strcmp(point, "snapshot") == 0) {
    wl__req_t *r = rec_of(looped, loop_at);
    r->qlink.next = loop_at->off + offsetof(wl__req_t, qlink);
  }
}

static void test_snapshot_changed_between_walks(void) {
  void (*hook)(const char *) = wl__fault_hook;
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t h, w;
  wl_snapshot_t snap;

  m = hold_and_wait(&a, &h, &w);
  looped = m;
  loop_at = &w;
  wl__fault_hook = loop_queue;
  ASSERT_EQ(WL_ECORRUPT, wl_snapshot(m, &snap));
  wl__fault_hook = hook;
  wl_agent_close(&a);
  wl_scope_close(m);
  tshm_remove(path);
}

/* Two handles of a new manager (as two processes would have), with an
 * agent each. */
static void two_handles(wl_manager_t **m1, wl_manager_t **m2, wl_agent_t *a,
                        wl_agent_t *b) {
  tshm_path(path, sizeof(path), "hostile");
  *m1 = tscope_open(path, SIZE);
  *m2 = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(*m1, a, ID("a"), tignore_notify));
  ASSERT_EQ(0, wl_agent_init(*m2, b, ID("b"), tignore_notify));
}

/* Corruption found through one handle reaches every other: a handle of the
 * same process (as another process would) refuses the manager at its next
 * operation, and its agents are woken to learn it. */
static void test_corruption_reaches_every_handle(void) {
  wl_manager_t *m1, *m2;
  wl_agent_t a, b;
  wl_request_t h, w, v;
  struct pollfd p;
  unsigned events;

  two_handles(&m1, &m2, &a, &b);
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&b, &h, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_request(&a, &w, NAME("x"), WL_EXCLUSIVE, 0));
  while (wl_agent_next(&a, &events) != NULL)
    ;
  wl_agent_woken(&a);
  WL__HDR(m2)->nbuckets = 3;
  ASSERT_EQ(WL_ECORRUPT, wl_request(&b, &v, NAME("y"), WL_SHARED, 0));
  /* a waits in "another process": its FIFO was written. */
  p.fd = wl_agent_wake_fd(&a);
  p.events = POLLIN;
  ASSERT_EQ(1, poll(&p, 1, 5000));
  ASSERT(wl_agent_next(&a, &events) == NULL);
  ASSERT_EQ(WL_ECORRUPT, wl_agent_status(&a));
  ASSERT_EQ(WL_ECORRUPT, wl_request(&a, &v, NAME("z"), WL_SHARED, 0));
  wl_agent_close(&a);
  wl_agent_close(&b);
  wl_scope_close(m1);
  wl_scope_close(m2);
  tshm_remove(path);
}

/* A child dies holding the mutex, and the region is corrupt so that the
 * repair fails part-way: then no handle, old or new, of any process, may
 * use the manager. */
static void die_holding_the_mutex(const char *file, int in, int out) {
  wl_manager_t *m = tscope_open(file, SIZE);
  wl_agent_t c;
  wl_request_t r;

  (void)in;
  (void)out;
  ASSERT_EQ(0, wl_agent_init(m, &c, ID("c"), tignore_notify));
  tkill_at("hold");
  wl_request(&c, &r, NAME("x"), WL_EXCLUSIVE, 0);
  _exit(1);
}

static void test_failed_repair_is_final(void) {
  wl_manager_t *m1, *m2, *m3 = NULL;
  wl_agent_t a, b;
  wl_request_t r;
  tchild_t child;
  char err[512];

  tshm_path(path, sizeof(path), "hostile");
  tchild_run(&child, path, die_holding_the_mutex);
  m1 = tscope_open(path, SIZE);
  m2 = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m1, &a, ID("a"), tignore_notify));
  ASSERT_EQ(0, wl_agent_init(m2, &b, ID("b"), tignore_notify));
  /* A block whose size class is out of range: the repair's scan stops.
   * (Made before the child dies: a sweeper may repair at once.) */
  ((wl__block_t *)(m1->base + a.off - sizeof(wl__block_t)))->cls = 99;
  ASSERT_EQ(1, write(child.to, "g", 1));
  tchild_reaped(&child, 1);
  ASSERT_EQ(WL_ECORRUPT, wl_request(&a, &r, NAME("y"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(WL_ECORRUPT, wl_request(&b, &r, NAME("z"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(WL_ECORRUPT, wl_scope_open(path, SIZE, 0600, &m3, err, sizeof(err)));
  ASSERT(m3 == NULL);
  wl_agent_close(&a);
  wl_agent_close(&b);
  wl_scope_close(m1);
  wl_scope_close(m2);
  tshm_remove(path);
}

/* A file whose ready word was cleared (while a process uses it, or after)
 * is refused, never initialised again: web-locks puts only whole files in
 * place, so one not marked ready is not its own to write. */
static void clear_ready(void) {
  uint32_t zero = 0;
  int fd = open(path, O_WRONLY);
  ASSERT(fd >= 0);
  ASSERT_EQ(sizeof(zero), pwrite(fd, &zero, sizeof(zero), READY_AT));
  close(fd);
}

static void test_ready_cleared(void) {
  static char before[SIZE], after[SIZE];
  wl_manager_t *m1, *m2 = NULL;
  wl_agent_t a;
  wl_request_t x;
  char err[512];
  unsigned events;
  int fd;

  tshm_path(path, sizeof(path), "hostile");
  m1 = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m1, &a, ID("a"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &x, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT(wl_agent_next(&a, &events) == &x);
  clear_ready();
  ASSERT_EQ(WL_ECORRUPT, wl_scope_open(path, SIZE, 0600, &m2, err, sizeof(err)));
  ASSERT(strstr(err, "not marked ready") != NULL);
  wl_agent_close(&a);
  wl_scope_close(m1);
  clear_ready();
  fd = open(path, O_RDONLY);
  ASSERT_EQ(SIZE, pread(fd, before, SIZE, 0));
  ASSERT_EQ(WL_ECORRUPT, wl_scope_open(path, SIZE, 0600, &m2, err, sizeof(err)));
  ASSERT(strstr(err, "not marked ready") != NULL);
  ASSERT_EQ(SIZE, pread(fd, after, SIZE, 0));
  ASSERT(memcmp(before, after, SIZE) == 0);
  close(fd);
  tshm_remove(path);
}

/* One handle uses far more of the region than another has touched yet:
 * the other covers it (its limit rises) at its next operation. */
static void test_region_grown_by_another_handle(void) {
  static uint16_t name[1000];
  static wl_request_t held[200], queued[200];
  wl_manager_t *m1, *m2;
  wl_agent_t a, b;
  wl_snapshot_t snap;
  size_t i;

  two_handles(&m1, &m2, &a, &b);
  for (i = 0; i < 200; i++) {
    name[0] = (uint16_t)i;
    ASSERT_EQ(WL_GRANTED_AT_ONCE,
              wl_request(&a, &held[i], name, 1000, WL_EXCLUSIVE, 0));
  }
  ASSERT(WL__HDR(m1)->used > m2->limit);
  for (i = 0; i < 200; i++) {
    name[0] = (uint16_t)i;
    ASSERT_EQ(0, wl_request(&b, &queued[i], name, 1000, WL_EXCLUSIVE, 0));
  }
  ASSERT_EQ(0, wl_snapshot(m2, &snap));
  ASSERT_EQ(200, snap.nheld);
  ASSERT_EQ(200, snap.npending);
  wl_snapshot_free(&snap);
  ASSERT_EQ(0, wl__check(m2));
  wl_agent_close(&a);
  wl_agent_close(&b);
  wl_scope_close(m1);
  wl_scope_close(m2);
  tshm_remove(path);
}

/* Offsets inside the region but not on a record's alignment (a misaligned
 * atomic faults on some processors; UBSan reports any misaligned access). */
static void test_misaligned_offsets(void) {
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t h, w;
  unsigned events;

  m = hold_and_wait(&a, &h, &w);
  rec_of(m, &w)->name += 1;
  rec_of(m, &w)->qlink.next += 3;
  wl_release(&h);
  while (wl_agent_next(&a, &events) != NULL)
    ;
  ASSERT_EQ(WL_ECORRUPT, wl_agent_status(&a));
  wl_agent_close(&a);
  wl_scope_close(m);
  tshm_remove(path);
}

/* The file removed while processes use it, and made anew at the same path:
 * the new file's agents' FIFOs have names of their own, so an agent of the
 * old file that leaves removes none of them, and a wake-up reaches the new
 * agent. */
static void test_file_made_anew(void) {
  wl_manager_t *old, *fresh, *other;
  wl_agent_t a1, a2, b;
  wl_request_t h, w;
  struct pollfd p;
  struct stat st;
  unsigned events;

  tshm_path(path, sizeof(path), "hostile");
  old = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(old, &a1, ID("a1"), tignore_notify));
  ASSERT_EQ(0, unlink(path));
  fresh = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(fresh, &a2, ID("a2"), tignore_notify));
  /* Another handle: another owner, as another process would be. */
  other = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(other, &b, ID("b"), tignore_notify));
  ASSERT_EQ(a1.off, a2.off); /* the same record, in each file */
  wl_agent_close(&a1);
  wl_scope_close(old);
  ASSERT_EQ(0, fstat(wl_agent_wake_fd(&a2), &st));
  ASSERT_EQ(1, st.st_nlink);
  /* b wakes a2 through a2's FIFO, found by its name. */
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&b, &h, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_request(&a2, &w, NAME("x"), WL_EXCLUSIVE, 0));
  while (wl_agent_next(&a2, &events) != NULL)
    ;
  wl_agent_woken(&a2);
  ASSERT_EQ(1, wl_release(&h));
  p.fd = wl_agent_wake_fd(&a2);
  p.events = POLLIN;
  ASSERT_EQ(1, poll(&p, 1, 5000));
  wl_agent_close(&a2);
  wl_agent_close(&b);
  wl_scope_close(fresh);
  wl_scope_close(other);
  tshm_remove(path);
}

/* A process that creates a scope stops just before its file appears: the
 * file is whole by then, and until then there is none at the path (never
 * an empty one, which an opener would take for corruption). Another process
 * opens the scope meanwhile, and makes it; the first then opens that one. */
static int pause_in, pause_out;

static void pause_at_create(const char *point) {
  char byte;

  if (strcmp(point, "create") == 0) {
    ASSERT_EQ(1, write(pause_out, "p", 1));
    ASSERT_EQ(1, read(pause_in, &byte, 1));
  }
}

static void create_slowly(const char *file, int in, int out) {
  wl_manager_t *m;

  pause_in = in;
  pause_out = out;
  wl__fault_hook = pause_at_create;
  m = tscope_open(file, SIZE);
  ASSERT_EQ(1, write(out, "o", 1));
  wl_scope_close(m);
}

static void test_creator_stopped_before_its_file_appears(void) {
  wl_manager_t *m;
  tchild_t child;
  struct stat st;

  tshm_path(path, sizeof(path), "hostile");
  tchild_run(&child, path, create_slowly);
  ASSERT_EQ('p', tchild_do(&child, 'g'));
  ASSERT(stat(path, &st) != 0);
  m = tscope_open(path, SIZE);
  ASSERT_EQ('o', tchild_do(&child, 'g'));
  tchild_reaped(&child, 0);
  wl_scope_close(m);
  tshm_remove(path);
}

/* Holding the mutex, marks the region corrupt (as a process that found it
 * corrupt does) and dies there. */
static wl_manager_t *breaking;

static void break_and_die(const char *point) {
  if (strcmp(point, "hold") == 0) {
    WL__HDR(breaking)->corrupt = 1;
    raise(SIGKILL);
  }
}

static void die_breaking(const char *file, int in, int out) {
  wl_agent_t c;
  wl_request_t r;

  (void)in;
  (void)out;
  breaking = tscope_open(file, SIZE);
  ASSERT_EQ(0, wl_agent_init(breaking, &c, ID("c"), tignore_notify));
  wl__fault_hook = break_and_die;
  wl_request(&c, &r, NAME("x"), WL_EXCLUSIVE, 0);
  _exit(1);
}

/* A process dies holding the mutex of a region another found corrupt: the
 * next one does not repair it and go on (its sweeper would, were it open
 * already: the next process to open it takes the mutex first). */
static void test_no_repair_of_a_corrupt_region(void) {
  wl_manager_t *m = NULL;
  tchild_t child;
  char err[512];

  tshm_path(path, sizeof(path), "hostile");
  tchild_run(&child, path, die_breaking);
  ASSERT_EQ(1, write(child.to, "g", 1));
  tchild_reaped(&child, 1);
  ASSERT_EQ(WL_ECORRUPT, wl_scope_open(path, SIZE, 0600, &m, err, sizeof(err)));
  tshm_remove(path);
}

/* A request whose order key the file says is INT64_MIN: a snapshot takes
 * its magnitude as its serial without overflow (UBSan aborted). */
static void test_forged_order_key(void) {
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t h;
  wl_snapshot_t snap;
  int rc;

  tshm_path(path, sizeof(path), "forged-qkey");
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("a"), tignore_notify));
  h.parent = 0;
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &h, NAME("x"), WL_EXCLUSIVE, 0));
  ((wl__req_t *)(m->base + h.off))->qkey = INT64_MIN;
  rc = wl_snapshot(m, &snap);
  ASSERT(rc == 0 || rc == WL_ECORRUPT);
  if (rc == 0)
    wl_snapshot_free(&snap);
  wl_agent_close(&a);
  wl_scope_close(m);
  tshm_remove(path);
}

#if defined(__GLIBC__) && !WL_OS_POSIX
/* A file whose mutex words (glibc's __lock at 40, __kind at 56) say: a
 * robust priority-inheritance mutex held by a thread that does not exist.
 * Its lock would ask the kernel (FUTEX_LOCK_PI), which answers ESRCH, on
 * which glibc aborts the process: a look and an open say ECORRUPT instead. */
static void test_forged_mutex_kind(void) {
  wl_manager_t *m;
  wl_snapshot_t snap;
  char err[512];
  int fd;
  int32_t lock = 0x3ffffff0, kind;

  tshm_path(path, sizeof(path), "forged-kind");
  m = tscope_open(path, SIZE);
  wl_scope_close(m);
  fd = open(path, O_RDWR);
  ASSERT(fd >= 0);
  ASSERT_EQ(4, pread(fd, &kind, 4, 56));
  kind |= PTHREAD_PRIO_INHERIT << 5; /* PTHREAD_MUTEX_PRIO_INHERIT_NP */
  ASSERT_EQ(4, pwrite(fd, &kind, 4, 56));
  ASSERT_EQ(4, pwrite(fd, &lock, 4, 40));
  close(fd);
  ASSERT_EQ(WL_ECORRUPT, wl_scope_peek(path, 0600, 1000, &snap, err, sizeof(err)));
  m = NULL;
  ASSERT_EQ(WL_ECORRUPT, wl_scope_open(path, SIZE, 0600, &m, err, sizeof(err)));
  tshm_remove(path);
}
#endif

/* A header whose last order key is 2^53 or more: serials would lose
 * precision in JS and keys turn negative as int64. Written after the open,
 * the next request fails as corrupt; in the file, the open refuses it. */
static void test_forged_stamp(void) {
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t r;
  char err[512];

  tshm_path(path, sizeof(path), "forged-stamp");
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("a"), tignore_notify));
  WL__HDR(m)->stamp = WL__STAMP_MAX;
  r.parent = 0;
  ASSERT_EQ(WL_ECORRUPT, wl_request(&a, &r, NAME("x"), WL_EXCLUSIVE, 0));
  wl_agent_close(&a);
  wl_scope_close(m);
  tshm_remove(path);
  m = tscope_open(path, SIZE);
  WL__HDR(m)->stamp = WL__STAMP_MAX;
  wl_scope_close(m);
  m = NULL;
  ASSERT_EQ(WL_ECORRUPT, wl_scope_open(path, SIZE, 0600, &m, err, sizeof(err)));
  tshm_remove(path);
}

int main(void) {
  RUN(test_failed_repair_is_final);
  RUN(test_forged_stamp);
#if defined(__GLIBC__) && !WL_OS_POSIX
  RUN(test_forged_mutex_kind);
#endif
  RUN(test_forged_order_key);
  RUN(test_forged_indexes);
  RUN(test_snapshot_forged_name);
  RUN(test_snapshot_changed_between_walks);
  RUN(test_corruption_reaches_every_handle);
  RUN(test_ready_cleared);
  RUN(test_region_grown_by_another_handle);
  RUN(test_misaligned_offsets);
  RUN(test_file_made_anew);
  RUN(test_creator_stopped_before_its_file_appears);
  RUN(test_no_repair_of_a_corrupt_region);
  return 0;
}
