/* The death watch's threads, as both families start them, and its sweeper
 * (os/unix/machine.h). */
#define _GNU_SOURCE      /* pthread_setname_np (glibc) */
#define _DARWIN_C_SOURCE /* pthread_setname_np (macOS) */

#include <signal.h>

#include "machine.h"

int wl__thread_start(pthread_t *thread, void *(*fn)(void *), void *arg) {
  sigset_t all, old;
  int rc;

  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  rc = pthread_create(thread, NULL, fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return -rc;
}

void wl__thread_name(const char *name) {
#ifdef __APPLE__
  pthread_setname_np(name);
#else
  pthread_setname_np(pthread_self(), name);
#endif
}

static void *wl__sweeper_main(void *arg) {
  wl__sweeper_t *s = arg;

  wl__thread_name("wl-sweep");
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->asked && !s->done)
      pthread_cond_wait(&s->cond, &s->mu);
    if (s->done)
      break;
    s->asked = 0;
    pthread_mutex_unlock(&s->mu);
    s->sweep(s->m);
    pthread_mutex_lock(&s->mu);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

int wl__sweeper_start(wl__sweeper_t *s, wl_manager_t *m,
                      int (*sweep)(wl_manager_t *m)) {
  int rc;

  s->m = m;
  s->sweep = sweep;
  s->asked = s->done = s->running = 0;
  if (pthread_mutex_init(&s->mu, NULL) != 0)
    return WL_ENOMEM;
  if (pthread_cond_init(&s->cond, NULL) != 0) {
    pthread_mutex_destroy(&s->mu);
    return WL_ENOMEM;
  }
  if ((rc = wl__thread_start(&s->thread, wl__sweeper_main, s)) != 0) {
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->mu);
    return rc;
  }
  s->running = 1;
  return 0;
}

void wl__sweeper_ask(wl__sweeper_t *s) {
  pthread_mutex_lock(&s->mu);
  s->asked = 1;
  pthread_cond_signal(&s->cond);
  pthread_mutex_unlock(&s->mu);
}

void wl__sweeper_stop(wl__sweeper_t *s) {
  if (!s->running)
    return;
  pthread_mutex_lock(&s->mu);
  s->done = 1;
  pthread_cond_signal(&s->cond);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->thread, NULL);
  s->running = 0;
}

void wl__sweeper_free(wl__sweeper_t *s) {
  wl__sweeper_stop(s);
  pthread_cond_destroy(&s->cond);
  pthread_mutex_destroy(&s->mu);
}
