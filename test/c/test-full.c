/* A full machine-wide manager: a request that does not fit fails with WL_ENOMEM
 * and changes nothing; names left idle give their room back to new ones. */
#define _GNU_SOURCE

#include <unistd.h>

#include "test.h"

#define SIZE (4 * 4096)
#define MAX 256

static char path[128];

static void test_full_then_room_again(void) {
  wl_manager_t *m;
  wl_agent_t a;
  wl_request_t r[MAX], extra;
  wl_snapshot_t before, after;
  uint16_t name[2];
  int n, i;

  tshm_path(path, sizeof(path), "full");
  m = tscope_open(path, SIZE);
  ASSERT_EQ(0, wl_agent_init(m, &a, ID("a"), tignore_notify));
  /* Distinct names until the region is full. */
  for (n = 0; n < MAX; n++) {
    name[0] = 'a' + (uint16_t)(n % 26);
    name[1] = 'A' + (uint16_t)(n / 26);
    i = wl_request(&a, &r[n], name, 2, WL_EXCLUSIVE, 0);
    if (i == WL_ENOMEM)
      break;
    ASSERT_EQ(WL_GRANTED_AT_ONCE, i);
  }
  ASSERT(n > 4 && n < MAX);
  ASSERT_EQ(0, wl_snapshot(m, &before));
  ASSERT_EQ(WL_ENOMEM, wl_request(&a, &extra, NAME("one more"), WL_SHARED, 0));
  ASSERT_EQ(0, wl_snapshot(m, &after));
  ASSERT_EQ(before.nheld, after.nheld);
  ASSERT_EQ(before.npending, after.npending);
  ASSERT_EQ(n, after.nheld);
  wl_snapshot_free(&before);
  wl_snapshot_free(&after);
  ASSERT_EQ(0, wl__check(m));
  /* Released, the names stay idle; new names take their room. */
  for (i = 0; i < n; i++)
    ASSERT_EQ(1, wl_release(&r[i]));
  ASSERT_EQ(0, wl__name_count(m));
  for (i = 0; i < n; i++) {
    name[0] = '0' + (uint16_t)(i % 10);
    name[1] = '0' + (uint16_t)(i / 10);
    ASSERT_EQ(WL_GRANTED_AT_ONCE, wl_request(&a, &r[i], name, 2, WL_SHARED, 0));
  }
  ASSERT_EQ(0, wl__check(m));
  for (i = 0; i < n; i++)
    ASSERT_EQ(1, wl_release(&r[i]));
  wl_agent_close(&a);
  wl_scope_close(m);
  unlink(path);
}

int main(void) {
  RUN(test_full_then_room_again);
  return 0;
}
