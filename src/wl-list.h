/* Intrusive circular doubly-linked lists inside a region, linked by offsets
 * from the region's base rather than by pointers, so that a region means the
 * same wherever it is mapped. An unlinked node has next == 0, so membership
 * is an O(1) test and removal never needs the list head. Offset 0 is the
 * region's header, never a node. */
#ifndef WL_LIST_H
#define WL_LIST_H

#include <stddef.h>
#include <stdint.h>

typedef uint64_t wl_off_t;

typedef struct {
  wl_off_t prev;
  wl_off_t next;
} wl__link_t;

#define WL__AT(base, off) ((void *)((char *)(base) + (off)))
#define WL__LINK(base, off) ((wl__link_t *)WL__AT(base, off))
/* The offset of the record whose `member` link is at `link`. */
#define wl__record_of(link, type, member) ((link) - offsetof(type, member))
#define wl__off_of(base, ptr) ((wl_off_t)((char *)(ptr) - (char *)(base)))

static inline void wl__list_init(void *base, wl_off_t head) {
  WL__LINK(base, head)->prev = head;
  WL__LINK(base, head)->next = head;
}

static inline int wl__list_empty(void *base, wl_off_t head) {
  return WL__LINK(base, head)->next == head;
}

static inline int wl__linked(void *base, wl_off_t node) {
  return WL__LINK(base, node)->next != 0;
}

static inline void wl__list_insert_after(void *base, wl_off_t at,
                                         wl_off_t node) {
  wl__link_t *a = WL__LINK(base, at), *n = WL__LINK(base, node);
  n->prev = at;
  n->next = a->next;
  WL__LINK(base, a->next)->prev = node;
  a->next = node;
}

static inline void wl__list_append(void *base, wl_off_t head, wl_off_t node) {
  wl__list_insert_after(base, WL__LINK(base, head)->prev, node);
}

static inline void wl__list_prepend(void *base, wl_off_t head,
                                    wl_off_t node) {
  wl__list_insert_after(base, head, node);
}

static inline void wl__list_remove(void *base, wl_off_t node) {
  wl__link_t *n = WL__LINK(base, node);
  WL__LINK(base, n->prev)->next = n->next;
  WL__LINK(base, n->next)->prev = n->prev;
  n->prev = 0;
  n->next = 0;
}

#endif
