/* Review reproductions for the Windows family's byte-range locks
 * (os/win/watch.c): a watcher that (re)enters wl__watch_one while its
 * target's byte is still held but the process its record names has ended
 * and is gone waits for its bell only, and never asks for the byte again.
 *
 * On a real Windows this is the design's own case (os/win/machine.h, point
 * 3): a dead process's locks may be let go after its process handle is
 * signalled. Wine lets go at once, so here the record names another process
 * (`idle`) than the byte's holder (`hold`), as test-win-machine.c's
 * test_watch_asks_again does: the named process ends first, the holder
 * later, as a real Windows may do for one process.
 *
 * The two watch cases fail on the code under review ("0 of 1 grants within
 * 5 s"); test_file_dacl_private (the file's access) fails there too.
 * `test-win-bytelock.exe <case>` runs one case. */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>

#include <aclapi.h>
#include <stdlib.h>

#include <sddl.h>

#include "test.h"
#include "../../src/os/win/machine.h"

#define SIZE (1 << 20)

static char path[MAX_PATH];

static void child_hold(const char *p, const char *held) {
  wl_manager_t *m = tscope_open(p, SIZE);
  wl_agent_t a;
  wl_request_t x;

  ASSERT_EQ(0, wl_agent_init(m, &a, ID("holder"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &x, NAME("x"), WL_EXCLUSIVE, 0));
  twin_set(twin_event_open(held));
  Sleep(INFINITE);
}

static void child_idle(const char *ready) {
  twin_set(twin_event_open(ready));
  Sleep(INFINITE);
}

static int child(int argc, char **argv) {
  if (argc == 5 && strcmp(argv[2], "hold") == 0)
    child_hold(argv[3], argv[4]);
  else if (argc == 5 && strcmp(argv[2], "idle") == 0)
    child_idle(argv[4]);
  fprintf(stderr, "a child with arguments it does not know\n");
  return 2;
}

static void *spawn(const char *mode, const char *a) {
  char args[1024];

  snprintf(args, sizeof(args), "%s \"%s\" %s", mode, path, a);
  return twin_spawn(args);
}

typedef struct {
  void *holder, *idle, *held, *idle_ready;
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t x;
  uint64_t created;
  DWORD pid;
} setup_t;

/* A holder of x in another process, an idle process, and a waiter for x
 * here, whose watcher watches the holder. */
static void setup(setup_t *s, const char *what) {
  char held_name[64], idle_name[64];
  unsigned events;

  s->held = twin_event(held_name);
  s->idle_ready = twin_event(idle_name);
  tshm_path(path, sizeof(path), what);
  s->holder = spawn("hold", held_name);
  ASSERT(twin_wait(s->held, 30000));
  s->idle = spawn("idle", idle_name);
  ASSERT(twin_wait(s->idle_ready, 30000));
  s->m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(s->m, &s->a, ID("waiter"), tfifo_notify));
  ASSERT_EQ(0, wl_request(&s->a, &s->x, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT(wl_agent_next(&s->a, &events) == NULL);
  ASSERT_EQ(0, wl__win_created(s->idle, &s->created));
  s->pid = GetProcessId(s->idle);
}

/* A pid no process has (pids are multiples of 4): OpenProcess fails with
 * ERROR_INVALID_PARAMETER, as a real Windows answers for a process that has
 * ended and whose last handle is closed. (Wine keeps an ended process
 * open to OpenProcess for a while, so a real pid cannot show it here.) */
#define GONE_PID 0xFFFFFFF0u

/* The watched record names process pid; the watcher's bell rings (as a
 * change of the ring, or a repair's wl__ring(m, 1), rings it). */
static void name_and_ring(setup_t *s, DWORD pid) {
  wl__owner_t *self, *o;

  ASSERT_EQ(0, wl__lock(s->m));
  self = WL__REC(s->m, s->m->self, wl__owner_t);
  o = WL__REC(s->m, self->watch, wl__owner_t);
  o->created = s->created;
  o->pid = pid;
  wl__os_watch_target(s->m, self, self->watch);
  wl__unlock(s->m);
}

/* The holder ends: x is granted here without anyone calling wl_sweep. */
static void finish(setup_t *s) {
  twin_kill(s->holder);
  tawait_grant(&s->a, &s->x);
  ASSERT_EQ(137, twin_exit(s->holder));
  ASSERT_EQ(1, wl_release(&s->x));
  wl_agent_close(&s->a);
  wl_scope_close(s->m);
  CloseHandle(s->held);
  CloseHandle(s->idle_ready);
  tshm_remove(path);
}

/* The watcher sees the named process end and asks for the byte again
 * (wl__let_go); then its bell rings, and its next wl__watch_one finds the
 * byte still held and the named process gone (on a real Windows, once the
 * ended process is reaped: here GONE_PID stands for it): it waits for its
 * bell only. The holder's end is never noticed. */
static void test_bell_during_let_go(void) {
  setup_t s;

  setup(&s, "bell-let-go");
  name_and_ring(&s, s.pid);
  /* Nothing says when the watcher has looked: a while, each time. */
  Sleep(300);
  twin_kill(s.idle);
  ASSERT_EQ(137, twin_exit(s.idle));
  Sleep(300); /* the watcher is in wl__let_go */
  name_and_ring(&s, GONE_PID);
  Sleep(300); /* it is in wl__watch_one again: held, no process */
  finish(&s);
}

/* A watcher's first look at a target whose process has ended and is gone
 * before its byte was let go: on a real Windows, a process that opens the
 * scope (its sweep finds the byte held) or whose ring changes just after a
 * holder was killed. */
static void test_first_watch_of_ended_process(void) {
  setup_t s;

  setup(&s, "first-watch");
  twin_kill(s.idle);
  ASSERT_EQ(137, twin_exit(s.idle));
  name_and_ring(&s, GONE_PID);
  Sleep(300);
  finish(&s);
}

/* A handle with read access alone holds any byte lock (LockFileEx needs
 * GENERIC_READ or GENERIC_WRITE): whoever may read the file can hold the
 * mutex's byte (every process's wl__lock then waits) or a dead owner's
 * life byte (never swept). The POSIX family refuses such bits
 * (WL__MODE_OK); here the file's access is its directory's. So the file
 * is to admit this user and SYSTEM alone, whatever its directory: fails on
 * the code under review, which gives the file no DACL of its own. */
static void test_file_dacl_private(void) {
  PSECURITY_DESCRIPTOR sd = NULL;
  PACL dacl = NULL;
  wl_manager_t *m;
  HANDLE r;
  DWORD i;

  tshm_path(path, sizeof(path), "dacl-file");
  m = tscope_open(path, SIZE);
  /* The mechanism: a read-only handle takes the mutex's byte. */
  r = CreateFileA(path, GENERIC_READ,
                  FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                  OPEN_EXISTING, 0, NULL);
  ASSERT(r != INVALID_HANDLE_VALUE);
  ASSERT(wl__win_lock(r, LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY,
                      WL__MUTEX_AT));
  ASSERT(wl__win_lock(r, (DWORD)-1, WL__MUTEX_AT));
  CloseHandle(r);
  ASSERT_EQ(ERROR_SUCCESS,
            GetSecurityInfo(m->fd, SE_FILE_OBJECT, DACL_SECURITY_INFORMATION,
                            NULL, NULL, &dacl, NULL, &sd));
  ASSERT(dacl != NULL);
  printf("  the file's DACL has %u entries\n", (unsigned)dacl->AceCount);
  for (i = 0; i < dacl->AceCount; i++) {
    ACCESS_ALLOWED_ACE *ace;
    char *sid = NULL;
    ASSERT(GetAce(dacl, i, (void **)&ace));
    if (ConvertSidToStringSidA((PSID)&ace->SidStart, &sid)) {
      printf("  type %u mask %08lx %s\n", (unsigned)ace->Header.AceType,
             (unsigned long)ace->Mask, sid);
      LocalFree(sid);
    }
  }
  ASSERT(dacl->AceCount <= 2);
  LocalFree(sd);
  wl_scope_close(m);
  tshm_remove(path);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "child") == 0)
    return child(argc, argv);
  if (argc < 2 || strcmp(argv[1], "test_bell_during_let_go") == 0)
    RUN(test_bell_during_let_go);
  if (argc < 2 || strcmp(argv[1], "test_first_watch_of_ended_process") == 0)
    RUN(test_first_watch_of_ended_process);
  if (argc < 2 || strcmp(argv[1], "test_file_dacl_private") == 0)
    RUN(test_file_dacl_private);
  return 0;
}
