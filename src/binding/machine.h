/* The machine-wide manager's part of the binding: machine.c where it
 * exists, machine-none.c elsewhere. */
#ifndef WLB_MACHINE_H
#define WLB_MACHINE_H

#include "napi.h"

/* Its functions, which lib/ looks for (WLB_SCOPE_PROPS descriptors at most,
 * written to props: their count), and the end of the thread's agents of it
 * at teardown. */
#define WLB_SCOPE_PROPS 8
size_t wlb__scope_props(wlb_thread_t *t, napi_property_descriptor *props);
void wlb__scope_teardown(wlb_thread_t *t);

#endif
