/* Agent teardown racing with other threads: several threads each run a
 * stream of short-lived agents. An agent makes requests (some granted, some
 * waiting behind other threads' agents, some stolen, some ifAvailable),
 * maybe takes part of its mail, and is closed while the other threads'
 * releases, steals and closes keep granting to it; its memory (the agent
 * and its requests) is freed the moment wl_agent_close() returns and is
 * reused at once. If the core touched a closed agent or its requests
 * afterwards (a late grant, a notify, a mail link), ASan reports a
 * use-after-free and TSan a race; the notify callback also checks that it
 * never runs for a closed agent. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "test.h"

#define THREADS 4
#define REQS 6
#define RUN_NS 700000000LL

enum { OPEN = 0x600d, CLOSED = 0xdead };

typedef struct {
  wl_agent_t agent;
  atomic_int state;
  unsigned notified; /* under the manager's mutex */
  wl_request_t reqs[REQS];
} tagent_heap_t;

static const uint16_t names[3][3] = {{'t', 'r', 0}, {'t', 'r', 1}, {0xDC00, 'r', 2}};
static atomic_long agents_run, grants_taken;

static uint32_t rnd(uint32_t *s, uint32_t n) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s % n;
}

static long long now_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Called with the manager's mutex held, from any thread. */
static void notify(wl_agent_t *agent) {
  tagent_heap_t *a = agent->data;

  ASSERT_EQ(OPEN, atomic_load(&a->state));
  a->notified++;
}

static void take_some_mail(tagent_heap_t *a, uint32_t *seed) {
  wl_request_t *req;
  unsigned events;
  long n = 0;

  /* Pop only part of it: the rest is still undelivered when the agent
   * closes. */
  while (rnd(seed, 4) != 0 && (req = wl_agent_next(&a->agent, &events)) != NULL) {
    ASSERT(req >= a->reqs && req < a->reqs + REQS);
    ASSERT(events != 0);
    n++;
  }
  atomic_fetch_add(&grants_taken, n);
}

static void *run(void *arg) {
  uint32_t seed = 0x2545F491u * (uint32_t)((intptr_t)arg + 1);
  long long deadline = now_ns() + RUN_NS;
  char id[8] = {'r', (char)('0' + (int)(intptr_t)arg), 0};

  while (now_ns() < deadline) {
    tagent_heap_t *a = malloc(sizeof(*a));
    int i;

    ASSERT(a != NULL);
    atomic_init(&a->state, OPEN);
    a->notified = 0;
    a->agent.data = a;
    ASSERT_EQ(0, wl_agent_init(wl_process(), &a->agent, id, 2, notify));
    for (i = 0; i < REQS; i++) {
      static const unsigned flags[] = {0, 0, 0, 0, WL_IF_AVAILABLE, WL_STEAL};
      unsigned f = flags[rnd(&seed, 6)];
      wl_mode_t mode = f == WL_STEAL || rnd(&seed, 2) ? WL_EXCLUSIVE : WL_SHARED;
      ASSERT_EQ(0, wl_request(&a->agent, &a->reqs[i], names[rnd(&seed, 3)], 3,
                              mode, f) < 0);
      if (rnd(&seed, 3) == 0)
        take_some_mail(a, &seed);
      if (rnd(&seed, 4) == 0) {
        /* Let one go (held, queued, stolen or done: any state). */
        wl_release(&a->reqs[rnd(&seed, i + 1)]);
      }
    }
    if (rnd(&seed, 2))
      take_some_mail(a, &seed);
    /* Close while the others keep granting to our waiting requests. */
    wl_agent_close(&a->agent);
    atomic_store(&a->state, CLOSED);
    free(a); /* any later touch by the core is a use-after-free */
    atomic_fetch_add(&agents_run, 1);
  }
  return NULL;
}

static void test_teardown_race(void) {
  pthread_t threads[THREADS];
  intptr_t i;

  for (i = 0; i < THREADS; i++)
    ASSERT_EQ(0, pthread_create(&threads[i], NULL, run, (void *)i));
  for (i = 0; i < THREADS; i++)
    ASSERT_EQ(0, pthread_join(threads[i], NULL));
  ASSERT(atomic_load(&agents_run) > 100);
  ASSERT(atomic_load(&grants_taken) > 0);
}

int main(void) {
  RUN(test_teardown_race);
  return 0;
}
