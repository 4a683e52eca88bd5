/* The harness behind test.h on Windows (the cases' checks: expect.c):
 * files in the user's temporary directory, fault points that end the
 * process as TerminateProcess does, and child processes (twin_*), which
 * are this program run again. What needs fork, pid namespaces or seccomp
 * (tchild_*, tpidns_enter, tdeny, tthread_*) has no Windows counterpart
 * here: tests that use it are not built for Windows (Makefile: WIN_TESTS). */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>

#include <stdlib.h>

#include "test.h"

void (*wl__fault_hook)(const char *point);
/* The Windows watcher's steps (os/win/machine.h), for tests to await. */
void (*wl__watch_hook)(const char *step, uint32_t pid);

/* Read by whichever thread passes a fault point (a sweeper's too). */
static const char *armed;

void tkill_at(const char *point) {
  __atomic_store_n(&armed, point, __ATOMIC_SEQ_CST);
}

/* Exit code 137, as a SIGKILLed process's status reads on Unix. */
static void kill_here(const char *point) {
  const char *at = __atomic_load_n(&armed, __ATOMIC_SEQ_CST);
  if (at != NULL && strcmp(point, at) == 0) {
    fflush(stdout);
    TerminateProcess(GetCurrentProcess(), 137);
  }
}

__attribute__((constructor)) static void install_fault_hook(void) {
  wl__fault_hook = kill_here;
}

/* In the user's own temporary directory (os/win/machine.h, point 1). */
void tshm_path(char *buf, size_t len, const char *what) {
  char dir[MAX_PATH];
  DWORD n = GetTempPathA(sizeof(dir), dir);

  ASSERT(n > 0 && n < sizeof(dir));
  snprintf(buf, len, "%swl-%s-%lu", dir, what,
           (unsigned long)GetCurrentProcessId());
  tshm_remove(buf);
}

/* The file, and the temporary files of creations that were killed. */
void tshm_remove(const char *path) {
  char pattern[MAX_PATH + 8], beside[MAX_PATH + 8];
  const char *slash = strrchr(path, '\\');
  size_t dirlen = slash == NULL ? 0 : (size_t)(slash - path + 1);
  WIN32_FIND_DATAA fd;
  HANDLE find;

  DeleteFileA(path);
  snprintf(pattern, sizeof(pattern), "%s.*", path);
  find = FindFirstFileA(pattern, &fd);
  if (find == INVALID_HANDLE_VALUE)
    return;
  do {
    snprintf(beside, sizeof(beside), "%.*s%s", (int)dirlen, path,
             fd.cFileName);
    DeleteFileA(beside);
  } while (FindNextFileA(find, &fd));
  FindClose(find);
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

void tfifo_notify(wl_agent_t *agent) { SetEvent(wl_agent_wake_fd(agent)); }

uint64_t tnow_ns(void) {
  LARGE_INTEGER now, freq;

  QueryPerformanceCounter(&now);
  QueryPerformanceFrequency(&freq);
  return (uint64_t)((double)now.QuadPart * 1e9 / (double)freq.QuadPart);
}

uint64_t tawait_grants(wl_agent_t *agent, wl_request_t *const *r, size_t n) {
  uint64_t deadline = tnow_ns() + 5000000000u, now = 0;
  wl_request_t *got;
  unsigned events;
  size_t granted = 0, i;

  while (granted < n) {
    now = tnow_ns();
    if (now >= deadline ||
        WaitForSingleObject(wl_agent_wake_fd(agent),
                            (DWORD)((deadline - now) / 1000000)) !=
            WAIT_OBJECT_0) {
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

void *twin_spawn(const char *args) {
  char exe[MAX_PATH], cmd[2048];
  STARTUPINFOA si;
  PROCESS_INFORMATION pi;
  DWORD n = GetModuleFileNameA(NULL, exe, sizeof(exe));

  ASSERT(n > 0 && n < sizeof(exe));
  snprintf(cmd, sizeof(cmd), "\"%s\" child %s", exe, args);
  memset(&si, 0, sizeof(si));
  si.cb = sizeof(si);
  fflush(stdout);
  if (!CreateProcessA(exe, cmd, NULL, NULL, FALSE, 0, NULL, NULL, &si, &pi)) {
    fprintf(stderr, "CreateProcess %s: Windows error %lu\n", cmd,
            (unsigned long)GetLastError());
    ASSERT(0);
  }
  CloseHandle(pi.hThread);
  return pi.hProcess;
}

void *twin_event(char *name) {
  uint64_t r;
  HANDLE h;

  ASSERT_EQ(0, wl__os_draw(&r));
  snprintf(name, 64, "wl-test-%016llx", (unsigned long long)r);
  h = CreateEventA(NULL, TRUE, FALSE, name);
  ASSERT(h != NULL);
  return h;
}

void *twin_event_open(const char *name) {
  HANDLE h = OpenEventA(EVENT_MODIFY_STATE | SYNCHRONIZE, FALSE, name);

  ASSERT(h != NULL);
  return h;
}

void twin_set(void *event) { ASSERT(SetEvent(event)); }

int twin_wait(void *h, unsigned ms) {
  return WaitForSingleObject(h, ms) == WAIT_OBJECT_0;
}

void twin_kill(void *process) {
  ASSERT(TerminateProcess(process, 137));
  ASSERT(twin_wait(process, 10000));
}

unsigned long twin_exit(void *process) {
  DWORD code;

  ASSERT(twin_wait(process, 60000));
  ASSERT(GetExitCodeProcess(process, &code));
  CloseHandle(process);
  return code;
}
