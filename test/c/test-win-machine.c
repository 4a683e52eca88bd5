/* The machine-wide manager on Windows (os/win/), with processes: the file
 * shared and found again, wake-ups between processes, the death watch (a
 * holder ended by TerminateProcess, as Node's child.kill() ends one, and
 * how soon its lock is granted), the mutex's byte let go by a process
 * killed holding it (with other processes having the file open, and with
 * none), the mutex left unusable for good, threads of one handle and its
 * byte locks, proof of life by byte locks whatever the record's identity
 * says (a pid reused by another live process, a copy of a live scope's
 * file) and whatever its probe handle does, the repair after a crash at
 * every named point of the algorithms, who may open the wake events, a wake
 * event's name taken before it is made, a creation killed half-way, a file
 * of another user's, a watched record naming a process gone while its byte
 * is held, and the file's own access list. Child processes are this
 * program run again (twin_spawn): `child <mode> <path> <arguments>`. */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>

#include <aclapi.h>
#include <errno.h>
#include <sddl.h>
#include <stdlib.h>

#include "test.h"
#include "../../src/os/win/machine.h"

#define SIZE (1 << 20)

static char path[MAX_PATH];

/* ---- The children ------------------------------------------------------ */

/* Holds x, says so, and waits to be ended. */
static void child_hold(const char *p, const char *held) {
  wl_manager_t *m = tscope_open(p, SIZE);
  wl_agent_t a;
  wl_request_t x;

  ASSERT_EQ(0, wl_agent_init(m, &a, ID("holder"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &x, NAME("x"), WL_EXCLUSIVE, 0));
  twin_set(twin_event_open(held));
  Sleep(INFINITE);
}

/* Waits for x, which another process holds, until its wake-up says it is
 * granted. */
static void child_wait(const char *p, const char *queued,
                       const char *granted) {
  wl_manager_t *m = tscope_open(p, SIZE);
  wl_agent_t a;
  wl_request_t x;

  ASSERT_EQ(0, wl_agent_init(m, &a, ID("waiter"), tignore_notify));
  ASSERT_EQ(0, wl_request(&a, &x, NAME("x"), WL_EXCLUSIVE, 0));
  twin_set(twin_event_open(queued));
  tawait_grant(&a, &x);
  twin_set(twin_event_open(granted));
  ASSERT_EQ(1, wl_release(&x));
  wl_agent_close(&a);
  wl_scope_close(m);
  exit(0);
}

/* Says it runs, and waits to be ended: a process that has no scope open. */
static void child_idle(const char *ready) {
  twin_set(twin_event_open(ready));
  Sleep(INFINITE);
}

/* Opens the manager, then dies at `point` in its next operation. */
static void child_die(const char *p, const char *point) {
  wl_manager_t *m = tscope_open(p, SIZE);
  wl_agent_t a;

  tkill_at(point);
  wl_agent_init(m, &a, ID("dies"), tignore_notify);
  exit(1);
}

/* Passes every named point of the algorithms (its joining included, which
 * mends the ring), when told to start. */
static void child_work(const char *p, const char *point, const char *go) {
  wl_manager_t *m;
  wl_agent_t c;
  wl_request_t q, z, s, u;

  ASSERT(twin_wait(twin_event_open(go), 60000));
  tkill_at(point);
  m = tscope_open(p, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &c, ID("child"), tignore_notify));
  ASSERT_EQ(0, wl_request(&c, &q, NAME("x"), WL_SHARED, 0));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&c, &z, NAME("z"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(1, wl_abort(&q));
  ASSERT_EQ(WL_GRANTED_AT_ONCE,
            wl_request(&c, &s, NAME("x"), WL_EXCLUSIVE, WL_STEAL));
  ASSERT_EQ(0, wl_request(&c, &u, NAME("y"), WL_EXCLUSIVE, WL_IF_AVAILABLE));
  ASSERT_EQ(1, wl_release(&z));
  ASSERT_EQ(1, wl_release(&s));
  wl_agent_close(&c);
  exit(0);
}

/* Dies making the file: sized and mapped under its temporary name, before
 * its rename. */
static void child_die_creating(const char *p) {
  wl_manager_t *m = NULL;
  char err[256];

  tkill_at("create");
  wl_scope_open(p, 16 << 20, 0600, &m, err, sizeof(err));
  exit(1);
}

/* Adds 1 to the number in the file count, under x, `times` times: a read
 * and a write that another process between them would lose. */
static void child_count(const char *p, const char *count, int times) {
  wl_manager_t *m = tscope_open(p, SIZE);
  wl_agent_t a;
  wl_request_t x;
  uint32_t n;
  DWORD done;
  HANDLE f;
  int i, rc;

  ASSERT_EQ(0, wl_agent_init(m, &a, ID("counter"), tfifo_notify));
  f = CreateFileA(count, GENERIC_READ | GENERIC_WRITE,
                  FILE_SHARE_READ | FILE_SHARE_WRITE, NULL, OPEN_EXISTING,
                  FILE_ATTRIBUTE_NORMAL, NULL);
  ASSERT(f != INVALID_HANDLE_VALUE);
  for (i = 0; i < times; i++) {
    rc = wl_request(&a, &x, NAME("x"), WL_EXCLUSIVE, 0);
    ASSERT(rc == 0 || rc == WL_GRANTED_AT_ONCE);
    tawait_grant(&a, &x);
    ASSERT_EQ(0, SetFilePointer(f, 0, NULL, FILE_BEGIN));
    ASSERT(ReadFile(f, &n, sizeof(n), &done, NULL) && done == sizeof(n));
    n++;
    ASSERT_EQ(0, SetFilePointer(f, 0, NULL, FILE_BEGIN));
    ASSERT(WriteFile(f, &n, sizeof(n), &done, NULL) && done == sizeof(n));
    ASSERT_EQ(1, wl_release(&x));
  }
  CloseHandle(f);
  wl_agent_close(&a);
  wl_scope_close(m);
  exit(0);
}

static int child(int argc, char **argv) {
  if (argc == 5 && strcmp(argv[2], "hold") == 0)
    child_hold(argv[3], argv[4]);
  else if (argc == 6 && strcmp(argv[2], "wait") == 0)
    child_wait(argv[3], argv[4], argv[5]);
  else if (argc == 5 && strcmp(argv[2], "die") == 0)
    child_die(argv[3], argv[4]);
  else if (argc == 6 && strcmp(argv[2], "work") == 0)
    child_work(argv[3], argv[4], argv[5]);
  else if (argc == 5 && strcmp(argv[2], "idle") == 0)
    child_idle(argv[4]);
  else if (argc == 4 && strcmp(argv[2], "die-creating") == 0)
    child_die_creating(argv[3]);
  else if (argc == 6 && strcmp(argv[2], "count") == 0)
    child_count(argv[3], argv[4], atoi(argv[5]));
  fprintf(stderr, "a child with arguments it does not know\n");
  return 2;
}

static void *spawn(const char *mode, const char *a, const char *b) {
  char args[1024];

  snprintf(args, sizeof(args), "%s \"%s\" %s %s", mode, path, a,
           b == NULL ? "" : b);
  return twin_spawn(args);
}

/* The words of the file's mutex, read from the file itself. */
static wl__os_file_mutex_t file_mutex(void) {
  wl__os_file_mutex_t mu;
  FILE *f = fopen(path, "rb");

  ASSERT(f != NULL);
  ASSERT_EQ(0, fseek(f, 40, SEEK_SET));
  ASSERT_EQ(1, fread(&mu, sizeof(mu), 1, f));
  fclose(f);
  return mu;
}

/* No state of a dead process's is left: nothing held, nothing waiting. */
static void expect_empty(wl_manager_t *m) {
  wl_snapshot_t snap;

  ASSERT_EQ(0, wl_sweep(m));
  ASSERT_EQ(0, wl__check(m));
  ASSERT_EQ(0, wl_snapshot(m, &snap));
  ASSERT_EQ(0, snap.nheld + snap.npending);
  wl_snapshot_free(&snap);
}

/* This process's user's SID (a buffer that holds it). */
static PSID token_user(char *buf, DWORD len) {
  HANDLE token;
  DWORD n;

  ASSERT(OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &token));
  ASSERT(GetTokenInformation(token, TokenUser, buf, len, &n));
  CloseHandle(token);
  return ((TOKEN_USER *)buf)->User.Sid;
}

/* A named object of the family's is owned by this user and grants this
 * user and SYSTEM every access (GENERIC_ALL, or what the system mapped it
 * to), and no one else any. */
static void expect_private(HANDLE h) {
  char user_buf[256], system_buf[SECURITY_MAX_SID_SIZE];
  DWORD n = sizeof(system_buf);
  PSID user = token_user(user_buf, sizeof(user_buf)), owner = NULL;
  PSECURITY_DESCRIPTOR sd = NULL;
  int seen_user = 0, seen_system = 0;
  PACL dacl = NULL;
  DWORD i;

  ASSERT(CreateWellKnownSid(WinLocalSystemSid, NULL, system_buf, &n));
  ASSERT_EQ(ERROR_SUCCESS,
            GetSecurityInfo(h, SE_KERNEL_OBJECT,
                            OWNER_SECURITY_INFORMATION |
                                DACL_SECURITY_INFORMATION,
                            &owner, NULL, &dacl, NULL, &sd));
  ASSERT(owner != NULL && EqualSid(owner, user));
  /* A NULL DACL would grant everyone everything. */
  ASSERT(dacl != NULL);
  ASSERT_EQ(2, dacl->AceCount);
  for (i = 0; i < dacl->AceCount; i++) {
    ACCESS_ALLOWED_ACE *ace;
    ASSERT(GetAce(dacl, i, (void **)&ace));
    ASSERT_EQ(ACCESS_ALLOWED_ACE_TYPE, ace->Header.AceType);
    ASSERT(ace->Mask == GENERIC_ALL ||
           (ace->Mask & STANDARD_RIGHTS_ALL) == STANDARD_RIGHTS_ALL);
    if (EqualSid((PSID)&ace->SidStart, user))
      seen_user = 1;
    else if (EqualSid((PSID)&ace->SidStart, system_buf))
      seen_system = 1;
  }
  ASSERT(seen_user && seen_system);
  LocalFree(sd);
}

/* The watcher's last step, as its hook told it (os/win/machine.h:
 * WL__WATCH_STEP), and the pid that its last look read; `stepped` is set at
 * each step. */
static SRWLOCK step_mu = SRWLOCK_INIT;
static const char *step_seen = "";
static uint32_t step_pid;
static HANDLE stepped;

static void on_step(const char *step, uint32_t pid) {
  AcquireSRWLockExclusive(&step_mu);
  step_seen = step;
  if (strcmp(step, "watch-again") != 0)
    step_pid = pid;
  ReleaseSRWLockExclusive(&step_mu);
  SetEvent(stepped);
}

/* What the watchers of the cases before told (a pid may be reused since):
 * they are joined. */
static void steps_forget(void) {
  AcquireSRWLockExclusive(&step_mu);
  step_seen = "";
  step_pid = 0;
  ReleaseSRWLockExclusive(&step_mu);
}

static int step_is(const char *step, uint32_t pid) {
  int is;

  AcquireSRWLockShared(&step_mu);
  is = strcmp(step_seen, step) == 0 && step_pid == pid;
  ReleaseSRWLockShared(&step_mu);
  return is;
}

/* Until the watcher's last step is `step`, in a look that read pid (10 s
 * at most). */
static void await_step(const char *step, uint32_t pid) {
  uint64_t deadline = tnow_ns() + 10000000000u, now;

  while (!step_is(step, pid)) {
    now = tnow_ns();
    if (now >= deadline) {
      fprintf(stderr, "the watcher did not reach %s (pid %lu) in 10 s\n",
              step, (unsigned long)pid);
      ASSERT(0);
    }
    WaitForSingleObject(stepped, (DWORD)((deadline - now) / 1000000) + 1);
  }
}

/* ---- The cases ----------------------------------------------------------- */

/* An agent's wake event is made with a DACL of its own (this user and
 * SYSTEM), not the token's default: an elevated process's default DACL
 * shuts the same user's other processes out, which would then never be
 * woken. (Wine has no elevation: what it shows is that the DACL is the one
 * given.) */
static void test_named_objects_private(void) {
  wl_manager_t *m;
  wl_agent_t a;

  tshm_path(path, sizeof(path), "dacl");
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("agent"), tignore_notify));
  expect_private(wl_agent_wake_fd(&a));
  wl_agent_close(&a);
  wl_scope_close(m);
  tshm_remove(path);
}

/* Two handles of one process are of one file, under its path alone: the
 * temporary name it was made under is gone. */
static void test_one_file(void) {
  wl_manager_t *m1, *m2;
  uint64_t dev1, ino1, dev2, ino2;
  char pattern[MAX_PATH + 8];
  WIN32_FIND_DATAA fd;
  HANDLE find;

  tshm_path(path, sizeof(path), "file");
  m1 = tscope_open(path, SIZE);
  m2 = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_scope_identity(m1, &dev1, &ino1));
  ASSERT_EQ(0, wl_scope_identity(m2, &dev2, &ino2));
  ASSERT(dev1 == dev2 && ino1 == ino2);
  /* "<name>.*" matches <name> too. */
  snprintf(pattern, sizeof(pattern), "%s.*", path);
  find = FindFirstFileA(pattern, &fd);
  ASSERT(find != INVALID_HANDLE_VALUE);
  do
    ASSERT_EQ(0, strcmp(fd.cFileName, strrchr(path, '\\') + 1));
  while (FindNextFileA(find, &fd));
  FindClose(find);
  wl_scope_close(m2);
  wl_scope_close(m1);
  tshm_remove(path);
}

/* A file made for the path is put in place by a rename that never
 * replaces one another process put there first: -EEXIST, that file left
 * as it was, and the made one removed with its temporary name. */
static void test_publish_never_replaces(void) {
  wl_manager_t *m = calloc(1, sizeof(*m));
  char err[256], tmp[sizeof(m->tmp)];
  WIN32_FILE_ATTRIBUTE_DATA fa;
  DWORD n;
  HANDLE h;

  ASSERT(m != NULL);
  tshm_path(path, sizeof(path), "publish");
  ASSERT_EQ(0, wl__os_file_create(m, path, SIZE, 0600, err, sizeof(err)));
  ASSERT(m->tmp[0] != '\0');
  strcpy(tmp, m->tmp);
  h = CreateFileA(path, GENERIC_WRITE, 0, NULL, CREATE_NEW,
                  FILE_ATTRIBUTE_NORMAL, NULL);
  ASSERT(h != INVALID_HANDLE_VALUE);
  ASSERT(WriteFile(h, "other", 5, &n, NULL) && n == 5);
  CloseHandle(h);
  ASSERT_EQ(-EEXIST, wl__os_file_publish(m, path, err, sizeof(err)));
  wl__os_file_drop(m);
  ASSERT(GetFileAttributesA(tmp) == INVALID_FILE_ATTRIBUTES);
  ASSERT(GetFileAttributesExA(path, GetFileExInfoStandard, &fa));
  ASSERT_EQ(5, fa.nFileSizeLow);
  free(m);
  tshm_remove(path);
}

/* A process killed while it makes the file, once its temporary file is
 * sized (16 MiB, allocated whole) and before its rename, leaves nothing
 * behind: the temporary file was to go with its last handle. */
static void test_killed_creation_leaves_nothing(void) {
  char pattern[MAX_PATH + 16];
  WIN32_FIND_DATAA fd;
  HANDLE find;
  int n = 0;

  tshm_path(path, sizeof(path), "leak");
  ASSERT_EQ(137, twin_exit(spawn("die-creating", "", NULL)));
  snprintf(pattern, sizeof(pattern), "%s.new-*", path);
  find = FindFirstFileA(pattern, &fd);
  if (find != INVALID_HANDLE_VALUE) {
    do {
      fprintf(stderr, "left behind: %s, %lu bytes\n", fd.cFileName,
              (unsigned long)fd.nFileSizeLow);
      n++;
    } while (FindNextFileA(find, &fd));
    FindClose(find);
  }
  tshm_remove(path);
  ASSERT_EQ(0, n);
}

/* Win32 drops a name's trailing dots ("web-locks.." would be "web-locks"):
 * the file of scope ".." is its own. */
static void test_trailing_dots(void) {
  char dots[MAX_PATH + 2];
  wchar_t wdots[MAX_PATH + 8];
  wl_manager_t *m1, *m2;
  uint64_t dev1, ino1, dev2, ino2;

  tshm_path(path, sizeof(path), "dots");
  snprintf(dots, sizeof(dots), "%s..", path);
  m1 = tscope_open(path, SIZE);
  m2 = tscope_open(dots, SIZE);
  ASSERT_EQ(0, wl_scope_identity(m1, &dev1, &ino1));
  ASSERT_EQ(0, wl_scope_identity(m2, &dev2, &ino2));
  ASSERT(ino1 != ino2);
  ASSERT_EQ(0, wl_scope_path_identity(dots, &dev1, &ino1));
  ASSERT(dev1 == dev2 && ino1 == ino2);
  wl_scope_close(m2);
  wl_scope_close(m1);
  /* Under its own name, which only a path that Win32 leaves alone names. */
  swprintf(wdots, MAX_PATH + 8, L"\\\\?\\%hs", dots);
  ASSERT(DeleteFileW(wdots));
  tshm_remove(path);
}

/* A release in this process wakes an agent of another through its event. */
static void test_wake_across_processes(void) {
  char queued_name[64], granted_name[64];
  void *queued = twin_event(queued_name), *granted = twin_event(granted_name);
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t x;
  void *c;

  tshm_path(path, sizeof(path), "wake");
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("parent"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &x, NAME("x"), WL_EXCLUSIVE, 0));
  c = spawn("wait", queued_name, granted_name);
  ASSERT(twin_wait(queued, 30000));
  ASSERT(!twin_wait(granted, 0));
  ASSERT_EQ(1, wl_release(&x));
  ASSERT(twin_wait(granted, 10000));
  ASSERT_EQ(0, twin_exit(c));
  expect_empty(m);
  wl_agent_close(&a);
  wl_scope_close(m);
  CloseHandle(queued);
  CloseHandle(granted);
  tshm_remove(path);
}

/* Processes that take turns on x, each adding to a number in a file
 * under it, lose no addition: the mutex, the queue and the wake-ups keep
 * them apart. */
static void test_exclusive_across_processes(void) {
  enum { CHILDREN = 3, TIMES = 200 };
  char count[MAX_PATH + 8], times[16];
  void *c[CHILDREN];
  uint32_t n = 0;
  DWORD done;
  HANDLE f;
  wl_manager_t *m;
  int i;

  tshm_path(path, sizeof(path), "exclusive");
  snprintf(count, sizeof(count), "%s.count", path);
  snprintf(times, sizeof(times), "%d", TIMES);
  f = CreateFileA(count, GENERIC_READ | GENERIC_WRITE,
                  FILE_SHARE_READ | FILE_SHARE_WRITE, NULL, CREATE_ALWAYS,
                  FILE_ATTRIBUTE_NORMAL, NULL);
  ASSERT(f != INVALID_HANDLE_VALUE);
  ASSERT(WriteFile(f, &n, sizeof(n), &done, NULL) && done == sizeof(n));
  m = tscope_open(path, SIZE);
  for (i = 0; i < CHILDREN; i++)
    c[i] = spawn("count", count, times);
  for (i = 0; i < CHILDREN; i++)
    ASSERT_EQ(0, twin_exit(c[i]));
  ASSERT_EQ(0, SetFilePointer(f, 0, NULL, FILE_BEGIN));
  ASSERT(ReadFile(f, &n, sizeof(n), &done, NULL) && done == sizeof(n));
  ASSERT_EQ(CHILDREN * TIMES, n);
  CloseHandle(f);
  expect_empty(m);
  wl_scope_close(m);
  tshm_remove(path);
}

/* A holder ended by TerminateProcess: this process's watcher sees its
 * process handle signalled and its byte let go, and its sweeper grants x
 * here, without anyone calling wl_sweep. The time from the kill to the
 * grant, in ns. */
static uint64_t killed_holder(void) {
  char held_name[64];
  void *held = twin_event(held_name), *c;
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t x;
  unsigned events;
  uint64_t killed, granted;

  tshm_path(path, sizeof(path), "death");
  c = spawn("hold", held_name, NULL);
  ASSERT(twin_wait(held, 30000));
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("waiter"), tfifo_notify));
  ASSERT_EQ(0, wl_request(&a, &x, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT(wl_agent_next(&a, &events) == NULL);
  killed = tnow_ns();
  twin_kill(c);
  granted = tawait_grant(&a, &x);
  ASSERT_EQ(137, twin_exit(c));
  ASSERT_EQ(0, wl__check(m));
  ASSERT_EQ(1, wl_release(&x));
  wl_agent_close(&a);
  expect_empty(m);
  wl_scope_close(m);
  CloseHandle(held);
  tshm_remove(path);
  return granted - killed;
}

static int by_value(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

  return x < y ? -1 : x > y;
}

/* WL_TEST_KILLS holders (3 unless told), and the kill-to-grant times. */
static void test_killed_holder(void) {
  const char *env = getenv("WL_TEST_KILLS");
  int n = env != NULL && atoi(env) > 0 ? atoi(env) : 3, i;
  uint64_t *t = malloc(sizeof(*t) * (size_t)n);

  ASSERT(t != NULL);
  for (i = 0; i < n; i++)
    t[i] = killed_holder();
  qsort(t, (size_t)n, sizeof(*t), by_value);
  printf("  %d kills: granted after %.2f ms (p50), %.2f ms (p99), %.2f ms "
         "(max)\n",
         n, (double)t[n / 2] / 1e6, (double)t[(n * 99) / 100] / 1e6,
         (double)t[n - 1] / 1e6);
  free(t);
}

/* A process killed holding the mutex, while this one has the file open:
 * the system lets go of its byte. Killed before its holder word is set,
 * it changed nothing, and the next taker has nothing to repair; after, the
 * word says it died. */
static void killed_holding_at(const char *point, int rc) {
  wl_manager_t *m;
  void *c;

  tshm_path(path, sizeof(path), "killed-holding");
  m = tscope_open(path, SIZE);
  /* Its sweep would take the mutex first. */
  wl__os_watch_stop_sweeper(m);
  c = spawn("die", point, NULL);
  ASSERT_EQ(137, twin_exit(c));
  ASSERT_EQ(rc, wl__os_file_mutex_lock(m));
  wl__os_file_mutex_consistent(m);
  wl__os_file_mutex_unlock(m);
  expect_empty(m);
  wl_scope_close(m);
  tshm_remove(path);
}

static void test_mutex_holder_killed(void) {
  killed_holding_at("mutex-locked", 0);
  killed_holding_at("mutex-held", WL__EOWNERDEAD);
}

/* A process killed holding the mutex when no other process had the file
 * open: the next opener takes the byte, and the holder word says it died. */
static void test_mutex_holder_killed_alone(void) {
  wl_manager_t *m;
  void *c;

  tshm_path(path, sizeof(path), "gone");
  c = spawn("die", "mutex-held", NULL);
  ASSERT_EQ(137, twin_exit(c));
  ASSERT(file_mutex().holder != 0);
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, file_mutex().holder);
  ASSERT_EQ(0, file_mutex().broken);
  expect_empty(m);
  wl_scope_close(m);
  tshm_remove(path);
}

/* A taker that found its holder dead and gives the mutex back without
 * marking it consistent leaves it unusable for good. */
static void test_mutex_broken(void) {
  wl_manager_t *m;

  tshm_path(path, sizeof(path), "broken");
  m = tscope_open(path, SIZE);
  /* As a holder that died holding it leaves it. */
  __atomic_store_n(&m->file_mutex->holder, 1, __ATOMIC_SEQ_CST);
  ASSERT_EQ(WL__EOWNERDEAD, wl__os_file_mutex_lock(m));
  wl__os_file_mutex_unlock(m);
  ASSERT_EQ(1, file_mutex().broken);
  ASSERT_EQ(0, file_mutex().holder);
  ASSERT_EQ(WL_ECORRUPT, wl__os_file_mutex_lock(m));
  ASSERT_EQ(WL_ECORRUPT, wl_sweep(m));
  wl_scope_close(m);
  tshm_remove(path);
}

typedef struct {
  HANDLE h;
  int got;
} locker_t;

static DWORD WINAPI locker_main(void *arg) {
  locker_t *l = arg;

  l->got = wl__win_lock(l->h, LOCKFILE_EXCLUSIVE_LOCK |
                                  LOCKFILE_FAIL_IMMEDIATELY, WL__MUTEX_AT) ||
           GetLastError() != ERROR_LOCK_VIOLATION;
  return 0;
}

/* A byte locked through a handle is refused to another thread through the
 * same handle (os/win/machine.h, point 2: so the SRW lock before it is
 * not for exclusion), and given back by any of them. */
static void test_one_handle_two_threads(void) {
  wl_manager_t *m;
  locker_t l = {NULL, 1};
  HANDLE t;

  tshm_path(path, sizeof(path), "threads");
  m = tscope_open(path, SIZE);
  l.h = m->fd;
  ASSERT(wl__win_lock(m->fd, LOCKFILE_EXCLUSIVE_LOCK, WL__MUTEX_AT));
  t = CreateThread(NULL, 0, locker_main, &l, 0, NULL);
  ASSERT(t != NULL && twin_wait(t, 30000));
  CloseHandle(t);
  ASSERT_EQ(0, l.got);
  ASSERT(wl__win_lock(m->fd, (DWORD)-1, WL__MUTEX_AT));
  t = CreateThread(NULL, 0, locker_main, &l, 0, NULL);
  ASSERT(t != NULL && twin_wait(t, 30000));
  CloseHandle(t);
  ASSERT_EQ(1, l.got);
  ASSERT(wl__win_lock(m->fd, (DWORD)-1, WL__MUTEX_AT));
  wl_scope_close(m);
  tshm_remove(path);
}

/* Proof of life is the owner's byte, whatever its record's identity says:
 * this process's own owner is alive with no identity or another process's;
 * an offset out of the region is held, in doubt. */
static void test_life(void) {
  wl_manager_t *m;
  wl__owner_t *o;
  uint32_t pid;

  tshm_path(path, sizeof(path), "life");
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl__lock(m));
  o = WL__REC(m, m->self, wl__owner_t);
  pid = o->pid;
  ASSERT_EQ(GetCurrentProcessId(), pid);
  ASSERT_EQ(1, wl__os_life_held(m, m->self));
  o->pid = 0;
  ASSERT_EQ(1, wl__os_life_held(m, m->self));
  o->pid = 4;
  ASSERT_EQ(1, wl__os_life_held(m, m->self));
  o->pid = pid;
  ASSERT_EQ(1, wl__os_life_held(m, m->capacity));
  wl__unlock(m);
  wl_scope_close(m);
  tshm_remove(path);
}

/* A dead owner whose record names a live process, of its pid and creation
 * time (its pid reused by a process this user can open, here this one; or
 * a forged record), is found dead by its free byte: a sweep ends its lock.
 * (A process this user cannot open read as alive before: it was kept.) */
static void test_reused_pid_is_dead(void) {
  char held_name[64];
  void *held = twin_event(held_name), *c;
  wl_manager_t *m;
  wl__owner_t *o;
  wl_off_t t;
  uint64_t created;
  DWORD pid;

  tshm_path(path, sizeof(path), "reused-pid");
  c = spawn("hold", held_name, NULL);
  ASSERT(twin_wait(held, 30000));
  pid = GetProcessId(c);
  m = tscope_open(path, SIZE);
  /* Its death is to be found by the sweep below, not by the watch. */
  wl__os_watch_stop_sweeper(m);
  twin_kill(c);
  ASSERT_EQ(137, twin_exit(c));
  ASSERT_EQ(0, wl__win_created(GetCurrentProcess(), &created));
  ASSERT_EQ(0, wl__lock(m));
  /* The killed child's record: the owner this one watches, of two. */
  t = WL__REC(m, m->self, wl__owner_t)->watch;
  o = WL__REC(m, t, wl__owner_t);
  ASSERT_EQ(pid, o->pid);
  o->created = created;
  o->pid = GetCurrentProcessId();
  ASSERT_EQ(0, wl__os_life_held(m, t));
  wl__unlock(m);
  expect_empty(m);
  wl_scope_close(m);
  CloseHandle(held);
  tshm_remove(path);
}

/* The probe handle replaced by one that is not a file's (an event's): its
 * LockFileEx fails with ERROR_INVALID_HANDLE, as through a handle closed
 * under it or an SMB path's after a reconnect. */
static void break_probe(wl_manager_t *m) {
  wl__os_local_t *l = m->local;

  AcquireSRWLockExclusive(&l->probe_mu);
  ASSERT(CloseHandle(l->probe));
  l->probe = CreateEventW(NULL, FALSE, FALSE, NULL);
  ASSERT(l->probe != NULL);
  ReleaseSRWLockExclusive(&l->probe_mu);
}

static int life_held(wl_manager_t *m, wl_off_t owner) {
  int held;

  ASSERT_EQ(0, wl__lock(m));
  held = wl__os_life_held(m, owner);
  wl__unlock(m);
  return held;
}

/* A probe that fails otherwise than for a held byte is no proof of life:
 * the probe handle is opened again, so a killed holder's end is noticed
 * and x granted here. A new open of the path that is not the file (another
 * file put there) is never asked through: the byte reads as held until
 * the file is back. */
static void test_probe_error(void) {
  char held_name[64], aside[MAX_PATH + 8];
  void *held = twin_event(held_name), *c;
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t x;
  wl_off_t t;
  HANDLE f;

  tshm_path(path, sizeof(path), "probe-error");
  /* Beside the file, where tshm_remove looks. */
  snprintf(aside, sizeof(aside), "%s.aside", path);
  c = spawn("hold", held_name, NULL);
  ASSERT(twin_wait(held, 30000));
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("waiter"), tfifo_notify));
  ASSERT_EQ(0, wl_request(&a, &x, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl__lock(m));
  t = WL__REC(m, m->self, wl__owner_t)->watch;
  wl__unlock(m);
  break_probe(m);
  twin_kill(c);
  tawait_grant(&a, &x);
  ASSERT_EQ(137, twin_exit(c));
  ASSERT(MoveFileA(path, aside));
  f = CreateFileA(path, GENERIC_WRITE, 0, NULL, CREATE_NEW,
                  FILE_ATTRIBUTE_NORMAL, NULL);
  ASSERT(f != INVALID_HANDLE_VALUE);
  CloseHandle(f);
  break_probe(m);
  ASSERT_EQ(1, life_held(m, t));
  ASSERT(DeleteFileA(path));
  ASSERT(MoveFileA(aside, path));
  ASSERT_EQ(0, life_held(m, t));
  ASSERT_EQ(1, wl_release(&x));
  wl_agent_close(&a);
  expect_empty(m);
  wl_scope_close(m);
  CloseHandle(held);
  tshm_remove(path);
}

/* A watched owner whose record names another process (a forged identity;
 * or, on Windows, a process whose locks are let go after its handle is
 * signalled): that process's end makes the watcher ask for the byte again,
 * which stays held while its holder lives, and once the holder is killed
 * the watcher notices it without anyone calling wl_sweep. */
static void test_watch_asks_again(void) {
  char held_name[64], idle_name[64];
  void *held = twin_event(held_name), *idle_ready = twin_event(idle_name);
  void *c, *idle;
  wl_manager_t *m;
  wl__owner_t *self, *o;
  wl_agent_t a;
  wl_request_t x;
  unsigned events;
  uint64_t created;

  tshm_path(path, sizeof(path), "asks-again");
  steps_forget();
  c = spawn("hold", held_name, NULL);
  ASSERT(twin_wait(held, 30000));
  idle = spawn("idle", idle_name, NULL);
  ASSERT(twin_wait(idle_ready, 30000));
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("waiter"), tfifo_notify));
  ASSERT_EQ(0, wl_request(&a, &x, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl__win_created(idle, &created));
  ASSERT_EQ(0, wl__lock(m));
  self = WL__REC(m, m->self, wl__owner_t);
  o = WL__REC(m, self->watch, wl__owner_t);
  o->created = created;
  o->pid = GetProcessId(idle);
  /* The watcher reads the forged identity. */
  wl__os_watch_target(m, self, self->watch);
  wl__unlock(m);
  await_step("watch-process", GetProcessId(idle));
  twin_kill(idle);
  /* It has asked for the byte after idle's end: held, x not granted. */
  await_step("watch-again", GetProcessId(idle));
  ASSERT(wl_agent_next(&a, &events) == NULL);
  twin_kill(c);
  tawait_grant(&a, &x);
  ASSERT_EQ(137, twin_exit(idle));
  ASSERT_EQ(137, twin_exit(c));
  ASSERT_EQ(1, wl_release(&x));
  wl_agent_close(&a);
  expect_empty(m);
  wl_scope_close(m);
  CloseHandle(held);
  CloseHandle(idle_ready);
  tshm_remove(path);
}

/* The agent whose wake event's names are taken before it makes its event,
 * by the thread squatting (in the fault point "wake-name", between the
 * draw and the event's creation): the first name by another's event, the
 * second by an object of another kind (a mutex). */
static wl_agent_t squatted_agent;
static DWORD squatting;
static uint64_t squatted[2];
static HANDLE squatters[2];
static int nsquatted;

static void squat_name(const char *point) {
  wchar_t name[WL__WIN_NAME_MAX];
  uint64_t wake = squatted_agent.wake;

  if (strcmp(point, "wake-name") != 0 || nsquatted == 2 ||
      GetCurrentThreadId() != __atomic_load_n(&squatting, __ATOMIC_SEQ_CST))
    return;
  wl__win_name(name, "wake", wake);
  squatters[nsquatted] = nsquatted == 0 ? CreateEventW(NULL, FALSE, FALSE, name)
                                        : CreateMutexW(NULL, FALSE, name);
  ASSERT(squatters[nsquatted] != NULL);
  squatted[nsquatted++] = wake;
}

/* A wake event's name that another object has is drawn again: the agent
 * gets an event of its own, named in its record, and is woken through it
 * (here by a second manager of the file, which wakes agents of the first
 * as another process's); the squatter's event is never set. */
static void test_wake_name_taken(void) {
  void (*hook)(const char *) = wl__fault_hook;
  wl_agent_t *a = &squatted_agent, holder;
  wl_request_t hx, x;
  wl_manager_t *m1, *m2;
  int i;

  tshm_path(path, sizeof(path), "wake-taken");
  m1 = tscope_open(path, SIZE);
  m2 = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m2, &holder, ID("holder"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE,
            wl_request(&holder, &hx, NAME("x"), WL_EXCLUSIVE, 0));
  wl__fault_hook = squat_name;
  __atomic_store_n(&squatting, GetCurrentThreadId(), __ATOMIC_SEQ_CST);
  ASSERT_EQ(0, wl_agent_init(m1, a, ID("squatted"), tignore_notify));
  __atomic_store_n(&squatting, 0, __ATOMIC_SEQ_CST);
  wl__fault_hook = hook;
  ASSERT(a->wake != squatted[0] && a->wake != squatted[1]);
  ASSERT_EQ(2, nsquatted);
  ASSERT_EQ(0, wl_request(a, &x, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(1, wl_release(&hx));
  tawait_grant(a, &x);
  ASSERT(!twin_wait(squatters[0], 0));
  ASSERT_EQ(1, wl_release(&x));
  wl_agent_close(a);
  wl_agent_close(&holder);
  expect_empty(m1);
  wl_scope_close(m2);
  wl_scope_close(m1);
  for (i = 0; i < 2; i++)
    CloseHandle(squatters[i]);
  tshm_remove(path);
}

/* A copy of a live scope's file: its owners, this process's among them,
 * hold no byte of the copy, and are dead there. */
static void test_copy_owners_dead(void) {
  char copy[MAX_PATH + 8];
  wl_manager_t *m, *mc;
  wl_agent_t a;
  wl_request_t x;

  tshm_path(path, sizeof(path), "copied");
  snprintf(copy, sizeof(copy), "%s-copy", path);
  DeleteFileA(copy);
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("holder"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &x, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT(CopyFileA(path, copy, TRUE));
  mc = tscope_open(copy, SIZE);
  expect_empty(mc);
  wl_scope_close(mc);
  ASSERT(DeleteFileA(copy));
  ASSERT_EQ(1, wl_release(&x));
  wl_agent_close(&a);
  wl_scope_close(m);
  tshm_remove(path);
}

/* A watcher told, through its record, to watch what is no owner (an
 * offset past the region; a record whose identity words are another
 * record's bytes) neither crashes nor stops: once the ring is mended, it
 * notices a holder's end as before. (Nothing tells when the watcher has
 * read each target: it may see only the last of them.) */
static void test_hostile_watch_target(void) {
  char held_name[64];
  void *held = twin_event(held_name), *c;
  wl_manager_t *m;
  wl__owner_t *self;
  wl_agent_t a;
  wl_request_t x;

  tshm_path(path, sizeof(path), "hostile-watch");
  c = spawn("hold", held_name, NULL);
  ASSERT(twin_wait(held, 30000));
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("waiter"), tfifo_notify));
  ASSERT_EQ(0, wl_request(&a, &x, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(0, wl__lock(m));
  self = WL__REC(m, m->self, wl__owner_t);
  wl__os_watch_target(m, self, m->capacity);
  wl__unlock(m);
  ASSERT_EQ(0, wl__lock(m));
  /* The region's header: its words read as a pid and a creation time. */
  wl__os_watch_target(m, self, 8);
  wl__unlock(m);
  ASSERT_EQ(0, wl__lock(m));
  wl__ring(m, 1);
  wl__unlock(m);
  twin_kill(c);
  tawait_grant(&a, &x);
  ASSERT_EQ(137, twin_exit(c));
  ASSERT_EQ(1, wl_release(&x));
  wl_agent_close(&a);
  expect_empty(m);
  wl_scope_close(m);
  CloseHandle(held);
  tshm_remove(path);
}

/* A process killed at a named point, holding the mutex, leaves a state
 * that this one repairs at its next lock. */
static void crash_at(const char *point) {
  char go_name[64];
  void *go = twin_event(go_name), *c;
  wl_manager_t *m;
  wl_agent_t p;
  wl_request_t x, y, w;
  wl_snapshot_t snap;

  tshm_path(path, sizeof(path), "recover");
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &p, ID("parent"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&p, &x, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&p, &y, NAME("y"), WL_SHARED, 0));
  c = spawn("work", point, go_name);
  twin_set(go);
  if (twin_exit(c) != 137) {
    fprintf(stderr, "the child was not killed at '%s'\n", point);
    ASSERT(0);
  }
  ASSERT(wl_request(&p, &w, NAME("w"), WL_EXCLUSIVE, 0) >= 0);
  if (wl__check(m) != 0) {
    fprintf(stderr, "after a crash at '%s'\n", point);
    ASSERT(0);
  }
  ASSERT_EQ(0, wl_snapshot(m, &snap));
  ASSERT(snap.nheld >= 2);
  wl_snapshot_free(&snap);
  wl_release(&x);
  ASSERT_EQ(1, wl_release(&y));
  ASSERT_EQ(1, wl_release(&w));
  ASSERT_EQ(0, wl__check(m));
  wl_agent_close(&p);
  expect_empty(m);
  wl_scope_close(m);
  CloseHandle(go);
  tshm_remove(path);
  printf("  recovered after a crash at '%s'\n", point);
}

static void test_crash_at_every_point(void) {
  static const char *points[] = {"alloc",         "free",          "hold",
                                 "unhold",        "steal",         "end",
                                 "mail",          "request-alloc", "request-name",
                                 "request-queued", "request-stole", "ring",
                                 "wake-name"};
  size_t i;

  for (i = 0; i < sizeof(points) / sizeof(points[0]); i++)
    crash_at(points[i]);
}

typedef char *(CDECL *unix_name_t)(const WCHAR *);

/* Starts Unix's chown of the file at path to another user (65534), under
 * wine: 0, or -1 elsewhere (a real Windows, where only an administrator
 * could). Wine's handle of a Unix process cannot be waited for: the caller
 * awaits its work. */
static int give_away(const char *path) {
  unix_name_t unix_name = (unix_name_t)(void (*)(void))GetProcAddress(
      GetModuleHandleA("kernel32.dll"), "wine_get_unix_file_name");
  wchar_t wpath[MAX_PATH];
  char cmd[MAX_PATH + 64];
  STARTUPINFOA si;
  PROCESS_INFORMATION pi;
  char *unix_path;

  if (unix_name == NULL)
    return -1;
  swprintf(wpath, MAX_PATH, L"%hs", path);
  unix_path = unix_name(wpath);
  ASSERT(unix_path != NULL);
  snprintf(cmd, sizeof(cmd), "chown 65534 \"%s\"", unix_path);
  HeapFree(GetProcessHeap(), 0, unix_path);
  memset(&si, 0, sizeof(si));
  si.cb = sizeof(si);
  ASSERT(CreateProcessA("Z:\\bin\\chown", cmd, NULL, NULL, FALSE, 0, NULL,
                        NULL, &si, &pi));
  CloseHandle(pi.hThread);
  CloseHandle(pi.hProcess);
  return 0;
}

/* Until a new open of path fails (10 s at most): its code, and err. */
static int await_refusal(const char *path, char *err, size_t errlen) {
  uint64_t deadline = tnow_ns() + 10000000000u;
  wl_manager_t *m = NULL;
  int rc;

  while ((rc = wl_scope_open(path, SIZE, 0600, &m, err, errlen)) == 0) {
    wl_scope_close(m);
    if (tnow_ns() >= deadline)
      break;
    Sleep(10);
  }
  return rc;
}

/* A file of another user is refused (EACCES), naming the file and its
 * owner: a scope is its user's alone on Windows. Wine reads a file of
 * another Unix user as owned by S-1-5-7 and runs a Unix program that a
 * Windows process starts: Unix's chown gives the file another owner.
 * Elsewhere the case is skipped. */
static void test_foreign_file_refused(void) {
  char err[512];
  int rc;

  tshm_path(path, sizeof(path), "foreign");
  wl_scope_close(tscope_open(path, SIZE));
  if (give_away(path) != 0) {
    printf("  skipped: not under wine\n");
    tshm_remove(path);
    return;
  }
  rc = await_refusal(path, err, sizeof(err));
  tshm_remove(path);
  if (rc != WL_EACCES)
    fprintf(stderr, "wl_scope_open: %d %s\n", rc, err);
  ASSERT_EQ(WL_EACCES, rc);
  ASSERT(strstr(err, path) != NULL && strstr(err, "S-1-5-7") != NULL);
}

/* A scope open in this process is tested again for each open
 * (wl_scope_admit): a file that is no longer this user's is refused,
 * whatever the mode. */
static void test_admit_foreign(void) {
  wl_manager_t *m;
  char err[512];

  tshm_path(path, sizeof(path), "admit");
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_scope_admit(m, 0600, err, sizeof(err)));
  ASSERT_EQ(0, wl_scope_admit(m, 0666, err, sizeof(err)));
  ASSERT_EQ(WL_EINVAL, wl_scope_admit(m, 0644, err, sizeof(err)));
  if (give_away(path) != 0) {
    printf("  skipped: not under wine\n");
  } else {
    ASSERT_EQ(WL_EACCES, await_refusal(path, err, sizeof(err)));
    err[0] = '\0';
    ASSERT_EQ(WL_EACCES, wl_scope_admit(m, 0666, err, sizeof(err)));
    ASSERT(strstr(err, path) != NULL && strstr(err, "S-1-5-7") != NULL);
  }
  wl_scope_close(m);
  tshm_remove(path);
}

/* ---- A watched record naming a process gone, and the file's access ---- */

/* On a real Windows a dead process's locks may be let go after its process
 * handle is signalled (os/win/machine.h, point 3). Wine lets go at once, so
 * here the record names another process (`idle`) than the byte's holder
 * (`hold`), as test_watch_asks_again does: the named process ends first,
 * the holder later. Each case awaits the watcher's step it is about
 * (await_step). */
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
  steps_forget();
  s->holder = spawn("hold", held_name, NULL);
  ASSERT(twin_wait(s->held, 30000));
  s->idle = spawn("idle", idle_name, NULL);
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
 * ended process is reaped: here GONE_PID stands for it): it asks for the
 * byte again, so the holder's end is noticed without a sweep. */
static void test_bell_during_let_go(void) {
  setup_t s;

  setup(&s, "bell-let-go");
  name_and_ring(&s, s.pid);
  await_step("watch-process", s.pid);
  twin_kill(s.idle);
  ASSERT_EQ(137, twin_exit(s.idle));
  await_step("watch-again", s.pid); /* in wl__let_go */
  name_and_ring(&s, GONE_PID);
  /* in wl__watch_one again: held, no process, so in wl__let_go */
  await_step("watch-again", GONE_PID);
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
  await_step("watch-again", GONE_PID);
  finish(&s);
}

/* A handle with read access alone holds any byte lock (LockFileEx needs
 * GENERIC_READ or GENERIC_WRITE): whoever may read the file can hold the
 * mutex's byte (every process's wl__lock then waits) or a dead owner's
 * life byte (never swept). The POSIX family refuses such bits
 * (WL__MODE_OK); here the file's access is its directory's. So the file
 * is to admit this user and SYSTEM alone, whatever its directory. */
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
  stepped = CreateEventW(NULL, FALSE, FALSE, NULL);
  ASSERT(stepped != NULL);
  wl__watch_hook = on_step;
  RUN(test_one_file);
  RUN(test_publish_never_replaces);
  RUN(test_killed_creation_leaves_nothing);
  RUN(test_trailing_dots);
  RUN(test_wake_across_processes);
  RUN(test_exclusive_across_processes);
  RUN(test_killed_holder);
  RUN(test_mutex_holder_killed);
  RUN(test_mutex_holder_killed_alone);
  RUN(test_mutex_broken);
  RUN(test_one_handle_two_threads);
  RUN(test_life);
  RUN(test_reused_pid_is_dead);
  RUN(test_probe_error);
  RUN(test_watch_asks_again);
  RUN(test_copy_owners_dead);
  RUN(test_hostile_watch_target);
  RUN(test_crash_at_every_point);
  RUN(test_named_objects_private);
  RUN(test_wake_name_taken);
  RUN(test_foreign_file_refused);
  RUN(test_admit_foreign);
  RUN(test_bell_during_let_go);
  RUN(test_first_watch_of_ended_process);
  RUN(test_file_dacl_private);
  return 0;
}
