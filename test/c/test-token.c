/* Fencing tokens: every grant of a manager gets the next number of its
 * grant counter, from 1, whatever the name, agent or process, and whatever
 * made the grant (a request granted at once, a release, an abort, a steal,
 * an agent's end, a recovery after a crash); a machine-wide manager's counter is
 * in its file, so it continues across processes, a close and reopen, and a
 * crash. */
#define _GNU_SOURCE

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#define SIZE (1 << 20)

/* The process-wide manager's last token: its tests run one at a time, so
 * each grant's token is exactly the next. */
static uint64_t last;

static void expect_next(wl_request_t *r) {
  ASSERT_EQ(last + 1, wl_request_token(r));
  last++;
}

static void test_first_token_is_one(void) {
  tagent_t a;
  wl_request_t x, y;

  tagent_init(&a, ID("a"));
  REQUEST(&a, &x, "x", WL_EXCLUSIVE, 0);
  ASSERT_EQ(0, wl_request_token(&x)); /* not before its grant is taken */
  EXPECT_MAIL(&a, {&x, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_request_token(&x));
  last = 1;
  REQUEST(&a, &y, "y", WL_SHARED, 0);
  EXPECT_MAIL(&a, {&y, WL_EV_GRANTED});
  expect_next(&y);
  ASSERT_EQ(1, wl_release(&x));
  ASSERT_EQ(1, wl_release(&y));
  ASSERT_EQ(1, wl_request_token(&x)); /* the handle keeps it */
  tagent_close(&a);
}

/* One name's waiters in grant order, another name's grants in between, and
 * shared holders granted by one release: each its own token, in queue
 * order. */
static void test_tokens_follow_grant_order(void) {
  tagent_t a, b, c;
  wl_request_t e1, e2, s1, s2, o;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  tagent_init(&c, ID("c"));
  REQUEST(&a, &e1, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &e2, "x", WL_EXCLUSIVE, 0);
  REQUEST(&c, &s1, "x", WL_SHARED, 0);
  REQUEST(&b, &s2, "x", WL_SHARED, 0);
  EXPECT_MAIL(&a, {&e1, WL_EV_GRANTED});
  expect_next(&e1);
  REQUEST(&c, &o, "other", WL_EXCLUSIVE, 0);
  EXPECT_MAIL(&c, {&o, WL_EV_GRANTED});
  expect_next(&o);
  ASSERT_EQ(1, wl_release(&e1));
  EXPECT_MAIL(&b, {&e2, WL_EV_GRANTED});
  expect_next(&e2);
  ASSERT_EQ(1, wl_release(&e2));
  EXPECT_MAIL(&b, {&s2, WL_EV_GRANTED});
  EXPECT_MAIL(&c, {&s1, WL_EV_GRANTED});
  expect_next(&s1);
  expect_next(&s2);
  ASSERT_EQ(1, wl_release(&o));
  ASSERT_EQ(1, wl_release(&s1));
  ASSERT_EQ(1, wl_release(&s2));
  tagent_close(&a);
  tagent_close(&b);
  tagent_close(&c);
}

/* A token is given at the grant, not when the grant is taken: a holder
 * robbed before it took its grant still has a smaller token than the
 * thief's. */
static void test_thief_token_is_greater(void) {
  tagent_t a, b, c;
  wl_request_t h, w, t;
  uint64_t robbed;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  tagent_init(&c, ID("c"));
  REQUEST(&a, &h, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &w, "x", WL_EXCLUSIVE, 0);
  EXPECT_MAIL(&a, {&h, WL_EV_GRANTED});
  expect_next(&h);
  ASSERT_EQ(1, wl_release(&h)); /* grants w, whose mail waits */
  REQUEST(&c, &t, "x", WL_EXCLUSIVE, WL_STEAL);
  EXPECT_MAIL(&c, {&t, WL_EV_GRANTED});
  EXPECT_MAIL(&b, {&w, WL_EV_GRANTED | WL_EV_STOLEN});
  robbed = wl_request_token(&w);
  ASSERT_EQ(last + 1, robbed);
  ASSERT_EQ(last + 2, wl_request_token(&t));
  last += 2;
  ASSERT_EQ(0, wl_release(&w));
  ASSERT_EQ(1, wl_release(&t));
  tagent_close(&a);
  tagent_close(&b);
  tagent_close(&c);
}

/* Grants made by an abort and by an agent's end get tokens too; a miss
 * gets none and uses none. */
static void test_abort_close_and_miss(void) {
  tagent_t a, b, c;
  wl_request_t s, e, s2, h, q, u;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  tagent_init(&c, ID("c"));
  REQUEST(&a, &s, "x", WL_SHARED, 0);
  REQUEST(&b, &e, "x", WL_EXCLUSIVE, 0);
  REQUEST(&c, &s2, "x", WL_SHARED, 0);
  EXPECT_MAIL(&a, {&s, WL_EV_GRANTED});
  expect_next(&s);
  ASSERT_EQ(1, wl_abort(&e));
  EXPECT_MAIL(&c, {&s2, WL_EV_GRANTED});
  expect_next(&s2);
  REQUEST(&b, &u, "x", WL_EXCLUSIVE, WL_IF_AVAILABLE);
  EXPECT_MAIL(&b, {&u, WL_EV_UNAVAILABLE});
  ASSERT_EQ(0, wl_request_token(&u));
  ASSERT_EQ(1, wl_release(&s));
  ASSERT_EQ(1, wl_release(&s2));
  REQUEST(&a, &h, "y", WL_EXCLUSIVE, 0);
  REQUEST(&b, &q, "y", WL_EXCLUSIVE, 0);
  EXPECT_MAIL(&a, {&h, WL_EV_GRANTED});
  expect_next(&h);
  tagent_close(&a);
  EXPECT_MAIL(&b, {&q, WL_EV_GRANTED});
  expect_next(&q);
  ASSERT_EQ(1, wl_release(&q));
  tagent_close(&b);
  tagent_close(&c);
}

/* Takes the next mail of a machine-wide manager's agent, which must be r's
 * `events`: mail made by this process, or found after a sweep here. */
static void take(wl_agent_t *agent, wl_request_t *r, unsigned events) {
  unsigned got;

  ASSERT(wl_agent_next(agent, &got) == r);
  ASSERT_EQ(events, got);
}

/* Queues on x, says so, and when granted (by the parent's release) sends
 * its token. */
static void waiter(const char *path, int in, int out) {
  wl_manager_t *m = tscope_open(path, SIZE);
  wl_agent_t c;
  wl_request_t r;
  uint64_t token;

  (void)in;
  ASSERT_EQ(0, wl_agent_init(m, &c, ID("child"), tignore_notify));
  ASSERT_EQ(0, wl_request(&c, &r, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(1, write(out, "q", 1));
  tawait_grant(&c, &r);
  token = wl_request_token(&r);
  ASSERT_EQ(sizeof(token), write(out, &token, sizeof(token)));
  ASSERT_EQ(1, wl_release(&r));
  wl_agent_close(&c);
  wl_scope_close(m);
}

/* Two processes share the counter (one's release grants the other's
 * request), and it is the file's: it goes on after every process has
 * closed the file and one opens it again. */
static void test_shared_counter_is_the_files(void) {
  char path[128], byte;
  tchild_t c;
  wl_manager_t *m;
  wl_agent_t p;
  wl_request_t x, y, z;
  uint64_t token;

  tshm_path(path, sizeof(path), "token");
  tchild_run(&c, path, waiter);
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &p, ID("parent"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&p, &x, NAME("x"), WL_EXCLUSIVE, 0));
  take(&p, &x, WL_EV_GRANTED);
  ASSERT_EQ(1, wl_request_token(&x));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&p, &y, NAME("y"), WL_SHARED, 0));
  take(&p, &y, WL_EV_GRANTED);
  ASSERT_EQ(2, wl_request_token(&y));
  ASSERT_EQ(1, write(c.to, "g", 1));
  ASSERT_EQ(1, read(c.from, &byte, 1));
  ASSERT_EQ(1, wl_release(&x)); /* grants the child's request: 3 */
  ASSERT_EQ(sizeof(token), read(c.from, &token, sizeof(token)));
  ASSERT_EQ(3, token);
  tchild_reaped(&c, 0);
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&p, &z, NAME("x"), WL_EXCLUSIVE, 0));
  take(&p, &z, WL_EV_GRANTED);
  ASSERT_EQ(4, wl_request_token(&z));
  ASSERT_EQ(1, wl_release(&y));
  ASSERT_EQ(1, wl_release(&z));
  ASSERT_EQ(0, wl__check(m));
  wl_agent_close(&p);
  wl_scope_close(m);

  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &p, ID("again"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&p, &x, NAME("x"), WL_EXCLUSIVE, 0));
  take(&p, &x, WL_EV_GRANTED);
  ASSERT_EQ(5, wl_request_token(&x));
  ASSERT_EQ(1, wl_release(&x));
  wl_agent_close(&p);
  wl_scope_close(m);
  unlink(path);
}

/* Holds x, sends its token, and when told, releases x and dies at the
 * fault point "mail": the grant of x to the parent's waiting request is
 * mailed, not made. */
static void holder_dies_granting(const char *path, int in, int out) {
  wl_manager_t *m = tscope_open(path, SIZE);
  wl_agent_t c;
  wl_request_t r;
  uint64_t token;
  char byte;

  ASSERT_EQ(0, wl_agent_init(m, &c, ID("child"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&c, &r, NAME("x"), WL_EXCLUSIVE, 0));
  take(&c, &r, WL_EV_GRANTED);
  token = wl_request_token(&r);
  ASSERT_EQ(sizeof(token), write(out, &token, sizeof(token)));
  ASSERT_EQ(1, read(in, &byte, 1));
  tkill_at("mail");
  wl_release(&r);
  ASSERT(0); /* not reached */
}

/* A grant cut short by a crash is made by the recovery, with a new token. */
static void test_grant_finished_by_recovery(void) {
  char path[128];
  tchild_t c;
  wl_manager_t *m;
  wl_agent_t p;
  wl_request_t w, v;
  uint64_t theirs;

  tshm_path(path, sizeof(path), "token-grant");
  tchild_run(&c, path, holder_dies_granting);
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &p, ID("parent"), tignore_notify));
  ASSERT_EQ(1, write(c.to, "g", 1));
  ASSERT_EQ(sizeof(theirs), read(c.from, &theirs, sizeof(theirs)));
  ASSERT_EQ(0, wl_request(&p, &w, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(1, write(c.to, "r", 1));
  tchild_reaped(&c, 1);
  /* Whoever takes the mutex first (this sweep or the watcher's) recovers. */
  ASSERT_EQ(0, wl_sweep(m));
  take(&p, &w, WL_EV_GRANTED);
  ASSERT(wl_request_token(&w) > theirs);
  ASSERT_EQ(0, wl__check(m));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&p, &v, NAME("v"), WL_EXCLUSIVE, 0));
  take(&p, &v, WL_EV_GRANTED);
  ASSERT(wl_request_token(&v) > wl_request_token(&w));
  ASSERT_EQ(1, wl_release(&w));
  ASSERT_EQ(1, wl_release(&v));
  wl_agent_close(&p);
  wl_scope_close(m);
  unlink(path);
}

/* Steals x and dies at the fault point "request-stole": the holders are
 * robbed, the thief not yet queued. */
static void thief_dies(const char *path, int in, int out) {
  wl_manager_t *m = tscope_open(path, SIZE);
  wl_agent_t c;
  wl_request_t t;

  (void)in;
  (void)out;
  ASSERT_EQ(0, wl_agent_init(m, &c, ID("thief"), tignore_notify));
  tkill_at("request-stole");
  wl_request(&c, &t, NAME("x"), WL_EXCLUSIVE, WL_STEAL);
  ASSERT(0); /* not reached */
}

/* A steal cut short is finished by the recovery: the thief is granted
 * (with a token) and, being dead, releases, which grants the next waiter a
 * token after the thief's. */
static void test_steal_finished_by_recovery(void) {
  char path[128];
  tchild_t c;
  wl_manager_t *m;
  wl_agent_t p;
  wl_request_t h, w;

  tshm_path(path, sizeof(path), "token-steal");
  tchild_run(&c, path, thief_dies);
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &p, ID("parent"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&p, &h, NAME("x"), WL_EXCLUSIVE, 0));
  take(&p, &h, WL_EV_GRANTED);
  ASSERT_EQ(1, wl_request_token(&h));
  ASSERT_EQ(0, wl_request(&p, &w, NAME("x"), WL_EXCLUSIVE, 0));
  ASSERT_EQ(1, write(c.to, "g", 1));
  tchild_reaped(&c, 1);
  ASSERT_EQ(0, wl_sweep(m));
  take(&p, &h, WL_EV_STOLEN);
  take(&p, &w, WL_EV_GRANTED);
  ASSERT_EQ(3, wl_request_token(&w)); /* 2 was the thief's */
  ASSERT_EQ(0, wl__check(m));
  ASSERT_EQ(0, wl_release(&h));
  ASSERT_EQ(1, wl_release(&w));
  wl_agent_close(&p);
  wl_scope_close(m);
  unlink(path);
}

/* Recovery keeps the counter, or raises it past a record's token; it never
 * lowers it. Here the counter is set by hand, behind and ahead of the held
 * lock's token. */
static void test_recovery_never_lowers_the_counter(void) {
  char path[128];
  wl_manager_t *m;
  wl_agent_t p;
  wl_request_t x, y, z;

  tshm_path(path, sizeof(path), "token-recover");
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &p, ID("parent"), tignore_notify));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&p, &x, NAME("x"), WL_EXCLUSIVE, 0));
  take(&p, &x, WL_EV_GRANTED);
  ASSERT_EQ(1, wl_request_token(&x));
  ASSERT_EQ(0, wl__lock(m));
  WL__HDR(m)->grants = 0;
  ASSERT_EQ(0, wl__recover(m));
  ASSERT_EQ(1, WL__HDR(m)->grants);
  WL__HDR(m)->grants = 1000;
  ASSERT_EQ(0, wl__recover(m));
  ASSERT_EQ(1000, WL__HDR(m)->grants);
  wl__unlock(m);
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&p, &y, NAME("y"), WL_EXCLUSIVE, 0));
  take(&p, &y, WL_EV_GRANTED);
  ASSERT_EQ(1001, wl_request_token(&y));
  ASSERT_EQ(0, wl__check(m));
  ASSERT_EQ(1, wl_release(&x));
  ASSERT_EQ(1, wl_release(&y));
  ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&p, &z, NAME("x"), WL_EXCLUSIVE, 0));
  take(&p, &z, WL_EV_GRANTED);
  ASSERT_EQ(1002, wl_request_token(&z));
  ASSERT_EQ(1, wl_release(&z));
  wl_agent_close(&p);
  wl_scope_close(m);
  unlink(path);
}

int main(void) {
  RUN(test_first_token_is_one);
  RUN(test_tokens_follow_grant_order);
  RUN(test_thief_token_is_greater);
  RUN(test_abort_close_and_miss);
  RUN(test_shared_counter_is_the_files);
  RUN(test_grant_finished_by_recovery);
  RUN(test_steal_finished_by_recovery);
  RUN(test_recovery_never_lowers_the_counter);
  return 0;
}
