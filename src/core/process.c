/* The algorithms (core/algorithms-inl.h) for the process-wide manager (wl_process()). Its
 * region is private memory that only this code writes, under the mutex, so
 * nothing read from it needs checking, no walk a budget, and no record the
 * keys that recovery would need. */
#define WL__MACHINE(m) 0
#define WL__OPS wl__process_ops

#include "algorithms-inl.h"
