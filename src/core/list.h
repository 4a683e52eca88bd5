/* The types of intrusive circular doubly-linked lists inside a region,
 * linked by offsets from the region's base rather than by pointers, so that
 * a region means the same wherever it is mapped. Their operations, which
 * check every offset they read, are in core/internal.h. */
#ifndef WL_LIST_H
#define WL_LIST_H

#include <stddef.h>
#include <stdint.h>

typedef uint64_t wl_off_t;

typedef struct {
  wl_off_t prev;
  wl_off_t next;
} wl__link_t;

/* The offset of the record whose `member` link is at `link`. */
#define wl__record_of(link, type, member) ((link) - offsetof(type, member))

#endif
