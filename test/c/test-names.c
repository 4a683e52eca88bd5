/* The name table: many names, names one code unit apart, long names. */
#include <stdlib.h>

#include "test.h"

#define MANY 100000
#define LONG_LEN (1024 * 1024)

/* Writes the i-th of MANY distinct three-unit names into units. */
static void many_name(uint16_t units[3], size_t i) {
  units[0] = (uint16_t)(i & 0xFFFF);
  units[1] = (uint16_t)(i >> 16);
  units[2] = 0xD800;
}

static void request_many(tagent_t *t, wl_request_t *r, size_t i,
                         unsigned flags) {
  uint16_t units[3];

  many_name(units, i);
  ASSERT(wl_request(&t->agent, r, units, 3, WL_EXCLUSIVE, flags) >= 0);
}

/* 100k names held at once, each found again by value, then all released
 * (in an order unlike insertion) until the table is empty. */
static void test_many_names(void) {
  wl_request_t *r = malloc(MANY * sizeof(*r));
  tmail_t *mail = malloc(MANY * sizeof(*mail));
  wl_request_t probe;
  tagent_t a, b;
  size_t i;

  ASSERT(r != NULL && mail != NULL);
  tagent_init(&a, ID("a"));
  tagent_init(&b, ID("b"));
  for (i = 0; i < MANY; i++)
    request_many(&a, &r[i], i, 0);
  ASSERT_EQ(MANY, wl__name_count(wl_process()));
  ASSERT_EQ(MANY, drain(&a, mail, MANY));
  for (i = 0; i < MANY; i++)
    ASSERT(mail[i].req == &r[i] && mail[i].events == WL_EV_GRANTED);
  for (i = 0; i < MANY; i += MANY / 100) {
    request_many(&b, &probe, i, WL_IF_AVAILABLE);
    EXPECT_MAIL(&b, {&probe, WL_EV_UNAVAILABLE});
  }
  request_many(&b, &probe, MANY, WL_IF_AVAILABLE);
  EXPECT_MAIL(&b, {&probe, WL_EV_GRANTED});
  ASSERT_EQ(1, wl_release(&probe));
  for (i = 0; i < MANY; i += 2)
    ASSERT_EQ(1, wl_release(&r[i]));
  ASSERT_EQ(MANY / 2, wl__name_count(wl_process()));
  for (i = MANY - 1; i < MANY; i -= 2)
    ASSERT_EQ(1, wl_release(&r[i]));
  ASSERT_EQ(0, wl__name_count(wl_process()));
  EXPECT_NO_MAIL(&a);
  tagent_close(&a);
  tagent_close(&b);
  free(mail);
  free(r);
}

/* Each of these names, and the empty name, differs from every other (by one
 * unit, by one trailing NUL unit, or by byte order), so each is granted. */
static void test_names_one_unit_apart(void) {
  static const uint16_t units[][5] = {
      {0xD800},     {0xFFFD},        {0xDC00},     {0x61},
      {0x61, 0},    {0x61, 0, 0},    {0x0100},     {0x0001},
      {1, 2, 3, 4}, {1, 2, 3, 4, 0}, {1, 2, 3, 5}, {0},
  };
  static const size_t lens[] = {1, 1, 1, 1, 2, 3, 1, 1, 4, 5, 4, 1};
  enum { N = sizeof(lens) / sizeof(lens[0]) };
  wl_request_t r[N + 1];
  tmail_t mail[N + 1];
  tagent_t a;
  size_t i;

  tagent_init(&a, ID("a"));
  for (i = 0; i < N; i++)
    ASSERT(wl_request(&a.agent, &r[i], units[i], lens[i], WL_EXCLUSIVE,
                      WL_IF_AVAILABLE) >= 0);
  ASSERT(wl_request(&a.agent, &r[N], units[0], 0, WL_EXCLUSIVE,
                    WL_IF_AVAILABLE) >= 0);
  ASSERT_EQ(N + 1, wl__name_count(wl_process()));
  ASSERT_EQ(N + 1, drain(&a, mail, N + 1));
  for (i = 0; i <= N; i++)
    ASSERT(mail[i].req == &r[i] && mail[i].events == WL_EV_GRANTED);
  tagent_close(&a);
}

/* Equal units in different buffers are the same name. */
static void test_equal_units_same_name(void) {
  uint16_t one[] = {0x6C, 0xD800, 0};
  uint16_t two[] = {0x6C, 0xD800, 0};
  uint16_t empty1[1], empty2[1];
  wl_request_t r1, r2, e1, e2;
  tagent_t a;

  tagent_init(&a, ID("a"));
  ASSERT(wl_request(&a.agent, &r1, one, 3, WL_EXCLUSIVE, 0) >= 0);
  ASSERT(wl_request(&a.agent, &r2, two, 3, WL_EXCLUSIVE, WL_IF_AVAILABLE) >= 0);
  ASSERT(wl_request(&a.agent, &e1, empty1, 0, WL_EXCLUSIVE, 0) >= 0);
  ASSERT(wl_request(&a.agent, &e2, empty2, 0, WL_EXCLUSIVE, WL_IF_AVAILABLE) >=
         0);
  EXPECT_MAIL(&a, {&r1, WL_EV_GRANTED}, {&r2, WL_EV_UNAVAILABLE},
              {&e1, WL_EV_GRANTED}, {&e2, WL_EV_UNAVAILABLE});
  ASSERT_EQ(2, wl__name_count(wl_process()));
  tagent_close(&a);
}

static uint16_t *long_name(void) {
  uint16_t *units = malloc(LONG_LEN * sizeof(*units));
  size_t i;

  ASSERT(units != NULL);
  for (i = 0; i < LONG_LEN; i++)
    units[i] = (uint16_t)(i * 40503u);
  return units;
}

static const wl_info_t *find_held(const wl_snapshot_t *snap,
                                  const uint16_t *units) {
  size_t i;

  for (i = 0; i < snap->nheld; i++) {
    if (snap->held[i].name_len == LONG_LEN &&
        memcmp(snap->held[i].name, units, LONG_LEN * sizeof(*units)) == 0)
      return &snap->held[i];
  }
  return NULL;
}

/* Million-unit names: one differing in the last unit or in the first is
 * another name, an equal copy is the same; the snapshot returns them whole. */
static void test_long_names(void) {
  uint16_t *base = long_name(), *last = long_name(), *first = long_name(),
           *copy = long_name();
  wl_request_t r[4];
  wl_snapshot_t snap;
  tagent_t a;

  last[LONG_LEN - 1] ^= 1;
  first[0] ^= 0x8000;
  tagent_init(&a, ID("a"));
  ASSERT(wl_request(&a.agent, &r[0], base, LONG_LEN, WL_EXCLUSIVE, 0) >= 0);
  ASSERT(wl_request(&a.agent, &r[1], last, LONG_LEN, WL_EXCLUSIVE,
                    WL_IF_AVAILABLE) >= 0);
  ASSERT(wl_request(&a.agent, &r[2], first, LONG_LEN, WL_EXCLUSIVE,
                    WL_IF_AVAILABLE) >= 0);
  ASSERT(wl_request(&a.agent, &r[3], copy, LONG_LEN, WL_EXCLUSIVE,
                    WL_IF_AVAILABLE) >= 0);
  EXPECT_MAIL(&a, {&r[0], WL_EV_GRANTED}, {&r[1], WL_EV_GRANTED},
              {&r[2], WL_EV_GRANTED}, {&r[3], WL_EV_UNAVAILABLE});
  ASSERT_EQ(0, wl_snapshot(wl_process(), &snap));
  ASSERT_EQ(3, snap.nheld);
  ASSERT(find_held(&snap, base) != NULL);
  ASSERT(find_held(&snap, last) != NULL);
  ASSERT(find_held(&snap, first) != NULL);
  wl_snapshot_free(&snap);
  tagent_close(&a);
  free(base);
  free(last);
  free(first);
  free(copy);
}

/* A name dropped when free is created again on its next use. */
static void test_name_reuse(void) {
  wl_request_t r;
  tagent_t a;
  int i;

  tagent_init(&a, ID("a"));
  for (i = 0; i < 1000; i++) {
    REQUEST(&a, &r, "again", i % 2 ? WL_SHARED : WL_EXCLUSIVE, 0);
    ASSERT_EQ(1, wl__name_count(wl_process()));
    EXPECT_MAIL(&a, {&r, WL_EV_GRANTED});
    ASSERT_EQ(1, wl_release(&r));
    ASSERT_EQ(0, wl__name_count(wl_process()));
  }
  tagent_close(&a);
}

int main(void) {
  RUN(test_many_names);
  RUN(test_names_one_unit_apart);
  RUN(test_equal_units_same_name);
  RUN(test_long_names);
  RUN(test_name_reuse);
  return 0;
}
