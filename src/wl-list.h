/* Intrusive circular doubly-linked lists. An unlinked node has next == NULL,
 * so membership is an O(1) test and removal never needs the list head. */
#ifndef WL_LIST_H
#define WL_LIST_H

#include <stddef.h>

typedef struct wl__link_s {
  struct wl__link_s *prev;
  struct wl__link_s *next;
} wl__link_t;

#define wl__container_of(ptr, type, member)                                    \
  ((type *)((char *)(ptr) - offsetof(type, member)))

static inline void wl__list_init(wl__link_t *head) {
  head->prev = head;
  head->next = head;
}

static inline int wl__list_empty(const wl__link_t *head) {
  return head->next == head;
}

static inline int wl__linked(const wl__link_t *node) {
  return node->next != NULL;
}

static inline void wl__list_insert_after(wl__link_t *at, wl__link_t *node) {
  node->prev = at;
  node->next = at->next;
  at->next->prev = node;
  at->next = node;
}

static inline void wl__list_append(wl__link_t *head, wl__link_t *node) {
  wl__list_insert_after(head->prev, node);
}

static inline void wl__list_prepend(wl__link_t *head, wl__link_t *node) {
  wl__list_insert_after(head, node);
}

static inline void wl__list_remove(wl__link_t *node) {
  node->prev->next = node->next;
  node->next->prev = node->prev;
  node->prev = NULL;
  node->next = NULL;
}

#endif
