/* wl_scope_close stops and joins both threads of its handle, leaves the
 * ring mended and its owner record vacant for the next owner: open and
 * close loops leave no thread, no memory (ASan) and no growing list of
 * records behind, and a close that races a death does not lose it. */
#define _GNU_SOURCE

#include <unistd.h>

#include "test.h"

#define SIZE (1 << 20)

static char path[128];

/* Whether this process has a thread of that name. */
static int running(const char *comm) { return tthread_ticks(0, comm) >= 0; }

/* Vacant owner records (each once an owner), under the mutex. */
static long vacant(wl_manager_t *m) {
  wl_off_t head = wl__off_of(m, &WL__HDR(m)->vacant), at;
  long n = 0;

  ASSERT_EQ(0, wl__lock(m));
  for (at = WL__LINK(m, head)->next; at != head; at = WL__LINK(m, at)->next)
    n++;
  wl__unlock(m);
  return n;
}

static void test_open_close_loops(void) {
  tchild_t c;
  wl_manager_t *m1, *m2;
  int i;

  tshm_path(path, sizeof(path), "close");
  tchild_fork(&c, path, SIZE, "x", 0, NULL);
  ASSERT_EQ('o', tchild_do(&c, 'o'));
  for (i = 0; i < 100; i++) {
    m1 = tscope_open(path, SIZE);
    m2 = tscope_open(path, SIZE);
    ASSERT_EQ(0, wl__check(m2));
    /* The first or the last to join leaves first. */
    wl_scope_close(i % 2 ? m1 : m2);
    wl_scope_close(i % 2 ? m2 : m1);
  }
  ASSERT(!running("wl-watch"));
  ASSERT(!running("wl-sweep"));
  m1 = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl__check(m1));
  /* Two were ever open here at once: one of them is open again. */
  ASSERT(vacant(m1) <= 1);
  tchild_close(&c);
  tchild_reap(&c);
  ASSERT_EQ(0, wl__check(m1));
  wl_scope_close(m1);
  unlink(path);
}

/* The ring: c, then m1 (waiting for x), then m2, which watches c and
 * closes as c is killed: m1, its successor, must notice. */
static void test_close_races_a_death(void) {
  tchild_t c;
  wl_manager_t *m1, *m2;
  wl_agent_t a;
  wl_request_t r;
  int i;

  tshm_path(path, sizeof(path), "close-race");
  for (i = 0; i < 20; i++) {
    tchild_fork(&c, path, SIZE, "x", 0, NULL);
    ASSERT_EQ('o', tchild_do(&c, 'o'));
    m1 = tscope_open(path, SIZE);
    m2 = tscope_open(path, SIZE);
    ASSERT_EQ(0, wl_agent_init(m1, &a, ID("waiter"), tfifo_notify));
    ASSERT_EQ(0, wl_request(&a, &r, NAME("x"), WL_EXCLUSIVE, 0));
    tchild_kill(&c);
    wl_scope_close(m2);
    tawait_grant(&a, &r);
    tchild_reap(&c);
    ASSERT_EQ(1, wl_release(&r));
    ASSERT_EQ(0, wl__check(m1));
    wl_agent_close(&a);
    wl_scope_close(m1);
  }
  unlink(path);
}

int main(void) {
  RUN(test_open_close_loops);
  RUN(test_close_races_a_death);
  return 0;
}
