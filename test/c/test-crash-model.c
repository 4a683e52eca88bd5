/* Crash safety against a reference model. A parent drives child processes,
 * each one agent of one machine-wide manager, through random requests, releases,
 * aborts, steals and ifAvailable requests, one operation at a time, and now
 * and then has a child kill itself (SIGKILL) at a random named fault point
 * inside the operation, holding the manager's mutex; it also kills idle
 * children and lets others leave cleanly. After every step it checks, against
 * a model of the spec run in the same order:
 *   - every return value (granted at once, held on release, queued on abort);
 *   - the manager's state (each name's held list in grant order and queue in
 *     order, with client ids), and every list and counter (wl__check);
 *   - every survivor's mailbox: exactly the grants, misses and steals the
 *     model made, and a wake-up (its notify callback or its FIFO) whenever
 *     there are any: no lost wake-up, no spurious event;
 *   - the grants' fencing tokens: increasing in the model's grant order,
 *     across names and processes, and past every token seen before (a
 *     crash may skip some, never give one again);
 *   - mutual exclusion, by the children themselves: each one that is granted
 *     a lock enters it in memory all of them share (not through the
 *     manager) and checks that no holder of another mode, or of an
 *     exclusive lock, is inside; it leaves on release. A steal lets the
 *     thief in while the robbed callback still runs (the spec's behaviour),
 *     so the driver takes the robbed holders out when the steal is made, and
 *     a dead child's entries once it is reaped.
 * An operation cut short by a kill counts as made or not made (either must
 * match); the dead agent then ends as spec 2.6 says. Every survivor's
 * requests complete at the end. Seeded: WL_SEED=<n> replays one run. */
#define _GNU_SOURCE

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#define SIZE (1 << 20)
#define NNAMES 3
#define MAXCHILD 4
#define SPAWNS 40
#define STEPS 1500
#define MAXREQ 4096
#define MAXEV 64

static const char *const points[] = {
    "alloc", "free", "hold", "unhold", "steal", "end", "mail",
    "request-alloc", "request-name", "request-queued", "request-stole"};
#define NPOINTS (sizeof(points) / sizeof(points[0]))

enum { OP_REQUEST, OP_RELEASE, OP_ABORT, OP_DRAIN, OP_CLOSE };

typedef struct {
  int op, req, name, mode, flags;
  int fault, countdown; /* point index or -1; die at its countdown-th hit */
  int expect;           /* OP_DRAIN: mail is due, so a wake-up must come */
} cmd_t;

typedef struct {
  int rc, woken, nev;
  int req[MAXEV];
  unsigned events[MAXEV];
  uint64_t token[MAXEV]; /* a grant's */
} reply_t;

/* ---- the model ---- */

enum { M_NONE, M_QUEUED, M_HELD, M_STOLEN };

typedef struct {
  int agent, name, mode, state;
  long seq, hseq; /* request order; grant order */
  unsigned due;   /* events made and not yet seen by the child */
} mreq_t;

typedef struct {
  mreq_t r[MAXREQ];
  int queue[NNAMES][MAXREQ], nqueue[NNAMES];
  int held[NNAMES][MAXREQ], nheld[NNAMES];
  int nreq;
  long stamp;
} model_t;

static void m_remove(int *list, int *n, int id) {
  int i, j;

  for (i = 0; i < *n && list[i] != id; i++)
    ;
  ASSERT(i < *n);
  for (j = i + 1; j < *n; j++)
    list[j - 1] = list[j];
  --*n;
}

static int m_grantable(const model_t *md, int name, int mode) {
  int i;

  if (mode == WL_EXCLUSIVE)
    return md->nheld[name] == 0;
  for (i = 0; i < md->nheld[name]; i++) {
    if (md->r[md->held[name][i]].mode == WL_EXCLUSIVE)
      return 0;
  }
  return 1;
}

static void m_hold(model_t *md, int id) {
  mreq_t *r = &md->r[id];

  r->state = M_HELD;
  r->hseq = ++md->stamp;
  r->due |= WL_EV_GRANTED;
  md->held[r->name][md->nheld[r->name]++] = id;
}

static void m_process(model_t *md, int name) {
  while (md->nqueue[name] > 0 &&
         m_grantable(md, name, md->r[md->queue[name][0]].mode)) {
    int id = md->queue[name][0];
    m_remove(md->queue[name], &md->nqueue[name], id);
    m_hold(md, id);
  }
}

/* Returns what wl_request() returns; *id is the new request, or -1. */
static int m_request(model_t *md, int agent, int name, int mode, int flags,
                     int *id) {
  mreq_t *r = &md->r[md->nreq];
  int i;

  *id = md->nreq++;
  ASSERT(md->nreq < MAXREQ);
  memset(r, 0, sizeof(*r));
  r->agent = agent;
  r->name = name;
  r->mode = mode;
  r->seq = ++md->stamp;
  if ((flags & WL_IF_AVAILABLE) &&
      !(md->nqueue[name] == 0 && m_grantable(md, name, mode))) {
    r->due = WL_EV_UNAVAILABLE; /* freed once delivered */
    return 0;
  }
  r->state = M_QUEUED;
  if (flags & WL_STEAL) {
    for (i = 0; i < md->nheld[name]; i++) {
      md->r[md->held[name][i]].state = M_STOLEN;
      md->r[md->held[name][i]].due |= WL_EV_STOLEN;
    }
    md->nheld[name] = 0;
    memmove(&md->queue[name][1], &md->queue[name][0],
            md->nqueue[name] * sizeof(int));
    md->queue[name][0] = *id;
    md->nqueue[name]++;
  } else {
    md->queue[name][md->nqueue[name]++] = *id;
  }
  m_process(md, name);
  return r->state == M_HELD ? WL_GRANTED_AT_ONCE : 0;
}

/* Ends a queued or held request as release and abort do. */
static void m_end(model_t *md, int id) {
  mreq_t *r = &md->r[id];

  if (r->state == M_HELD)
    m_remove(md->held[r->name], &md->nheld[r->name], id);
  else if (r->state == M_QUEUED)
    m_remove(md->queue[r->name], &md->nqueue[r->name], id);
  if (r->state == M_HELD || r->state == M_QUEUED)
    m_process(md, r->name);
  r->state = M_NONE;
  r->due = 0;
}

static int m_release(model_t *md, int id) {
  int held = md->r[id].state == M_HELD;

  m_end(md, id);
  return held;
}

static int m_abort(model_t *md, int id) {
  if (md->r[id].state != M_QUEUED)
    return 0;
  m_end(md, id);
  return 1;
}

/* The agent's earliest request in `state` by `key`, or -1. */
static int m_first(const model_t *md, int agent, int state, int by_grant) {
  int i, best = -1;

  for (i = 0; i < md->nreq; i++) {
    const mreq_t *r = &md->r[i];
    if (r->agent != agent || r->state != state)
      continue;
    if (best < 0 || (by_grant ? r->hseq < md->r[best].hseq
                              : r->seq < md->r[best].seq))
      best = i;
  }
  return best;
}

/* Spec 2.6: queued requests in request order, then held locks in grant
 * order (grants made to it on the way out included). */
static void m_close(model_t *md, int agent) {
  int i, id;

  while ((id = m_first(md, agent, M_QUEUED, 0)) >= 0)
    m_end(md, id);
  while ((id = m_first(md, agent, M_HELD, 1)) >= 0)
    m_end(md, id);
  for (i = 0; i < md->nreq; i++) {
    if (md->r[i].agent == agent) {
      md->r[i].state = M_NONE;
      md->r[i].due = 0;
    }
  }
}

/* ---- the children ---- */

typedef struct {
  pid_t pid;
  int sock, agent, alive;
} child_t;

static char path[128];
/* Armed by the child's main thread for one operation; its sweeper thread,
 * which may sweep meanwhile, never sees them. */
static _Thread_local const char *kill_point;
static _Thread_local int kill_countdown;

static void countdown_kill(const char *point) {
  if (kill_point != NULL && strcmp(point, kill_point) == 0 &&
      --kill_countdown == 0)
    raise(SIGKILL);
}

/* Holders inside each name, by agent and mode: shared by the children. */
static int (*inside)[SPAWNS][2];

/* The child `me` enters or leaves (delta -1) a lock on name. */
static void cross(int me, int name, int mode, int delta) {
  int a;

  if (delta > 0) {
    for (a = 0; a < SPAWNS; a++) {
      if (inside[name][a][WL_EXCLUSIVE] != 0 ||
          (mode == WL_EXCLUSIVE && inside[name][a][WL_SHARED] != 0)) {
        fprintf(stderr, "c%d granted %s on name %d while c%d holds it\n", me,
                mode == WL_EXCLUSIVE ? "exclusive" : "shared", name, a);
        ASSERT(0);
      }
    }
  }
  inside[name][me][mode] += delta;
}

/* Its agent's notify callback ran: on its own thread, or on the sweeper's
 * when a sweep grants it a lock. */
static unsigned notified;
static void child_notify(wl_agent_t *agent) {
  (void)agent;
  __atomic_store_n(&notified, 1, __ATOMIC_SEQ_CST);
}

static const uint16_t *name_units(int name) {
  static const uint16_t units[NNAMES] = {'a', 'b', 'c'};
  return &units[name];
}

/* Waits until the agent's thread would be woken: its notify callback ran or
 * its FIFO is readable. */
static int child_woken(wl_agent_t *agent, int wait) {
  struct pollfd p = {wl_agent_wake_fd(agent), POLLIN, 0};

  return __atomic_load_n(&notified, __ATOMIC_SEQ_CST) != 0 ||
         poll(&p, 1, wait ? 5000 : 0) == 1;
}

/* What a child knows of its requests: name, mode, and whether it is inside. */
typedef struct {
  int name, mode, in;
} mine_t;

static void child_drain(wl_agent_t *agent, int me, wl_request_t *reqs,
                        mine_t *mine, int expect, reply_t *out) {
  wl_request_t *req;
  unsigned events;

  out->woken = child_woken(agent, expect);
  wl_agent_woken(agent);
  __atomic_store_n(&notified, 0, __ATOMIC_SEQ_CST);
  while ((req = wl_agent_next(agent, &events)) != NULL) {
    mine_t *r = &mine[req - reqs];
    ASSERT(out->nev < MAXEV);
    out->req[out->nev] = (int)(req - reqs);
    out->token[out->nev] = wl_request_token(req);
    out->events[out->nev++] = events;
    if (events & WL_EV_GRANTED) {
      cross(me, r->name, r->mode, 1);
      r->in = 1;
    }
    if (events & WL_EV_STOLEN)
      r->in = 0; /* taken out by the driver already */
  }
}

static _Noreturn void child_main(int sock, int agent_no) {
  static wl_request_t reqs[MAXREQ];
  static mine_t mine[MAXREQ];
  wl_manager_t *m;
  wl_agent_t agent;
  char id[16];
  cmd_t c;
  reply_t out;

  /* Before the scope's threads start: they pass fault points too (their
   * kill_point is NULL). */
  wl__fault_hook = countdown_kill;
  m = tscope_open(path, SIZE);
  snprintf(id, sizeof(id), "c%d", agent_no);
  ASSERT_EQ(0, wl_agent_init(m, &agent, id, strlen(id), child_notify));
  memset(&out, 0, sizeof(out));
  ASSERT_EQ(sizeof(out), write(sock, &out, sizeof(out))); /* ready */
  while (read(sock, &c, sizeof(c)) == (ssize_t)sizeof(c)) {
    memset(&out, 0, sizeof(out));
    kill_point = c.fault >= 0 ? points[c.fault] : NULL;
    kill_countdown = c.countdown;
    if (c.op == OP_REQUEST) {
      mine[c.req] = (mine_t){c.name, c.mode, 0};
      out.rc = wl_request(&agent, &reqs[c.req], name_units(c.name), 1,
                          (wl_mode_t)c.mode, (unsigned)c.flags);
    } else if (c.op == OP_RELEASE) {
      /* Out before the release makes the lock another's. */
      if (mine[c.req].in)
        cross(agent_no, mine[c.req].name, mine[c.req].mode, -1);
      mine[c.req].in = 0;
      out.rc = wl_release(&reqs[c.req]);
    } else if (c.op == OP_ABORT) {
      out.rc = wl_abort(&reqs[c.req]);
    } else if (c.op == OP_DRAIN) {
      child_drain(&agent, agent_no, reqs, mine, c.expect, &out);
    }
    kill_point = NULL;
    if (c.op == OP_CLOSE) {
      wl_agent_close(&agent);
      wl_scope_close(m);
      _exit(0);
    }
    ASSERT_EQ(sizeof(out), write(sock, &out, sizeof(out)));
  }
  _exit(0);
}

/* ---- the driver ---- */

static model_t md, alt;
static child_t kids[SPAWNS];
static int nkids;
static unsigned long long rng;
static int made, unmade, killed_idle; /* how the kills fell */

static unsigned rnd(unsigned n) {
  rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
  return (unsigned)(rng >> 33) % n;
}

/* Starts a child and waits until its agent is registered. */
static int inside_fd; /* a memfd, mapped by the children too */

/* A child is this program again (fork and exec): a process with threads
 * (the watcher's) forks cleanly only into exec, under TSan too. */
static void spawn(void) {
  int sv[2];
  child_t *k = &kids[nkids];
  reply_t ready;
  char sock[16], agent[16], mem[16];

  ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));
  k->agent = nkids++;
  k->pid = fork();
  ASSERT(k->pid >= 0);
  if (k->pid == 0) {
    close(sv[0]);
    snprintf(sock, sizeof(sock), "%d", sv[1]);
    snprintf(agent, sizeof(agent), "%d", k->agent);
    snprintf(mem, sizeof(mem), "%d", inside_fd);
    execl("/proc/self/exe", "test-crash-model", "--child", sock, agent, mem,
          path, (char *)NULL);
    _exit(127);
  }
  close(sv[1]);
  k->sock = sv[0];
  k->alive = 1;
  ASSERT_EQ(sizeof(ready), read(k->sock, &ready, sizeof(ready)));
}

/* Sends a command; returns 0 with the reply, or -1 if the child died. */
static int call(child_t *k, const cmd_t *c, reply_t *out) {
  ASSERT_EQ(sizeof(*c), write(k->sock, c, sizeof(*c)));
  return read(k->sock, out, sizeof(*out)) == (ssize_t)sizeof(*out) ? 0 : -1;
}

static void reap(child_t *k, int killed) {
  int status, name;

  ASSERT_EQ(k->pid, waitpid(k->pid, &status, 0));
  if (killed)
    ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  else
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(k->sock);
  k->alive = 0;
  for (name = 0; name < NNAMES; name++)
    inside[name][k->agent][WL_EXCLUSIVE] = inside[name][k->agent][WL_SHARED] = 0;
}

/* Whether the entries of `name` among infos are the model's list ids[0..n),
 * in order, with their modes and client ids; counts them into *seen. */
static int same_entries(const wl_info_t *infos, size_t ninfos, int name,
                        const int *ids, int n, const model_t *mm,
                        size_t *seen) {
  int at = 0, ok = 1;
  size_t k;

  for (k = 0; k < ninfos; k++) {
    const wl_info_t *e = &infos[k];
    char id[16];
    if (e->name[0] != *name_units(name))
      continue;
    ++*seen;
    if (at >= n) {
      ok = 0;
      continue;
    }
    snprintf(id, sizeof(id), "c%d", mm->r[ids[at]].agent);
    ok = ok && (int)e->mode == mm->r[ids[at]].mode &&
         e->client_id_len == strlen(id) &&
         memcmp(e->client_id, id, e->client_id_len) == 0;
    at++;
  }
  return ok && at == n;
}

/* Whether the manager's state is the model's: per name, held locks in
 * grant order and the queue in order, with their modes and client ids. */
static int same_state(wl_manager_t *m, const model_t *mm, int verbose) {
  wl_snapshot_t snap;
  int name, ok = 1;
  size_t h = 0, p = 0;

  ASSERT_EQ(0, wl_snapshot(m, &snap));
  for (name = 0; name < NNAMES; name++) {
    ok = same_entries(snap.held, snap.nheld, name, mm->held[name],
                      mm->nheld[name], mm, &h) && ok;
    ok = same_entries(snap.pending, snap.npending, name, mm->queue[name],
                      mm->nqueue[name], mm, &p) && ok;
  }
  /* And no entry of another name. */
  ok = ok && h == snap.nheld && p == snap.npending;
  if (!ok && verbose) {
    fprintf(stderr, "state differs from the model:\n");
    for (name = 0; name < NNAMES; name++)
      fprintf(stderr, "  model name %d: %d held, %d queued\n", name,
              mm->nheld[name], mm->nqueue[name]);
    fprintf(stderr, "  manager: %zu held, %zu pending\n", snap.nheld,
            snap.npending);
  }
  wl_snapshot_free(&snap);
  return ok;
}

/* The grants one check_mail() saw, and the greatest token seen before. */
typedef struct {
  int req;
  uint64_t token;
} seen_t;
static seen_t seen[MAXCHILD * MAXEV];
static int nseen;
static uint64_t last_token;
/* After a kill that both models fit (the operation made or not, both ending
 * alike), the other one: its grants may have come in another order. */
static model_t other;
static int ambiguous;
static const model_t *order_of;

static int by_grant(const void *a, const void *b) {
  long x = order_of->r[((const seen_t *)a)->req].hseq;
  long y = order_of->r[((const seen_t *)b)->req].hseq;
  return x < y ? -1 : x > y;
}

/* Whether the tokens seen increase in mm's grant order, from past the last
 * one seen before. */
static int tokens_in_order(const model_t *mm) {
  uint64_t prev = last_token;
  int i;

  order_of = mm;
  qsort(seen, (size_t)nseen, sizeof(seen[0]), by_grant);
  for (i = 0; i < nseen; i++) {
    if (seen[i].token <= prev)
      return 0;
    prev = seen[i].token;
  }
  return 1;
}

/* Every grant made since the last check is delivered in this one (the
 * children drain everything). */
static void check_tokens(void) {
  int i;

  if (!tokens_in_order(&md) && !(ambiguous && tokens_in_order(&other))) {
    tokens_in_order(&md);
    fprintf(stderr, "tokens out of grant order, after token %llu:",
            (unsigned long long)last_token);
    for (i = 0; i < nseen; i++)
      fprintf(stderr, " %llu", (unsigned long long)seen[i].token);
    fprintf(stderr, "\n");
    ASSERT(0);
  }
  for (i = 0; i < nseen; i++)
    last_token = seen[i].token > last_token ? seen[i].token : last_token;
  nseen = 0;
  ambiguous = 0;
}

/* Every live child drains its mailbox: exactly the events the model made,
 * woken whenever there are any. */
static void check_mail(void) {
  int i, j, id;

  for (i = 0; i < nkids; i++) {
    child_t *k = &kids[i];
    cmd_t c = {OP_DRAIN, 0, 0, 0, 0, -1, 0, 0};
    reply_t out;
    if (!k->alive)
      continue;
    for (id = 0; id < md.nreq; id++)
      c.expect |= md.r[id].agent == k->agent && md.r[id].due != 0;
    ASSERT_EQ(0, call(k, &c, &out));
    if (c.expect && !out.woken)
      fprintf(stderr, "child c%d has mail but was not woken\n", k->agent);
    ASSERT(out.woken || !c.expect);
    for (j = 0; j < out.nev; j++) {
      mreq_t *r = &md.r[out.req[j]];
      if (r->agent != k->agent || r->due != out.events[j])
        fprintf(stderr, "c%d: request %d got events %u, the model %u\n",
                k->agent, out.req[j], out.events[j], r->due);
      ASSERT(r->agent == k->agent && r->due == out.events[j]);
      r->due = 0;
      if (out.events[j] & WL_EV_GRANTED) {
        ASSERT(nseen < MAXCHILD * MAXEV);
        seen[nseen++] = (seen_t){out.req[j], out.token[j]};
      }
    }
    for (id = 0; id < md.nreq; id++) {
      if (md.r[id].agent == k->agent && md.r[id].due != 0)
        fprintf(stderr, "c%d: request %d never got events %u\n", k->agent, id,
                md.r[id].due);
      ASSERT(md.r[id].agent != k->agent || md.r[id].due == 0);
    }
  }
  check_tokens();
}

/* A random live request of the child in one of the states, or -1. */
static int pick(int agent, int s1, int s2, int s3) {
  int ids[MAXREQ], n = 0, i;

  for (i = 0; i < md.nreq; i++) {
    int s = md.r[i].state;
    if (md.r[i].agent == agent && s != M_NONE && (s == s1 || s == s2 || s == s3))
      ids[n++] = i;
  }
  return n == 0 ? -1 : ids[rnd((unsigned)n)];
}

/* Takes out the holders that the operation from `before` to `after` robbed,
 * as the steal itself does. */
static void take_out_robbed(const model_t *before, const model_t *after) {
  int i;

  for (i = 0; i < before->nreq; i++) {
    const mreq_t *r = &before->r[i];
    if (r->state == M_HELD && after->r[i].state == M_STOLEN &&
        kids[r->agent].alive)
      inside[r->name][r->agent][r->mode]--;
  }
}

/* One operation by child k, maybe cut short at a fault point. */
static void step_op(wl_manager_t *m, child_t *k) {
  cmd_t c = {OP_REQUEST, 0, 0, 0, 0, -1, 0, 0};
  reply_t out;
  int kind = (int)rnd(10), want = 0, id = -1;

  alt = md;
  if (kind < 6) {
    c.name = (int)rnd(NNAMES);
    c.mode = (int)rnd(2);
    c.flags = rnd(6) == 0 ? WL_IF_AVAILABLE : 0;
    if (c.mode == WL_EXCLUSIVE && c.flags == 0 && rnd(8) == 0)
      c.flags = WL_STEAL;
    want = m_request(&alt, k->agent, c.name, c.mode, c.flags, &id);
    c.req = id;
  } else if ((id = pick(k->agent, M_QUEUED, M_HELD, M_STOLEN)) >= 0) {
    c.op = kind < 9 ? OP_RELEASE : OP_ABORT;
    c.req = id;
    want = c.op == OP_RELEASE ? m_release(&alt, id) : m_abort(&alt, id);
  } else {
    return;
  }
  if (rnd(5) == 0) {
    c.fault = (int)rnd(NPOINTS);
    c.countdown = 1 + (int)rnd(2);
  }
  if (call(k, &c, &out) == 0) {
    ASSERT_EQ(want, out.rc);
    take_out_robbed(&md, &alt);
    md = alt;
    return;
  }
  /* Killed inside the operation: made or not, then its agent ended. */
  reap(k, 1);
  ASSERT_EQ(0, wl_sweep(m));
  m_close(&md, k->agent);
  m_close(&alt, k->agent);
  if (same_state(m, &alt, 0)) {
    ambiguous = same_state(m, &md, 0);
    if (ambiguous)
      other = md;
    take_out_robbed(&md, &alt);
    md = alt;
    made++;
  } else {
    ASSERT(same_state(m, &md, 1));
    unmade++;
  }
}

static void run(unsigned long long seed) {
  wl_manager_t *m;
  int step, i, spawned = 0, live;

  rng = seed;
  made = unmade = killed_idle = 0;
  last_token = 0;
  memset(&md, 0, sizeof(md));
  inside_fd = memfd_create("inside", 0);
  ASSERT(inside_fd >= 0);
  ASSERT_EQ(0, ftruncate(inside_fd, sizeof(int[NNAMES][SPAWNS][2])));
  inside = mmap(NULL, sizeof(int[NNAMES][SPAWNS][2]), PROT_READ | PROT_WRITE,
                MAP_SHARED, inside_fd, 0);
  ASSERT(inside != MAP_FAILED);
  nkids = 0;
  tshm_path(path, sizeof(path), "crash-model");
  m = tscope_open(path, SIZE);
  for (step = 0; step < STEPS; step++) {
    child_t *k;
    for (live = 0, i = 0; i < nkids; i++)
      live += kids[i].alive;
    while (live < MAXCHILD && spawned < SPAWNS) {
      spawn();
      spawned++;
      live++;
    }
    if (live == 0)
      break;
    do
      k = &kids[rnd((unsigned)nkids)];
    while (!k->alive);
    if (rnd(40) == 0) { /* killed between operations */
      kill(k->pid, SIGKILL);
      reap(k, 1);
      ASSERT_EQ(0, wl_sweep(m));
      m_close(&md, k->agent);
      killed_idle++;
    } else if (rnd(60) == 0) { /* leaves cleanly */
      cmd_t c = {OP_CLOSE, 0, 0, 0, 0, -1, 0, 0};
      ASSERT_EQ(sizeof(c), write(k->sock, &c, sizeof(c)));
      reap(k, 0);
      m_close(&md, k->agent);
    } else {
      step_op(m, k);
    }
    ASSERT(same_state(m, &md, 1));
    ASSERT_EQ(0, wl__check(m));
    check_mail();
  }
  /* Every survivor's requests complete: release all, in any order. */
  for (i = 0; i < nkids; i++) {
    int id;
    if (!kids[i].alive)
      continue;
    while ((id = pick(kids[i].agent, M_QUEUED, M_HELD, M_STOLEN)) >= 0) {
      cmd_t c = {OP_RELEASE, id, 0, 0, 0, -1, 0, 0};
      reply_t out;
      ASSERT_EQ(0, call(&kids[i], &c, &out));
      ASSERT_EQ(m_release(&md, id), out.rc);
      check_mail();
    }
    ASSERT(same_state(m, &md, 1));
  }
  for (i = 0; i < nkids; i++) {
    if (kids[i].alive) {
      cmd_t c = {OP_CLOSE, 0, 0, 0, 0, -1, 0, 0};
      ASSERT_EQ(sizeof(c), write(kids[i].sock, &c, sizeof(c)));
      reap(&kids[i], 0);
    }
  }
  ASSERT(same_state(m, &md, 1));
  ASSERT_EQ(0, wl__check(m));
  wl_scope_close(m);
  unlink(path);
  munmap(inside, sizeof(int[NNAMES][SPAWNS][2]));
  close(inside_fd);
  printf("  seed %llu: %d steps, %d processes; killed inside an operation "
         "%d times (made %d, not made %d), between operations %d times; "
         "last token %llu\n",
         seed, step, spawned, made + unmade, made, unmade, killed_idle,
         (unsigned long long)last_token);
}

static void test_random_crashes_match_the_model(void) {
  const char *env = getenv("WL_SEED");
  unsigned long long seed;

  if (env != NULL) {
    run(strtoull(env, NULL, 10));
    return;
  }
  for (seed = 1; seed <= 10; seed++)
    run(seed);
}

int main(int argc, char **argv) {
  if (argc == 6 && strcmp(argv[1], "--child") == 0) {
    snprintf(path, sizeof(path), "%s", argv[5]);
    inside = mmap(NULL, sizeof(int[NNAMES][SPAWNS][2]), PROT_READ | PROT_WRITE,
                  MAP_SHARED, atoi(argv[4]), 0);
    ASSERT(inside != MAP_FAILED);
    child_main(atoi(argv[2]), atoi(argv[3]));
  }
  RUN(test_random_crashes_match_the_model);
  return 0;
}
