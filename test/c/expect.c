/* What test.h's cases share on every platform: failing, running a case,
 * agents whose notify callback counts, and checking mail and snapshots.
 * The processes, files and fault points are each platform's harness's
 * (harness.c on Linux and macOS, harness-win.c on Windows). */
#include <stdlib.h>

#include "test.h"

#define MAIL_MAX 64

_Noreturn void test_fail(const char *file, int line, const char *expr) {
  fflush(stdout);
  fprintf(stderr, "%s:%d: assertion failed: %s\n", file, line, expr);
  _Exit(1);
}

_Noreturn void test_fail_eq(const char *file, int line, const char *want,
                            const char *got, long long wantv, long long gotv) {
  fflush(stdout);
  fprintf(stderr, "%s:%d: assertion failed: %s == %s (%lld != %lld)\n", file,
          line, want, got, wantv, gotv);
  _Exit(1);
}

void run_test(const char *file, const char *name, void (*fn)(void)) {
  size_t left;

  fn();
  left = wl__name_count(wl_process());
  if (left != 0) {
    fprintf(stderr, "%s: %s left %zu names in the manager\n", file, name, left);
    _Exit(1);
  }
  printf("ok %s %s\n", file, name);
  fflush(stdout);
}

static void count_notify(wl_agent_t *agent) {
  ((tagent_t *)agent->data)->notified++;
}

void tagent_init(tagent_t *t, const char *client_id, size_t client_id_len) {
  t->notified = 0;
  t->agent.data = t;
  ASSERT_EQ(0,
            wl_agent_init(wl_process(), &t->agent, client_id,
                          client_id_len, count_notify));
}

void tagent_close(tagent_t *t) { wl_agent_close(&t->agent); }

size_t drain(tagent_t *t, tmail_t *out, size_t max) {
  wl_request_t *req;
  unsigned events;
  size_t n = 0;

  while ((req = wl_agent_next(&t->agent, &events)) != NULL) {
    if (n < max) {
      out[n].req = req;
      out[n].events = events;
    }
    n++;
  }
  return n;
}

static void print_mail(const char *what, const tmail_t *mail, size_t n) {
  size_t i;

  fprintf(stderr, "  %s (%zu):", what, n);
  for (i = 0; i < n && i < MAIL_MAX; i++)
    fprintf(stderr, " {%p, %u}", (void *)mail[i].req, mail[i].events);
  fprintf(stderr, "\n");
}

void expect_mail_at(const char *file, int line, tagent_t *t,
                    const tmail_t *want, size_t nwant) {
  tmail_t got[MAIL_MAX];
  size_t ngot = drain(t, got, MAIL_MAX), i;
  int same = ngot == nwant;

  for (i = 0; same && i < nwant; i++)
    same = got[i].req == want[i].req && got[i].events == want[i].events;
  if (same)
    return;
  fflush(stdout);
  fprintf(stderr, "%s:%d: unexpected mail\n", file, line);
  print_mail("want", want, nwant);
  print_mail("got", got, ngot);
  _Exit(1);
}

static int info_eq(const wl_info_t *got, const tinfo_t *want) {
  return got->name_len == want->name_len &&
         memcmp(got->name, want->name, want->name_len * sizeof(uint16_t)) ==
             0 &&
         got->mode == want->mode && got->client_id_len == want->client_id_len &&
         memcmp(got->client_id, want->client_id, want->client_id_len) == 0;
}

static void print_info(const wl_info_t *info) {
  size_t i;

  fprintf(stderr, "  {name [");
  for (i = 0; i < info->name_len && i < 8; i++)
    fprintf(stderr, " %04x", info->name[i]);
  fprintf(stderr, "%s ] (%zu), mode %d, client id \"%.*s\"}\n",
          info->name_len > 8 ? " ..." : "", info->name_len, (int)info->mode,
          (int)info->client_id_len, info->client_id);
}

/* Whether got matches want, in order or as a multiset. */
static int infos_match(const wl_info_t *got, size_t ngot, const tinfo_t *want,
                       size_t nwant, int ordered) {
  char used[MAIL_MAX] = {0};
  size_t i, j;

  if (ngot != nwant || nwant > MAIL_MAX)
    return 0;
  for (i = 0; i < nwant; i++) {
    if (ordered) {
      if (!info_eq(&got[i], &want[i]))
        return 0;
      continue;
    }
    for (j = 0; j < ngot && (used[j] || !info_eq(&got[j], &want[i])); j++)
      ;
    if (j == ngot)
      return 0;
    used[j] = 1;
  }
  return 1;
}

void expect_infos_at(const char *file, int line, const wl_info_t *got,
                     size_t ngot, const tinfo_t *want, size_t nwant,
                     int ordered) {
  size_t i;

  if (infos_match(got, ngot, want, nwant, ordered))
    return;
  fflush(stdout);
  fprintf(stderr, "%s:%d: snapshot entries differ; got %zu, want %zu:\n", file,
          line, ngot, nwant);
  for (i = 0; i < ngot; i++)
    print_info(&got[i]);
  _Exit(1);
}
