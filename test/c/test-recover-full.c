/* Crash recovery of a full machine-wide manager: the region filled until requests
 * fail with WL_ENOMEM (the quota error), then a process killed at each
 * named point where it holds the mutex. The repair must need no room (the
 * table of names is rebuilt in the block it had), and the scope goes on as
 * a full scope: the next operation recovers, a query works, a new name is
 * still refused, a release frees room and a request is granted again. The
 * same with a full file system: a tmpfs smaller than the manager's file,
 * whose pages run out before the region does. */
#define _GNU_SOURCE

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

/* A region of 64 KiB: a few hundred locks. */
#define SIZE (17 * 4096)
/* The manager's file on the small tmpfs, larger than the tmpfs. */
#define TMPFS_FILE_SIZE (1 << 20)
#define TMPFS_SIZE "64k"
#define MAX 4096

/* Where the child holds the mutex when it is killed, and what it does to
 * get there (see child_op). */
static const char *const points[] = {
    "snapshot",     "unhold",         "end",           "mail",
    "hold",         "free",           "request-alloc", "alloc",
    "request-name", "request-queued", "steal",         "request-stole"};
#define NPOINTS (sizeof(points) / sizeof(points[0]))

static char path[256];
static uint64_t size;
static int child_no;

static void own_name(uint16_t *units, int no) {
  units[0] = 'k';
  units[1] = (uint16_t)('a' + no);
}

/* A name the parent holds throughout: a child's request for it waits, or
 * steals it. */
static const uint16_t held_name[1] = {'f'};

/* Requests that need a request record: the parent makes room for one. */
static int needs_room(const char *point) {
  return strcmp(point, "alloc") == 0 || strncmp(point, "request-", 8) == 0 ||
         strcmp(point, "steal") == 0;
}

/* Each child joins, holds a name of its own (the parent queues for it), and
 * when told, arms its point and makes the operation that passes it. */
static void child(const char *p, int in, int out) {
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t own, more;
  wl_snapshot_t snap;
  uint16_t units[2];
  unsigned char point;
  const char *at;

  m = tscope_open(p, size);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("child"), tignore_notify));
  own_name(units, child_no);
  ASSERT_EQ(WL_GRANTED_AT_ONCE,
            wl_request(&a, &own, units, 2, WL_EXCLUSIVE, 0));
  ASSERT_EQ(1, write(out, "o", 1));
  ASSERT_EQ(1, read(in, &point, 1));
  at = points[point];
  tkill_at(at);
  if (strcmp(at, "snapshot") == 0)
    wl_snapshot(m, &snap);
  else if (strcmp(at, "request-alloc") == 0)
    wl_request(&a, &more, held_name, 1, WL_EXCLUSIVE, 0);
  else if (needs_room(at))
    wl_request(&a, &more, held_name, 1, WL_EXCLUSIVE,
               strcmp(at, "steal") == 0 || strcmp(at, "request-stole") == 0
                   ? WL_STEAL
                   : 0);
  else
    wl_release(&own);
  /* Not killed: the parent sees 'x' instead of an end of file. */
  ASSERT_EQ(1, write(out, "x", 1));
}

/* The parent's locks that fill the region. */
static wl_request_t fill[MAX];
static int nfill;
static unsigned serial;

/* Requests `most` new names of a length (0: until WL_ENOMEM). */
static void fill_with(wl_agent_t *p, size_t length, int most) {
  uint16_t units[900];
  int rc, n;

  for (n = 0; most == 0 || n < most; n++) {
    ASSERT(nfill < MAX && length <= 900);
    for (size_t i = 0; i < length; i++)
      units[i] = (uint16_t)('x' + i);
    units[0] = (uint16_t)(0x100 + serial);
    if (length > 1)
      units[1] = (uint16_t)(serial >> 16);
    serial++;
    rc = wl_request(p, &fill[nfill], units, length, WL_EXCLUSIVE, 0);
    if (rc == WL_ENOMEM && most == 0)
      return;
    ASSERT_EQ(WL_GRANTED_AT_ONCE, rc);
    nfill++;
  }
}

/* Fills the region: names of decreasing lengths (a name's record takes a
 * block of 2 KiB, then 1 KiB, ... 128 bytes), so that every block size is
 * used up, the ones the table of names had before it grew included. */
static void fill_up(wl_agent_t *p) {
  static const size_t lengths[] = {900, 420, 180, 60, 1};
  size_t l;

  for (l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++)
    fill_with(p, lengths[l], 0);
}

/* Full: a new name is refused, and the refusal changes nothing. */
static void expect_full(wl_manager_t *m, wl_agent_t *p) {
  wl_request_t extra;

  ASSERT_EQ(WL_ENOMEM, wl_request(p, &extra, NAME("one more"), WL_SHARED, 0));
  ASSERT_EQ(0, wl__check(m));
}

static void run(const char *what) {
  tchild_t kids[NPOINTS];
  wl_request_t waiting[NPOINTS], held;
  wl_snapshot_t snap;
  wl_manager_t *m;
  wl_agent_t p;
  uint16_t units[2];
  size_t i;
  int before;

  /* Forked before this process has threads (see tchild_run). */
  for (i = 0; i < NPOINTS; i++) {
    child_no = (int)i;
    tchild_run(&kids[i], path, child);
  }
  m = tscope_open(path, size);
  ASSERT_EQ(0, wl_agent_init(m, &p, ID("parent"), tignore_notify));
  for (i = 0; i < NPOINTS; i++) {
    ASSERT_EQ('o', tchild_do(&kids[i], 's'));
    own_name(units, (int)i);
    ASSERT_EQ(0, wl_request(&p, &waiting[i], units, 2, WL_EXCLUSIVE, 0));
  }
  ASSERT_EQ(WL_GRANTED_AT_ONCE,
            wl_request(&p, &held, held_name, 1, WL_EXCLUSIVE, 0));
  /* Enough names first for the table to grow past its first sizes. */
  fill_with(&p, 1, 100);
  fill_up(&p);
  expect_full(m, &p);
  /* On the small tmpfs, the file system is full long before the region. */
  ASSERT_EQ(0, wl__lock(m));
  ASSERT(size == SIZE || WL__HDR(m)->used < m->capacity / 4);
  wl__unlock(m);
  for (i = 0; i < NPOINTS; i++) {
    if (needs_room(points[i]) && strcmp(points[i], "request-alloc") != 0)
      ASSERT_EQ(1, wl_release(&fill[--nfill]));
    /* Killed at its point, holding the mutex: no answer. */
    ASSERT_EQ(0, tchild_do(&kids[i], (char)i));
    tchild_reaped(&kids[i], 1);
    /* The next operation repairs; query works. */
    if (wl_snapshot(m, &snap) != 0) {
      fprintf(stderr, "%s: the scope is corrupt after a crash at '%s'\n", what,
              points[i]);
      ASSERT(0);
    }
    ASSERT(snap.nheld >= (size_t)nfill);
    wl_snapshot_free(&snap);
    ASSERT_EQ(0, wl__check(m));
    /* The dead child's agent ends; its room and any left are filled. */
    ASSERT_EQ(0, wl_sweep(m));
    /* After a steal, the parent takes the name it held back. */
    wl_release(&held);
    ASSERT_EQ(WL_GRANTED_AT_ONCE,
              wl_request(&p, &held, held_name, 1, WL_EXCLUSIVE, 0));
    fill_up(&p);
    expect_full(m, &p);
    /* A release frees room: a request is granted again, and it is full. */
    before = nfill;
    ASSERT_EQ(1, wl_release(&fill[--nfill]));
    fill_up(&p);
    ASSERT(nfill >= before);
    expect_full(m, &p);
    printf("  %s: a full scope recovered from a crash at '%s'\n", what,
           points[i]);
  }
  /* Granted by a child's release, waiting or robbed by a steal. */
  for (i = 0; i < NPOINTS; i++)
    wl_release(&waiting[i]);
  wl_release(&held);
  while (nfill > 0)
    ASSERT_EQ(1, wl_release(&fill[--nfill]));
  ASSERT_EQ(0, wl_snapshot(m, &snap));
  ASSERT_EQ(0, snap.nheld + snap.npending);
  wl_snapshot_free(&snap);
  ASSERT_EQ(0, wl__check(m));
  wl_agent_close(&p);
  ASSERT_EQ(0, wl__check(m));
  wl_scope_close(m);
}

static void test_full_region_recovers(void) {
  tshm_path(path, sizeof(path), "recover-full");
  size = SIZE;
  run("full region");
  tshm_remove(path);
}

/* A process that joins, and when told, takes the mutex, frees the table of
 * names as another version's repair does before it links the names into a
 * new one, and dies there. */
static void free_table_and_die(const char *p, int in, int out) {
  wl_manager_t *m = tscope_open(p, size);
  wl__block_t *b;
  char cmd;

  ASSERT_EQ(1, write(out, "o", 1));
  ASSERT_EQ(1, read(in, &cmd, 1));
  ASSERT_EQ(0, wl__lock(m));
  b = wl__block(m, WL__HDR(m)->buckets);
  b->kind = WL__FREE;
  b->gen++;
  WL__HDR(m)->buckets = 0;
  WL__HDR(m)->nbuckets = 0;
  raise(SIGKILL);
}

/* What the repair assumes: the region has a table block once any name has
 * been linked, which no crash of this version's code takes away. Where that
 * breaks (a region without one: corrupt, or another version's repair cut
 * short after it freed the table), the repair makes a table, which needs
 * room: with room it repairs; in a full region it fails, and the region is
 * reported corrupt (ECORRUPT), never used half repaired. */
static void test_without_its_table_block(void) {
  tchild_t roomy, full;
  wl_snapshot_t snap;
  wl_manager_t *m;
  wl_agent_t p;
  wl_request_t extra;

  tshm_path(path, sizeof(path), "recover-no-table");
  size = SIZE;
  tchild_run(&roomy, path, free_table_and_die);
  tchild_run(&full, path, free_table_and_die);
  m = tscope_open(path, size);
  ASSERT_EQ(0, wl_agent_init(m, &p, ID("parent"), tignore_notify));
  ASSERT_EQ('o', tchild_do(&roomy, 's'));
  ASSERT_EQ('o', tchild_do(&full, 's'));
  fill_with(&p, 1, 40);
  ASSERT_EQ(0, tchild_do(&roomy, 'k'));
  tchild_reaped(&roomy, 1);
  ASSERT_EQ(0, wl_snapshot(m, &snap));
  ASSERT_EQ(nfill, snap.nheld);
  wl_snapshot_free(&snap);
  ASSERT_EQ(0, wl__check(m));
  ASSERT_EQ(0, wl__lock(m));
  ASSERT(WL__HDR(m)->buckets != 0);
  wl__unlock(m);
  fill_up(&p);
  expect_full(m, &p);
  ASSERT_EQ(0, tchild_do(&full, 'k'));
  tchild_reaped(&full, 1);
  ASSERT_EQ(WL_ECORRUPT, wl_snapshot(m, &snap));
  ASSERT_EQ(WL_ECORRUPT, wl_request(&p, &extra, NAME("x"), WL_SHARED, 0));
  ASSERT_EQ(1, __atomic_load_n(&WL__HDR(m)->corrupt, __ATOMIC_RELAXED));
  nfill = 0;
  wl_agent_close(&p);
  wl_scope_close(m);
  tshm_remove(path);
}

/* Root makes a tmpfs of its own at dir, in a mount namespace of its own
 * (the mount goes with the test, however it ends): the only way to fill a
 * file system here without filling the machine's. 0, or -1 after saying
 * why the test is skipped. */
static int small_tmpfs(char *dir) {
  ASSERT(mkdtemp(dir) != NULL);
  if (unshare(CLONE_NEWNS) != 0 ||
      mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
      mount("tmpfs", dir, "tmpfs", 0, "size=" TMPFS_SIZE) != 0) {
    printf("  skipped: cannot mount a tmpfs (%s): needs root in a mount "
           "namespace that allows it\n",
           strerror(errno));
    rmdir(dir);
    return -1;
  }
  snprintf(path, sizeof(path), "%s/scope", dir);
  size = TMPFS_FILE_SIZE;
  return 0;
}

static void small_tmpfs_gone(const char *dir) {
  ASSERT_EQ(0, umount2(dir, MNT_DETACH));
  ASSERT_EQ(0, rmdir(dir));
}

static void test_full_file_system_recovers(void) {
  char dir[] = "/tmp/wl-full-fs-XXXXXX";

  if (small_tmpfs(dir) != 0)
    return;
  run("full file system");
  small_tmpfs_gone(dir);
}

/* A process that joins, and when told, takes the mutex and says the region
 * uses 64 KiB more than it did, without reserving them, as a process that
 * does not reserve would (none of this layout), and dies there. */
static void use_unreserved_and_die(const char *p, int in, int out) {
  wl_manager_t *m = tscope_open(p, size);
  char cmd;

  ASSERT_EQ(1, write(out, "o", 1));
  ASSERT_EQ(1, read(in, &cmd, 1));
  ASSERT_EQ(0, wl__lock(m));
  WL__HDR(m)->used += 64 << 10;
  raise(SIGKILL);
}

/* What the room reserved on the file system assumes: every process using
 * the file reserves before it stores. Where that breaks, on a full file
 * system, the region uses pages that no one reserved: the next process
 * finds them before it touches them, and reports the region corrupt
 * (ECORRUPT), never dying of SIGBUS. */
static void test_pages_no_one_reserved(void) {
  char dir[] = "/tmp/wl-full-fs-XXXXXX";
  tchild_t child;
  wl_snapshot_t snap;
  wl_manager_t *m;
  wl_agent_t p;

  if (small_tmpfs(dir) != 0)
    return;
  tchild_run(&child, path, use_unreserved_and_die);
  m = tscope_open(path, size);
  ASSERT_EQ(0, wl_agent_init(m, &p, ID("parent"), tignore_notify));
  ASSERT_EQ('o', tchild_do(&child, 's'));
  fill_up(&p);
  expect_full(m, &p);
  ASSERT_EQ(0, tchild_do(&child, 'k'));
  tchild_reaped(&child, 1);
  ASSERT_EQ(WL_ECORRUPT, wl_snapshot(m, &snap));
  nfill = 0;
  wl_agent_close(&p);
  wl_scope_close(m);
  small_tmpfs_gone(dir);
}

int main(void) {
  RUN(test_full_region_recovers);
  RUN(test_full_file_system_recovers);
  RUN(test_without_its_table_block);
  RUN(test_pages_no_one_reserved);
  return 0;
}
