/* wl_snapshot: a copy of the held locks and of the queues, per name in
 * queue order, names in first-use order. */
#include "test.h"

#ifdef _WIN32
#include <windows.h>
#define tpid() ((uint32_t)GetCurrentProcessId())
#else
#include <unistd.h>
#define tpid() ((uint32_t)getpid())
#endif

static void test_empty(void) {
  wl_snapshot_t snap;

  ASSERT_EQ(0, wl_snapshot(wl_process(), &snap));
  ASSERT_EQ(0, snap.nheld);
  ASSERT_EQ(0, snap.npending);
  wl_snapshot_free(&snap);
  ASSERT(snap.mem == NULL);
}

static void test_contents(void) {
  tagent_t a, b, c, d;
  wl_request_t ax, by, cy, dx, ay, bx;
  wl_snapshot_t snap;

  tagent_init(&a, ID("alpha"));
  tagent_init(&b, ID("beta"));
  tagent_init(&c, ID("gamma"));
  tagent_init(&d, ID("delta"));
  REQUEST(&a, &ax, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &by, "y", WL_SHARED, 0);
  REQUEST(&c, &cy, "y", WL_SHARED, 0);
  REQUEST(&d, &dx, "x", WL_EXCLUSIVE, 0);
  REQUEST(&a, &ay, "y", WL_EXCLUSIVE, 0);
  REQUEST(&b, &bx, "x", WL_SHARED, 0);
  ASSERT_EQ(0, wl_snapshot(wl_process(), &snap));
  EXPECT_HELD(&snap, {NAME("x"), WL_EXCLUSIVE, ID("alpha")},
              {NAME("y"), WL_SHARED, ID("beta")},
              {NAME("y"), WL_SHARED, ID("gamma")});
  EXPECT_PENDING(&snap, {NAME("x"), WL_EXCLUSIVE, ID("delta")},
                 {NAME("x"), WL_SHARED, ID("beta")},
                 {NAME("y"), WL_EXCLUSIVE, ID("alpha")});
  wl_snapshot_free(&snap);
  tagent_close(&a);
  tagent_close(&b);
  tagent_close(&c);
  tagent_close(&d);
}

/* Queues are listed by their name's first use, not by request time. */
static void test_names_in_first_use_order(void) {
  tagent_t a, b;
  wl_request_t hp, hq, wq, wp;
  wl_snapshot_t snap;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &hp, "p", WL_EXCLUSIVE, 0);
  REQUEST(&a, &hq, "q", WL_EXCLUSIVE, 0);
  REQUEST(&b, &wq, "q", WL_EXCLUSIVE, 0);
  REQUEST(&b, &wp, "p", WL_SHARED, 0);
  ASSERT_EQ(0, wl_snapshot(wl_process(), &snap));
  EXPECT_PENDING(&snap, {NAME("p"), WL_SHARED, ID("b")},
                 {NAME("q"), WL_EXCLUSIVE, ID("b")});
  wl_snapshot_free(&snap);
  tagent_close(&a);
  tagent_close(&b);
}

/* Stolen, unavailable and aborted requests are not listed. */
static void test_finished_requests_not_listed(void) {
  tagent_t a, b;
  wl_request_t h, u, q, t;
  wl_snapshot_t snap;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &h, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &u, "x", WL_SHARED, WL_IF_AVAILABLE);
  REQUEST(&b, &q, "x", WL_SHARED, 0);
  ASSERT_EQ(1, wl_abort(&q));
  REQUEST(&b, &t, "x", WL_EXCLUSIVE, WL_STEAL);
  ASSERT_EQ(0, wl_snapshot(wl_process(), &snap));
  EXPECT_HELD(&snap, {NAME("x"), WL_EXCLUSIVE, ID("b")});
  ASSERT_EQ(0, snap.npending);
  wl_snapshot_free(&snap);
  tagent_close(&a);
  tagent_close(&b);
}

/* Client ids are the agent's copy, bytes of any value up to the maximum. */
static void test_client_ids_copied(void) {
  static const char want[WL_CLIENT_ID_MAX] = {0, 'm',
                                              [WL_CLIENT_ID_MAX - 1] = '\xff'};
  char id[] = "mutable";
  char max[WL_CLIENT_ID_MAX];
  tagent_t a, b;
  wl_request_t ra, rb;
  wl_snapshot_t snap;

  memcpy(max, want, sizeof(max));
  tagent_init(&a, id, strlen(id));
  tagent_init(&b, max, sizeof(max));
  memset(id, '?', strlen(id));
  memset(max, '?', sizeof(max));
  REQUEST(&a, &ra, "x", WL_SHARED, 0);
  REQUEST(&b, &rb, "x", WL_SHARED, 0);
  ASSERT_EQ(0, wl_snapshot(wl_process(), &snap));
  EXPECT_HELD(&snap, {NAME("x"), WL_SHARED, ID("mutable")},
              {NAME("x"), WL_SHARED, want, sizeof(want)});
  wl_snapshot_free(&snap);
  tagent_close(&a);
  tagent_close(&b);
}

/* Names are code units, not text: NUL units, lone surrogates and the empty
 * name come back as given. */
static void test_odd_names(void) {
  static const uint16_t nul[] = {0x61, 0x0000, 0x62};
  static const uint16_t high[] = {0xD800};
  static const uint16_t swapped[] = {0xDFFF, 0xD800};
  static const uint16_t empty[1] = {0x7A};
  tagent_t a, b;
  wl_request_t r[4], w;
  wl_snapshot_t snap;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  ASSERT(wl_request(&a.agent, &r[0], nul, 3, WL_EXCLUSIVE, 0) >= 0);
  ASSERT(wl_request(&a.agent, &r[1], high, 1, WL_EXCLUSIVE, 0) >= 0);
  ASSERT(wl_request(&a.agent, &r[2], empty, 0, WL_SHARED, 0) >= 0);
  ASSERT(wl_request(&a.agent, &r[3], swapped, 2, WL_EXCLUSIVE, 0) >= 0);
  ASSERT(wl_request(&b.agent, &w, nul, 3, WL_SHARED, 0) >= 0);
  ASSERT_EQ(0, wl_snapshot(wl_process(), &snap));
  EXPECT_HELD(&snap, {nul, 3, WL_EXCLUSIVE, ID("a")},
              {high, 1, WL_EXCLUSIVE, ID("a")}, {empty, 0, WL_SHARED, ID("a")},
              {swapped, 2, WL_EXCLUSIVE, ID("a")});
  EXPECT_PENDING(&snap, {nul, 3, WL_SHARED, ID("b")});
  wl_snapshot_free(&snap);
  tagent_close(&a);
  tagent_close(&b);
}

/* A snapshot owns its memory: it reads the same after every name and agent
 * it mentions is gone and others took their place. */
static void test_survives_state_changes(void) {
  tagent_t a, b;
  wl_request_t h, q, n1, n2;
  wl_snapshot_t old, now;

  tagent_init(&a, ID("first"));
  tagent_init(&b, ID("second"));
  REQUEST(&a, &h, "old-name", WL_EXCLUSIVE, 0);
  REQUEST(&b, &q, "old-name", WL_SHARED, 0);
  ASSERT_EQ(0, wl_snapshot(wl_process(), &old));
  tagent_close(&a);
  tagent_close(&b);
  ASSERT_EQ(0, wl__name_count(wl_process()));
  tagent_init(&a, ID("third"));
  REQUEST(&a, &n1, "new-name", WL_SHARED, 0);
  REQUEST(&a, &n2, "old-name", WL_EXCLUSIVE, 0);
  ASSERT_EQ(0, wl_snapshot(wl_process(), &now));
  EXPECT_HELD(&old, {NAME("old-name"), WL_EXCLUSIVE, ID("first")});
  EXPECT_PENDING(&old, {NAME("old-name"), WL_SHARED, ID("second")});
  EXPECT_HELD(&now, {NAME("new-name"), WL_SHARED, ID("third")},
              {NAME("old-name"), WL_EXCLUSIVE, ID("third")});
  ASSERT_EQ(0, now.npending);
  wl_snapshot_free(&old);
  wl_snapshot_free(&now);
  tagent_close(&a);
}

/* Every entry of one name, held or pending, shares one copy of the name and
 * one name index; distinct names have distinct indexes. */
static void test_one_copy_per_name(void) {
  tagent_t a, b;
  wl_request_t x1, x2, x3, y1, y2;
  wl_snapshot_t snap;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  REQUEST(&a, &x1, "x", WL_SHARED, 0);
  REQUEST(&a, &y1, "y", WL_EXCLUSIVE, 0);
  REQUEST(&b, &x2, "x", WL_SHARED, 0);
  REQUEST(&b, &x3, "x", WL_EXCLUSIVE, 0);
  REQUEST(&b, &y2, "y", WL_EXCLUSIVE, 0);
  ASSERT_EQ(0, wl_snapshot(wl_process(), &snap));
  ASSERT_EQ(2, snap.nnames);
  ASSERT_EQ(3, snap.nheld);
  ASSERT_EQ(2, snap.npending);
  /* Held: x (a), x (b), y (a); pending: x (b), y (b). */
  ASSERT(snap.held[0].name == snap.held[1].name);
  ASSERT(snap.held[0].name == snap.pending[0].name);
  ASSERT(snap.held[2].name == snap.pending[1].name);
  ASSERT(snap.held[0].name != snap.held[2].name);
  ASSERT_EQ(snap.held[0].name_index, snap.held[1].name_index);
  ASSERT_EQ(snap.held[0].name_index, snap.pending[0].name_index);
  ASSERT_EQ(snap.held[2].name_index, snap.pending[1].name_index);
  ASSERT(snap.held[0].name_index != snap.held[2].name_index);
  ASSERT(snap.held[0].name_index < 2 && snap.held[2].name_index < 2);
  wl_snapshot_free(&snap);
  tagent_close(&a);
  tagent_close(&b);
}

/* Each entry carries its request's id (wl_request_serial, one per request),
 * the parent its caller gave, and its process; the process-wide manager
 * keeps no times. */
static void test_ids_and_parents(void) {
  tagent_t a, b;
  wl_request_t outer, inner, other;
  wl_snapshot_t snap;

  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  outer.parent = 0;
  REQUEST(&a, &outer, "x", WL_EXCLUSIVE, 0);
  inner.parent = wl_request_serial(&outer);
  REQUEST(&a, &inner, "x", WL_SHARED, 0);
  other.parent = 0;
  REQUEST(&b, &other, "y", WL_EXCLUSIVE, 0);
  ASSERT(wl_request_serial(&outer) != 0);
  ASSERT(wl_request_serial(&inner) != wl_request_serial(&outer));
  ASSERT(wl_request_serial(&other) != wl_request_serial(&inner));
  ASSERT_EQ(0, wl_snapshot(wl_process(), &snap));
  ASSERT_EQ(2, snap.nheld);
  ASSERT_EQ(1, snap.npending);
  ASSERT_EQ(wl_request_serial(&outer), snap.held[0].serial);
  ASSERT_EQ(0, snap.held[0].parent);
  ASSERT_EQ(wl_request_serial(&other), snap.held[1].serial);
  ASSERT_EQ(wl_request_serial(&inner), snap.pending[0].serial);
  ASSERT_EQ(wl_request_serial(&outer), snap.pending[0].parent);
  ASSERT_EQ(tpid(), snap.pending[0].pid);
  ASSERT_EQ(0, snap.pending[0].since);
  wl_snapshot_free(&snap);
  tagent_close(&a);
  tagent_close(&b);
}

int main(void) {
  RUN(test_empty);
  RUN(test_contents);
  RUN(test_names_in_first_use_order);
  RUN(test_finished_requests_not_listed);
  RUN(test_client_ids_copied);
  RUN(test_odd_names);
  RUN(test_survives_state_changes);
  RUN(test_one_copy_per_name);
  RUN(test_ids_and_parents);
  return 0;
}
