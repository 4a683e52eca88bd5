/* The algorithms (core/algorithms-inl.h) for managers shared by processes
 * (core/scope.c). Every offset read from the region is checked, every walk
 * bounded, and every request record carries the keys from which recovery
 * rebuilds the lists (core/recover.c): another process may have died in the
 * middle of an algorithm, or written anything at all. */
#define WL__MACHINE(m) 1
#define WL__OPS wl__machine_ops

#include "algorithms-inl.h"
