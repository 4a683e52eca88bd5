/* A process-local table of handles, found by a small index: what a record
 * in a manager's region names instead of a pointer, since anyone who can
 * write a machine-wide manager's file can write the region. Every index read from
 * a region is checked against the table before its handle is used. wl.h
 * includes it, after its error codes. */
#ifndef WL_TABLE_H
#define WL_TABLE_H

#include <stdint.h>

typedef struct {
  /* A handle, or a free slot: (next free index + 1) << 1 | 1. Handles are
   * pointers to structs, so their low bit is 0. */
  uintptr_t *slots;
  uint32_t cap;
  uint32_t free; /* index + 1 of the first free slot; 0: none */
} wl__table_t;

/* Adds free slots (core/table.c): 0, or WL_ENOMEM. */
int wl__table_grow(wl__table_t *t);
/* Frees the table itself. */
void wl__table_free(wl__table_t *t);

/* Puts p in a free slot: 0 with its index in *index, or WL_ENOMEM. Inline,
 * as the slot's drop: every request takes a slot. */
static inline int wl__table_put(wl__table_t *t, void *p, uint32_t *index) {
  uint32_t i;

  if (t->free == 0 && wl__table_grow(t) != 0)
    return WL_ENOMEM;
  i = t->free - 1;
  t->free = (uint32_t)(t->slots[i] >> 1);
  t->slots[i] = (uintptr_t)p;
  *index = i;
  return 0;
}

/* Frees the slot at index. */
static inline void wl__table_drop(wl__table_t *t, uint32_t index) {
  t->slots[index] = (uintptr_t)t->free << 1 | 1;
  t->free = index + 1;
}

/* The handle at index, or NULL for a free slot or an index out of range. */
static inline void *wl__table_get(const wl__table_t *t, uint64_t index) {
  uintptr_t v;

  if (index >= t->cap)
    return 0;
  v = t->slots[index];
  return v & 1 ? 0 : (void *)v;
}

#endif
