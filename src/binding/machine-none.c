/* The binding without the machine-wide manager (Windows and other systems,
 * or a build without it: WEB_LOCKS_NO_MACHINE): lib/ finds no open() and
 * rejects openLockManager(scope) with a NotSupportedError; a thread has no
 * agent of a machine-wide manager to end. */
#include "machine.h"

size_t wlb__scope_props(wlb_thread_t *t, napi_property_descriptor *props) {
  return 0;
}

void wlb__scope_teardown(wlb_thread_t *t) {}
