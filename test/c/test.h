/* A tiny harness for the core's C tests: each test-*.c is one executable
 * whose main() runs its cases with RUN(); a failed assertion prints
 * file:line and the expression and exits non-zero. */
#ifndef TEST_H
#define TEST_H

#include <stdio.h>
#include <string.h>

#include "internal.h"

#define ASSERT(expr)                                                           \
  do {                                                                         \
    if (!(expr))                                                               \
      test_fail(__FILE__, __LINE__, #expr);                                    \
  } while (0)

#define ASSERT_EQ(want, got)                                                   \
  do {                                                                         \
    long long want_ = (long long)(want), got_ = (long long)(got);              \
    if (want_ != got_)                                                         \
      test_fail_eq(__FILE__, __LINE__, #want, #got, want_, got_);              \
  } while (0)

/* Runs one case, then checks that it left no name behind. */
#define RUN(fn) run_test(__FILE__, #fn, fn)

/* A string literal as the two arguments (units, length) of a UTF-16 name. */
#define NAME(s) (const uint16_t *)u"" s, (sizeof(u"" s) / sizeof(uint16_t) - 1)
/* A string literal as the two arguments (bytes, length) of a client id. */
#define ID(s) s, (sizeof(s) - 1)

/* An agent whose notify callback counts its calls. */
typedef struct {
  wl_agent_t agent;
  unsigned notified;
} tagent_t;

typedef struct {
  wl_request_t *req;
  unsigned events;
} tmail_t;

/* One expected snapshot entry. */
typedef struct {
  const uint16_t *name;
  size_t name_len;
  wl_mode_t mode;
  const char *client_id;
  size_t client_id_len;
} tinfo_t;

#define REQUEST(t, r, s, mode, flags)                                          \
  ASSERT(wl_request(&(t)->agent, (r), NAME(s), (mode), (flags)) >= 0)

/* Drains t's mailbox and checks it held exactly these (request, events) in
 * this order: EXPECT_MAIL(&a, {&r1, WL_EV_GRANTED}, {&r2, WL_EV_STOLEN}). */
#define EXPECT_MAIL(t, ...)                                                    \
  expect_mail_at(__FILE__, __LINE__, (t), (const tmail_t[]){__VA_ARGS__},      \
                 sizeof((const tmail_t[]){__VA_ARGS__}) / sizeof(tmail_t))
#define EXPECT_NO_MAIL(t) expect_mail_at(__FILE__, __LINE__, (t), NULL, 0)

/* Checks a snapshot's pending list in order, or its held list in any order
 * (the spec leaves the held order open):
 * EXPECT_PENDING(&snap, {NAME("x"), WL_SHARED, ID("client")}). */
#define EXPECT_PENDING(snap, ...)                                              \
  expect_infos_at(__FILE__, __LINE__, (snap)->pending, (snap)->npending,       \
                  (const tinfo_t[]){__VA_ARGS__},                              \
                  sizeof((const tinfo_t[]){__VA_ARGS__}) / sizeof(tinfo_t), 1)
#define EXPECT_HELD(snap, ...)                                                 \
  expect_infos_at(__FILE__, __LINE__, (snap)->held, (snap)->nheld,             \
                  (const tinfo_t[]){__VA_ARGS__},                              \
                  sizeof((const tinfo_t[]){__VA_ARGS__}) / sizeof(tinfo_t), 0)

_Noreturn void test_fail(const char *file, int line, const char *expr);
_Noreturn void test_fail_eq(const char *file, int line, const char *want,
                            const char *got, long long wantv, long long gotv);
void run_test(const char *file, const char *name, void (*fn)(void));

void tagent_init(tagent_t *t, const char *client_id, size_t client_id_len);

/* Machine-wide managers: a path in /dev/shm for this test and process (removed
 * first), a manager opened there (owner only) or the test fails, a notify
 * callback for agents polled by hand, and a fault hook that kills this
 * process (SIGKILL) at the named point. */
void tshm_path(char *buf, size_t len, const char *what);
/* Removes the manager's file at path and whatever is beside it (agents'
 * FIFOs that a test's killed or corrupt processes could not remove). */
void tshm_remove(const char *path);
wl_manager_t *tscope_open(const char *path, uint64_t size);
void tignore_notify(wl_agent_t *agent);
void tkill_at(const char *point);
/* A notify callback that wakes the agent through its wake descriptor, as
 * other processes do: for an agent whose grants may come from this
 * process's own sweeper thread. */
void tfifo_notify(wl_agent_t *agent);

#ifndef _WIN32
/* Goes on as pid 1 of a new pid namespace: the calling process forks the
 * process that returns, writes its pid (as seen from outside) to fd, and
 * exits when it does. */
void tpidns_enter(int fd);

/* A child process that joins a machine-wide manager when told. It is forked
 * before the test's process starts threads (TSan cannot follow a child that
 * starts threads after a fork of a process with threads), runs `prepare`
 * (if any) first, and then answers each command with a byte:
 *   'b' touches 1 GiB of memory: 'b', or 'n' if it cannot be allocated;
 *   'o' opens the manager at path and holds `name` exclusively: 'o';
 *   'R' arms the fault point "ring" (tkill_at): 'R';
 *   'c' releases its lock, closes its agent and the manager: 'c', and exits.
 * With TCHILD_NEW_PID_NS it runs as pid 1 of a pid namespace of its own
 * (root only); pid is its pid as seen from here. */
typedef struct {
  pid_t pid;
  pid_t reap; /* the child to wait for: pid, or the namespace's parent */
  int to, from;
} tchild_t;
enum { TCHILD_NEW_PID_NS = 1 };
void tchild_fork(tchild_t *c, const char *path, uint64_t size,
                 const char *name, int flags, void (*prepare)(void));
/* Forks a child that runs fn(path, in, out) once it has read a byte from
 * in (a command, sent with write(c->to, ...)), and then exits; in and out
 * are its ends of c's pipes. For a child that does one thing of its own;
 * forked, as tchild_fork's, before the test's process starts threads. */
void tchild_run(tchild_t *c, const char *path,
                void (*fn)(const char *path, int in, int out));
/* Sends a command; returns the answer, or 0 if the child died instead (the
 * OOM killer, or an armed fault point). */
char tchild_do(tchild_t *c, char cmd);
/* Kills it with SIGKILL, returning when (tnow_ns()), or has it close its
 * manager and exit ('c'); then waits for it to end (its wait status). */
uint64_t tchild_kill(tchild_t *c);
void tchild_close(tchild_t *c);
int tchild_reap(tchild_t *c);
/* Reaps it, which must have been killed by SIGKILL if `killed`, else
 * exited with 0. */
void tchild_reaped(tchild_t *c, int killed);
#endif

/* Has the kernel answer ENOSYS to system call nr from now on, in this
 * process (a seccomp filter): a kernel without it. x86-64 and arm64 only. */
#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
#define TDENY 1
void tdeny(long nr);
#else
#define TDENY 0
#endif

#ifdef _WIN32
/* Child processes on Windows, which has no fork (harness-win.c): the
 * test's own program run again as `<program> child <args>`, whose main
 * hands argv to its own code. Handles are void * here, so that test.h
 * needs no <windows.h>. */
/* Starts it: its process handle. Its output goes where this process's
 * does. */
void *twin_spawn(const char *args);
/* A manual-reset event of a name drawn at random (in name, 64 bytes), for
 * a child to open by name (twin_event_open) and set. */
void *twin_event(char *name);
void *twin_event_open(const char *name);
void twin_set(void *event);
/* Whether h (an event, a process) is signalled within ms milliseconds. */
int twin_wait(void *h, unsigned ms);
/* Ends a child with TerminateProcess, as Node's child.kill() does, and
 * waits for it; or waits for it to exit by itself: its exit code. */
void twin_kill(void *process);
unsigned long twin_exit(void *process);
#endif

/* CLOCK_MONOTONIC, in nanoseconds. */
uint64_t tnow_ns(void);
/* Waits, 5 s at most, for the agent's wake descriptor until its mail holds
 * r's grant (and nothing else); returns tnow_ns() when it came. Nothing
 * here sweeps: another process's watcher must have. */
uint64_t tawait_grant(wl_agent_t *agent, wl_request_t *r);
/* The same for n requests, granted in any order. */
uint64_t tawait_grants(wl_agent_t *agent, wl_request_t *const *r, size_t n);
/* The CPU time, in clock ticks, that the threads of process pid (0: this
 * one) named `comm` have used, and how often they have slept (voluntary
 * context switches); -1 if it has none. */
#ifndef _WIN32
long tthread_ticks(pid_t pid, const char *comm);
long tthread_sleeps(pid_t pid, const char *comm);
#endif

/* Checks every list and counter of m against its records (check.c): 0, or
 * WL_ECORRUPT after saying what is wrong. */
int wl__check(wl_manager_t *m);
void tagent_close(tagent_t *t);

/* Takes t's mail and pops every event; stores the first `max` in `out` and
 * returns how many there were. */
size_t drain(tagent_t *t, tmail_t *out, size_t max);

void expect_mail_at(const char *file, int line, tagent_t *t,
                    const tmail_t *want, size_t nwant);
void expect_infos_at(const char *file, int line, const wl_info_t *got,
                     size_t ngot, const tinfo_t *want, size_t nwant,
                     int ordered);

#endif
