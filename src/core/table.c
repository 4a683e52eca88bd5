/* Process-local handle tables (core/table.h). */
#include <stdlib.h>

#include "internal.h"

/* The most slots a table may have: an index + 1, shifted left once, fits a
 * uintptr_t on every platform, and a record stores it in 64 bits. */
#define WL__TABLE_MAX ((uint32_t)1 << 30)

int wl__table_grow(wl__table_t *t) {
  uint32_t cap = t->cap ? t->cap * 2 : 8, i;
  uintptr_t *slots;

  if (cap > WL__TABLE_MAX)
    return WL_ENOMEM;
  slots = realloc(t->slots, cap * sizeof(*slots));
  if (slots == NULL)
    return WL_ENOMEM;
  /* The new slots, linked in index order before the old free list. */
  for (i = cap; i-- > t->cap;) {
    slots[i] = (uintptr_t)t->free << 1 | 1;
    t->free = i + 1;
  }
  t->slots = slots;
  t->cap = cap;
  return 0;
}

void wl__table_free(wl__table_t *t) {
  free(t->slots);
  t->slots = NULL;
  t->cap = 0;
  t->free = 0;
}
