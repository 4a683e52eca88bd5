/* Wake-ups across processes on Windows (os/machine.h; the design:
 * os/win/machine.h, point 4): an auto-reset event per agent, named by a
 * number drawn at random and kept in its record. The agent's thread waits
 * on it; whichever process makes the agent's mailbox non-empty sets it. A
 * number read from the file only ever names an event to set: a wrong one
 * wakes some agent for nothing, or no one. The system removes an event with
 * its last handle, so a dead agent leaves nothing behind.
 *
 * The handles of recently woken agents' events stay open, so that a
 * wake-up is one SetEvent instead of an open, a set and a close. One whose
 * agent has gone keeps its event alive, unread, until it is replaced:
 * setting it is harmless, and no other agent has its number. */
#include <stdio.h>
#include <stdlib.h>

#include "machine.h"

/* Names drawn before giving up: each is taken with odds of 2^-64 unless
 * something is wrong with the random numbers. */
#define WL__EVENT_TRIES 4

/* A name that another object has (an event: ERROR_ALREADY_EXISTS; another
 * kind of object: ERROR_INVALID_HANDLE; one this user may not open:
 * ERROR_ACCESS_DENIED) is drawn again: never an event someone else made,
 * who could then wake the agent or take its wake-ups. */
static int wl__event_taken(DWORD error) {
  if (error == ERROR_INVALID_HANDLE || error == ERROR_ACCESS_DENIED)
    return -EEXIST;
  return wl__win_errno(error);
}

/* Under the mutex. The number is in the record before the event exists. */
int wl__os_wake_open(wl_manager_t *m, uint64_t *stored, uint64_t *wake,
                     wl_wait_t *on) {
  wchar_t name[WL__WIN_NAME_MAX];
  SECURITY_ATTRIBUTES *sa = wl__win_objects();
  HANDLE h = NULL;
  int rc = -EEXIST, tries;

  (void)m;
  if (sa == NULL)
    rc = wl__win_errno(GetLastError());
  for (tries = 0; tries < WL__EVENT_TRIES && rc == -EEXIST; tries++) {
    if ((rc = wl__os_draw(wake)) != 0)
      break;
    __atomic_store_n(stored, *wake, __ATOMIC_RELAXED);
    wl__win_name(name, "wake", *wake);
    WL__FAULT("wake-name");
    h = CreateEventW(sa, FALSE, FALSE, name);
    if (h == NULL) {
      rc = wl__event_taken(GetLastError());
    } else if (GetLastError() == ERROR_ALREADY_EXISTS) {
      CloseHandle(h);
      h = NULL;
      rc = -EEXIST;
    } else {
      rc = 0;
    }
  }
  if (rc != 0) {
    __atomic_store_n(stored, 0, __ATOMIC_RELAXED);
    *wake = 0;
    return rc;
  }
  *on = h;
  return 0;
}

/* The event goes with its last handle: only this process's is closed. */
void wl__os_wake_close(wl_manager_t *m, uint64_t wake, wl_wait_t on) {
  (void)m;
  (void)wake;
  if (on != NULL)
    CloseHandle(on);
}

void wl__os_wake(wl_manager_t *m, wl_off_t slot, uint64_t wake) {
  wl__waker_t *w = &m->wakers[(slot >> 4) % WL__WAKERS];
  wchar_t name[WL__WIN_NAME_MAX];
  HANDLE h;

  if (w->event != NULL && w->wake == wake && SetEvent(w->event))
    return;
  if (wake == 0)
    return;
  wl__win_name(name, "wake", wake);
  h = OpenEventW(EVENT_MODIFY_STATE, FALSE, name);
  if (h == NULL)
    return;
  SetEvent(h);
  if (w->event != NULL)
    CloseHandle(w->event);
  w->wake = wake;
  w->event = h;
}

void wl__os_wakers_close(wl_manager_t *m) {
  size_t i;

  for (i = 0; i < WL__WAKERS; i++) {
    if (m->wakers[i].event != NULL)
      CloseHandle(m->wakers[i].event);
    m->wakers[i].event = NULL;
  }
}

/* Nothing outlives its agent's process: no orphans. */
unsigned wl__os_wake_orphans(const wl_manager_t *m, uint64_t *wake,
                             unsigned max) {
  (void)m;
  (void)wake;
  (void)max;
  return 0;
}

void wl__os_wake_reap(wl_manager_t *m, const uint64_t *wake, unsigned n) {
  (void)m;
  (void)wake;
  (void)n;
}

wl_wait_t wl_agent_wake_fd(const wl_agent_t *agent) {
  return agent->wake_fd;
}

/* A wait that returned has reset the event already; one that only looked
 * (a wait of 0 ms elsewhere) has too. Resetting covers a caller that
 * learnt of it otherwise: mail that comes after this sets it again. */
void wl_agent_woken(const wl_agent_t *agent) { ResetEvent(agent->wake_fd); }
