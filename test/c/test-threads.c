/* Several threads, each with its own agent, hammer a few names with random
 * requests, releases, aborts, steals, ifAvailable requests and agent
 * restarts, each delivering its own mail, while counters check that the
 * holders of each name are always compatible.
 *
 * A holder is counted from the moment its thread takes its GRANTED event
 * until just before it releases. A lock can be stolen before its holder
 * hears of it, so each thief uncounts the holders it robbed. The gate mutex
 * guards the counting and makes a steal plus that uncounting atomic with
 * respect to taking mail plus counting, so the counted holders are always a
 * subset of the real ones. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "test.h"

#define THREADS 4
#define SLOTS 6
#define NAMES 3
#define RUN_NS 1000000000LL /* how long the threads hammer */

/* A slot's state as its thread knows it. */
enum { FREE, WAITING, HELD, STOLEN };

/* A slot's `counted`: NOT_COUNTED, ROBBED once a thief uncounted it, or
 * COUNTED(name, mode) while it counts as a holder. */
enum { NOT_COUNTED = 0, ROBBED = 1 };
#define COUNTED(name, mode) (2 + (name)*2 + (int)(mode))
#define COUNTED_NAME(c) (((c)-2) / 2)
#define COUNTED_MODE(c) (((c)-2) % 2)

typedef struct {
  wl_request_t req;
  int state;
  int name;
  wl_mode_t mode;
  unsigned flags;
  int counted; /* under the gate */
} slot_t;

typedef struct {
  wl_agent_t agent;
  atomic_int has_mail;
  slot_t slots[SLOTS];
  uint32_t rng;
  char client_id[4];
} worker_t;

static worker_t workers[THREADS];
static pthread_barrier_t barrier;
static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static int nexclusive[NAMES], nshared[NAMES]; /* under the gate */
static const uint16_t names[NAMES][2] = {{'n', 0}, {'n', 1}, {0xD800, 2}};

static uint32_t rnd(worker_t *w, uint32_t n) {
  w->rng ^= w->rng << 13;
  w->rng ^= w->rng >> 17;
  w->rng ^= w->rng << 5;
  return w->rng % n;
}

static long long now_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void set_mail_flag(wl_agent_t *agent) {
  atomic_store(&((worker_t *)agent->data)->has_mail, 1);
}

static void agent_start(worker_t *w) {
  w->agent.data = w;
  ASSERT_EQ(0, wl_agent_init(wl_process(), &w->agent, w->client_id, strlen(w->client_id),
                             set_mail_flag));
}

/* The counting, all under the gate. */
static void count(int counted, int delta) {
  if (COUNTED_MODE(counted) == WL_EXCLUSIVE)
    nexclusive[COUNTED_NAME(counted)] += delta;
  else
    nshared[COUNTED_NAME(counted)] += delta;
}

/* A new holder must be compatible with the counted ones. */
static void start_counting(slot_t *s) {
  ASSERT_EQ(0, nexclusive[s->name]);
  if (s->mode == WL_EXCLUSIVE)
    ASSERT_EQ(0, nshared[s->name]);
  s->counted = COUNTED(s->name, s->mode);
  count(s->counted, 1);
}

/* Stops counting the slot; returns what it was. */
static int stop_counting(slot_t *s) {
  int counted = s->counted;

  if (counted > ROBBED)
    count(counted, -1);
  s->counted = NOT_COUNTED;
  return counted;
}

/* Right after a steal of `name`: every counted holder of it was robbed. */
static void uncount_robbed(int name) {
  int t, i;

  for (t = 0; t < THREADS; t++) {
    for (i = 0; i < SLOTS; i++) {
      slot_t *s = &workers[t].slots[i];
      if (s->counted > ROBBED && COUNTED_NAME(s->counted) == name) {
        count(s->counted, -1);
        s->counted = ROBBED;
      }
    }
  }
}

static void on_event(slot_t *s, unsigned events) {
  ASSERT(events != 0 && (events & ~7u) == 0);
  if (events & WL_EV_UNAVAILABLE) {
    ASSERT_EQ(WL_EV_UNAVAILABLE, events);
    ASSERT(s->state == WAITING && (s->flags & WL_IF_AVAILABLE));
    s->state = FREE;
  } else if (events & WL_EV_GRANTED) {
    ASSERT_EQ(WAITING, s->state);
    s->state = events & WL_EV_STOLEN ? STOLEN : HELD;
    if (s->state == HELD)
      start_counting(s);
  } else {
    /* A steal of a lock whose grant was taken: its thief uncounted it. */
    ASSERT_EQ(HELD, s->state);
    ASSERT_EQ(ROBBED, s->counted);
    s->state = STOLEN;
  }
}

static void deliver(worker_t *w) {
  wl_request_t *req;
  unsigned events;

  pthread_mutex_lock(&gate);
  while ((req = wl_agent_next(&w->agent, &events)) != NULL)
    on_event(req->data, events);
  pthread_mutex_unlock(&gate);
}

static void poll_mail(worker_t *w) {
  if (atomic_exchange(&w->has_mail, 0))
    deliver(w);
}

static slot_t *pick(worker_t *w, int state_mask) {
  slot_t *s = &w->slots[rnd(w, SLOTS)];

  return (1 << s->state) & state_mask ? s : NULL;
}

static void do_request(worker_t *w, slot_t *s) {
  static const unsigned flags[] = {
      0, 0, 0, 0, 0, 0, WL_IF_AVAILABLE, WL_IF_AVAILABLE, WL_STEAL};
  s->name = (int)rnd(w, NAMES);
  s->flags = flags[rnd(w, sizeof(flags) / sizeof(flags[0]))];
  s->mode = s->flags == WL_STEAL || rnd(w, 2) ? WL_EXCLUSIVE : WL_SHARED;
  s->state = WAITING;
  if (s->flags != WL_STEAL) {
    ASSERT(wl_request(&w->agent, &s->req, names[s->name], 2, s->mode,
                      s->flags) >= 0);
    return;
  }
  pthread_mutex_lock(&gate);
  ASSERT(wl_request(&w->agent, &s->req, names[s->name], 2, s->mode, s->flags) >=
         0);
  uncount_robbed(s->name);
  pthread_mutex_unlock(&gate);
}

/* Under the gate no steal can intervene, so a counted holder must still
 * hold its lock; outside it, only a robbed one is sure not to. */
static void do_release(slot_t *s, int gated) {
  int counted, held;

  pthread_mutex_lock(&gate);
  counted = stop_counting(s);
  if (!gated)
    pthread_mutex_unlock(&gate);
  held = wl_release(&s->req);
  if (gated)
    pthread_mutex_unlock(&gate);
  if (counted == ROBBED || s->state == STOLEN)
    ASSERT_EQ(0, held);
  if (gated && counted > ROBBED)
    ASSERT_EQ(1, held);
  s->state = FREE;
}

static void do_abort(slot_t *s) {
  if (wl_abort(&s->req))
    s->state = FREE;
}

static void restart_agent(worker_t *w) {
  int i;

  pthread_mutex_lock(&gate);
  for (i = 0; i < SLOTS; i++) {
    stop_counting(&w->slots[i]);
    w->slots[i].state = FREE;
  }
  pthread_mutex_unlock(&gate);
  wl_agent_close(&w->agent);
  agent_start(w);
}

static void step(worker_t *w) {
  uint32_t op = rnd(w, 1000);
  slot_t *s;

  if (op < 400 && (s = pick(w, 1 << FREE)) != NULL)
    do_request(w, s);
  else if (op < 750 && (s = pick(w, 1 << WAITING | 1 << HELD | 1 << STOLEN)))
    do_release(s, op & 1);
  else if (op < 995 && (s = pick(w, 1 << WAITING)) != NULL)
    do_abort(s);
  else if (op >= 998)
    restart_agent(w);
  poll_mail(w);
}

static void *run_worker(void *arg) {
  worker_t *w = arg;
  wl_request_t *req;
  unsigned events;
  long long deadline;
  int i;

  pthread_barrier_wait(&barrier);
  deadline = now_ns() + RUN_NS;
  do {
    for (i = 0; i < 256; i++)
      step(w);
  } while (now_ns() < deadline);
  /* Nobody makes events any more: whatever is left was notified. */
  pthread_barrier_wait(&barrier);
  poll_mail(w);
  pthread_barrier_wait(&barrier);
  req = wl_agent_next(&w->agent, &events);
  ASSERT(req == NULL);
  pthread_barrier_wait(&barrier);
  for (i = 0; i < SLOTS; i++) {
    if (w->slots[i].state != FREE)
      do_release(&w->slots[i], 0);
  }
  wl_agent_close(&w->agent);
  return NULL;
}

static void init_worker(worker_t *w, int index) {
  int i;

  w->rng = 0x9E3779B9u * (uint32_t)(index + 1);
  atomic_init(&w->has_mail, 0);
  w->client_id[0] = 'w';
  w->client_id[1] = (char)('0' + index);
  w->client_id[2] = '\0';
  for (i = 0; i < SLOTS; i++) {
    w->slots[i].req.data = &w->slots[i];
    w->slots[i].state = FREE;
    w->slots[i].counted = NOT_COUNTED;
  }
  agent_start(w);
}

static void test_threads(void) {
  pthread_t threads[THREADS];
  int i;

  ASSERT_EQ(0, pthread_barrier_init(&barrier, NULL, THREADS));
  for (i = 0; i < THREADS; i++)
    init_worker(&workers[i], i);
  for (i = 0; i < THREADS; i++)
    ASSERT_EQ(0, pthread_create(&threads[i], NULL, run_worker, &workers[i]));
  for (i = 0; i < THREADS; i++)
    ASSERT_EQ(0, pthread_join(threads[i], NULL));
  pthread_barrier_destroy(&barrier);
  for (i = 0; i < NAMES; i++) {
    ASSERT_EQ(0, nexclusive[i]);
    ASSERT_EQ(0, nshared[i]);
  }
}

int main(void) {
  RUN(test_threads);
  return 0;
}
