/* wl_scope_peek on Windows (os/win/), with processes: a look at a live
 * scope, at one whose only process was ended by TerminateProcess (its
 * entries dead, not swept), at one whose mutex's holder died holding it
 * (left for the next opener to repair, the file's bytes as they were), at
 * one whose mutex a live process holds (the look gives up; and when that
 * holder dies while a look waits), and at bad files. Child processes are
 * this program run again (twin_spawn): `child <mode> <path> <event>`. */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>

#include <errno.h>
#include <stdlib.h>

#include "test.h"

#define SIZE (1 << 20)
#define WAIT_MS 10000

static char path[MAX_PATH];
static char err[1024];

/* ---- The children ------------------------------------------------------ */

/* Holds x and queues for it with a second agent, says so, and waits to be
 * ended. */
static void child_hold(const char *p, const char *ready) {
  wl_manager_t *m = tscope_open(p, SIZE);
  wl_agent_t a, b;
  wl_request_t x, y;

  ASSERT_EQ(0, wl_agent_init(m, &a, ID("holder"), tignore_notify));
  ASSERT_EQ(0, wl_agent_init(m, &b, ID("waiter"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &x, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_request(&b, &y, NAME("x"), WL_EXCLUSIVE, 0));
  twin_set(twin_event_open(ready));
  Sleep(INFINITE);
}

/* Takes the scope's mutex, says so, and waits to be ended. */
static void child_lock(const char *p, const char *ready) {
  wl_manager_t *m = tscope_open(p, SIZE);

  ASSERT_EQ(0, wl__lock(m));
  twin_set(twin_event_open(ready));
  Sleep(INFINITE);
}

static int child(int argc, char **argv) {
  if (argc == 5 && strcmp(argv[2], "hold") == 0)
    child_hold(argv[3], argv[4]);
  else if (argc == 5 && strcmp(argv[2], "lock") == 0)
    child_lock(argv[3], argv[4]);
  fprintf(stderr, "a child with arguments it does not know\n");
  return 2;
}

/* Runs a child in `mode` on the scope, and waits until it says it is
 * ready: its process handle. */
static void *spawn_ready(const char *mode) {
  char name[64], args[1024];
  void *ready = twin_event(name), *c;

  snprintf(args, sizeof(args), "%s \"%s\" %s", mode, path, name);
  c = twin_spawn(args);
  ASSERT(twin_wait(ready, 30000));
  CloseHandle(ready);
  return c;
}

/* ---- The cases -------------------------------------------------------- */

static char *file_bytes(void) {
  char *bytes = malloc(SIZE);
  FILE *f = fopen(path, "rb");

  ASSERT(bytes != NULL && f != NULL);
  ASSERT_EQ(1, fread(bytes, SIZE, 1, f));
  fclose(f);
  return bytes;
}

static void expect_unchanged(const char *before) {
  char *after = file_bytes();

  ASSERT(memcmp(before, after, SIZE) == 0);
  free(after);
}

static int peek(wl_snapshot_t *snap) {
  err[0] = '\0';
  return wl_scope_peek(path, 0600, WAIT_MS, snap, err, sizeof(err));
}

static void expect_entry(const wl_info_t *info, const char *client_id,
                         uint32_t pid, int alive) {
  ASSERT_EQ(1, info->name_len);
  ASSERT_EQ('x', info->name[0]);
  ASSERT_EQ(strlen(client_id), info->client_id_len);
  ASSERT(memcmp(client_id, info->client_id, info->client_id_len) == 0);
  ASSERT_EQ(pid, info->pid);
  ASSERT_EQ(alive, info->alive);
}

/* This process holds "x" and queues for it again: both alive, through a
 * handle of the look's own; the mapping's bytes as they were. */
static void test_live(void) {
  wl_manager_t *m;
  wl_agent_t a, b;
  wl_request_t x, y;
  wl_snapshot_t snap;
  char *before = malloc(SIZE);

  tshm_path(path, sizeof(path), "peek-live");
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("holder"), tignore_notify));
  ASSERT_EQ(0, wl_agent_init(m, &b, ID("waiter"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &x, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl_request(&b, &y, NAME("x"), WL_SHARED, 0));
  memcpy(before, m->map, SIZE);
  ASSERT_EQ(0, peek(&snap));
  ASSERT(memcmp(before, m->map, SIZE) == 0);
  ASSERT_EQ(1, snap.nheld);
  ASSERT_EQ(1, snap.npending);
  expect_entry(&snap.held[0], "holder", GetCurrentProcessId(), 1);
  expect_entry(&snap.pending[0], "waiter", GetCurrentProcessId(), 1);
  wl_snapshot_free(&snap);
  free(before);
  ASSERT_EQ(1, wl_release(&x));
  ASSERT_EQ(1, wl_release(&y));
  wl_agent_close(&a);
  wl_agent_close(&b);
  wl_scope_close(m);
  tshm_remove(path);
}

/* The only process of the scope is ended: nothing sweeps, and a look
 * shows its entries dead, again and again, the file unchanged. */
static void test_dead_unswept(void) {
  wl_snapshot_t snap;
  char *before;
  uint32_t pid;
  void *c;
  int n;

  tshm_path(path, sizeof(path), "peek-dead");
  c = spawn_ready("hold");
  pid = GetProcessId(c);
  ASSERT_EQ(0, peek(&snap));
  expect_entry(&snap.held[0], "holder", pid, 1);
  wl_snapshot_free(&snap);
  twin_kill(c);
  ASSERT_EQ(137, twin_exit(c));
  before = file_bytes();
  for (n = 0; n < 2; n++) {
    ASSERT_EQ(0, peek(&snap));
    ASSERT_EQ(1, snap.nheld);
    ASSERT_EQ(1, snap.npending);
    expect_entry(&snap.held[0], "holder", pid, 0);
    expect_entry(&snap.pending[0], "waiter", pid, 0);
    wl_snapshot_free(&snap);
    expect_unchanged(before);
  }
  free(before);
  tshm_remove(path);
}

typedef struct {
  wl_snapshot_t snap;
  int rc;
} tlook_t;

static DWORD WINAPI peek_thread(void *arg) {
  tlook_t *l = arg;

  l->rc = peek(&l->snap);
  return 0;
}

/* A live process holds the mutex: a look gives up after its wait; one
 * that waits while the holder is ended finds the holder word set and
 * repairs nothing (WL_EREPAIR), nor does the next, which leaves the file's
 * bytes as they were; the next opener repairs, and the scope goes on. */
static void test_mutex_holder(void) {
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t x;
  wl_snapshot_t snap;
  tlook_t look;
  HANDLE thread;
  char *before;
  void *c;

  tshm_path(path, sizeof(path), "peek-mutex");
  c = spawn_ready("lock");
  ASSERT_EQ(-ETIMEDOUT, wl_scope_peek(path, 0600, 50, &snap, err, sizeof(err)));
  ASSERT(strstr(err, "busy") != NULL && strstr(err, path) != NULL);
  thread = CreateThread(NULL, 0, peek_thread, &look, 0, NULL);
  ASSERT(thread != NULL);
  twin_kill(c);
  ASSERT_EQ(137, twin_exit(c));
  ASSERT(twin_wait(thread, 30000));
  CloseHandle(thread);
  ASSERT_EQ(WL_EREPAIR, look.rc);
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

/* No file (none made), and a file of garbage (refused, unchanged). */
static void test_bad_files(void) {
  static char garbage[8192];
  wl_snapshot_t snap;
  FILE *f;

  tshm_path(path, sizeof(path), "peek-bad");
  ASSERT_EQ(-ENOENT, peek(&snap));
  ASSERT(strstr(err, "there is no scope's file at") != NULL);
  ASSERT(GetFileAttributesA(path) == INVALID_FILE_ATTRIBUTES);
  memset(garbage, 0x5a, sizeof(garbage));
  f = fopen(path, "wb");
  ASSERT(f != NULL);
  ASSERT_EQ(1, fwrite(garbage, sizeof(garbage), 1, f));
  fclose(f);
  ASSERT_EQ(WL_ECORRUPT, peek(&snap));
  ASSERT(strstr(err, "not a web-locks manager file") != NULL);
  tshm_remove(path);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "child") == 0)
    return child(argc, argv);
  RUN(test_live);
  RUN(test_dead_unswept);
  RUN(test_mutex_holder);
  RUN(test_bad_files);
  return 0;
}
