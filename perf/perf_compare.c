/* SPDX-License-Identifier: BSD-3-Clause */
/* -a compare: the algorithms side by side. Besides the sc_comm_init_env
 * communicator (which carries the ids, the agreements, the barriers and the
 * reductions of times and check results), one extra communicator per forced
 * algorithm (coll->compare_algos) and one with auto, created with
 * sc_comm_init_rank under algo_env=NAME. Each size is measured on all of them
 * in the same pass: one checked operation each, each one's warm-up, then the
 * timed iterations in rounds that alternate the algorithms.
 *
 * An algorithm that fails is n/a (a # line says why, once per kind of
 * failure). Every rank takes the same path: after every step that can fail,
 * the ranks agree on the outcome over the first communicator. A communicator
 * that recorded the failure is destroyed; after SC_ERR_UNSUPPORTED a fresh
 * one is tried at the next size (a schedule may refuse only some counts)
 * until the same refusal comes twice in a row; after anything else the
 * algorithm stays n/a and the exit status is 3. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/registry.h"
#include "perf/perf_internal.h"

/* The timed iterations of a size are split into rounds of at least
 * MIN_ROUND_ITERS iterations (each round starts at a barrier, whose skew
 * the round's average absorbs), at most ROUNDS of them; each round runs
 * every algorithm's share back to back, starting with a different algorithm
 * each round. An algorithm's time is the median over rounds of the slowest
 * rank's average in that round: a burst of load from elsewhere on a shared
 * machine spoils a round or two of every algorithm alike instead of one
 * algorithm's whole mean. auto/best is the median over rounds of the
 * ratio within each round, for the same reason. */
#define ROUNDS          15
#define MIN_ROUND_ITERS 2

typedef struct algo {
  const char *name;         /* also the value of algo_env */
  sc_comm_t *comm;          /* NULL: n/a */
  int retry;                /* create a fresh communicator at the next size */
  int ok;                   /* still measured at this size */
  double round_us[ROUNDS];  /* this rank's per-iteration time in each round */
  unsigned noted;           /* bit per sc_result_t already reported */
  char last[PERF_NOTE_LEN]; /* the text of its last failure */
} algo_t;

typedef struct cmp {
  const perf_world_t *w;
  perf_compare_run_t run;
  algo_t algos[PERF_MAX_ALGOS];
  char *saved_env; /* algo_env as it was; NULL: unset */
  perf_compare_note_t *notes;
  size_t notes_cap;
  perf_compare_row_t *rows;
  size_t rows_cap;
} cmp_t;

const char *const *perf_registry_algos(int coll) {
  static const char *names[SC_COLL_COUNT_][SC_ALGO_MAX + 1];
  if (coll < 0 || coll >= SC_COLL_COUNT_) return NULL; /* no compare mode */
  int n;
  const sc_algo_entry_t *c = sc_algo_candidates((sc_coll_t)coll, &n);
  for (int i = 0; i < n && i < SC_ALGO_MAX; i++) names[coll][i] = c[i].name;
  return names[coll];
}

static void *grow(void *p, size_t *cap, size_t elem) {
  *cap = *cap ? 2 * *cap : 16;
  void *q = realloc(p, *cap * elem);
  if (!q) {
    fprintf(stderr, "sc perf: out of memory\n");
    exit(3);
  }
  return q;
}

static void capture(char *msg, sc_result_t r) {
  const char *detail = sc_last_error();
  snprintf(msg, PERF_NOTE_LEN, "%s", detail && *detail ? detail : sc_strerror(r));
}

/* Collective over the first communicator: SC_SUCCESS on every rank if every
 * rank's `mine` is; else the lowest failing rank's code, its text in msg. */
static sc_result_t agree(const cmp_t *x, sc_result_t mine, char *msg) {
  const perf_world_t *w = x->w;
  int32_t first = mine != SC_SUCCESS ? w->rank : w->nranks;
  perf_check_sc(sc_allreduce(&first, &first, 1, SC_INT32, SC_MIN, w->comm),
                "sc_allreduce(outcome)");
  if (first == w->nranks) return SC_SUCCESS;
  struct {
    int32_t code;
    char text[PERF_NOTE_LEN];
  } f;
  memset(&f, 0, sizeof(f));
  if (w->rank == first) {
    f.code = (int32_t)mine;
    snprintf(f.text, sizeof(f.text), "%s", msg);
  }
  perf_check_sc(sc_broadcast(&f, &f, sizeof(f), SC_UINT8, first, w->comm), "sc_broadcast(outcome)");
  f.text[sizeof(f.text) - 1] = '\0';
  snprintf(msg, PERF_NOTE_LEN, "%s", f.text);
  return (sc_result_t)f.code;
}

/* Rank 0 reports the first failure of each kind per algorithm. */
static void note(cmp_t *x, int i, long long at, sc_result_t code, const char *msg) {
  algo_t *al = &x->algos[i];
  if (code != SC_ERR_UNSUPPORTED) x->run.failed = 1;
  unsigned bit = 1u << ((unsigned)code & 31u);
  if (al->noted & bit) return;
  al->noted |= bit;
  if (x->w->rank != 0) return;
  if (x->run.nnotes == x->notes_cap) x->notes = grow(x->notes, &x->notes_cap, sizeof(*x->notes));
  perf_compare_note_t *n = &x->notes[x->run.nnotes++];
  n->algo = i;
  n->at = at;
  n->code = code;
  snprintf(n->text, sizeof(n->text), "%s", msg);
  x->run.notes = x->notes;
  perf_print_compare_note(&x->run, n);
}

static void restore_env(const cmp_t *x) {
  if (x->saved_env)
    setenv(x->w->coll->algo_env, x->saved_env, 1);
  else
    unsetenv(x->w->coll->algo_env);
}

/* Collective: a communicator with algo_env=al->name. */
static void create(cmp_t *x, int i, long long at) {
  const perf_world_t *w = x->w;
  algo_t *al = &x->algos[i];
  char msg[PERF_NOTE_LEN] = "";
  sc_unique_id_t id;
  memset(&id, 0, sizeof(id));
  al->retry = 0;
  sc_result_t r = SC_SUCCESS;
  if (w->rank == 0 && (r = sc_get_unique_id(&id)) != SC_SUCCESS) capture(msg, r);
  if ((r = agree(x, r, msg)) != SC_SUCCESS) {
    note(x, i, at, r, msg);
    return;
  }
  perf_check_sc(sc_broadcast(&id, &id, sizeof(id), SC_UINT8, 0, w->comm), "sc_broadcast(id)");
  sc_comm_t *comm = NULL;
  setenv(w->coll->algo_env, al->name, 1);
  r = sc_comm_init_rank(&comm, w->nranks, id, w->rank);
  if (r != SC_SUCCESS) capture(msg, r);
  restore_env(x);
  if ((r = agree(x, r, msg)) != SC_SUCCESS) {
    if (comm) sc_comm_destroy(comm);
    note(x, i, at, r, msg);
    return;
  }
  al->comm = comm;
}

/* Collective: `mine` is this rank's outcome of a step on algorithm i's
 * communicator. Returns 1 if every rank succeeded; else the algorithm is out
 * of this size, and out of the run unless its communicator is still usable
 * or the failure was SC_ERR_UNSUPPORTED (then a fresh one at the next size). */
static int settle(cmp_t *x, int i, long long at, sc_result_t mine, char *msg) {
  algo_t *al = &x->algos[i];
  sc_result_t r = agree(x, mine, msg);
  if (r == SC_SUCCESS) return 1;
  al->ok = 0;
  note(x, i, at, r, msg);
  sc_result_t err = SC_SUCCESS;
  int32_t dead = sc_comm_get_async_error(al->comm, &err) != SC_SUCCESS || err != SC_SUCCESS;
  perf_check_sc(sc_allreduce(&dead, &dead, 1, SC_INT32, SC_MAX, x->w->comm),
                "sc_allreduce(outcome)");
  if (dead) {
    sc_comm_destroy(al->comm);
    al->comm = NULL;
    /* The same refusal twice in a row does not depend on the size. */
    al->retry = r == SC_ERR_UNSUPPORTED && strcmp(al->last, msg) != 0;
  }
  snprintf(al->last, sizeof(al->last), "%s", msg);
  return 0;
}

/* n operations on c->comm (on the device copies with --mem device); stops at
 * the first failure. */
static sc_result_t run_ops(const perf_world_t *w, const perf_case_t *c, int n, char *msg) {
  perf_case_t call;
  perf_call_case(w, c, &call);
  for (int k = 0; k < n; k++) {
    sc_result_t r = w->coll->run(&call);
    if (r != SC_SUCCESS) {
      capture(msg, r);
      return r;
    }
  }
  return SC_SUCCESS;
}

static void measure(cmp_t *x, perf_case_t *c, perf_compare_row_t *row) {
  const perf_world_t *w = x->w;
  const perf_coll_t *coll = w->coll;
  const perf_args_t *a = w->a;
  const int n = x->run.nalgos;
  const long long at = (long long)row->bytes;
  char msg[PERF_NOTE_LEN];

  for (int i = 0; i < n; i++) {
    algo_t *al = &x->algos[i];
    if (!al->comm && al->retry) create(x, i, at);
    al->ok = al->comm != NULL;
    for (int k = 0; k < ROUNDS; k++) al->round_us[k] = -1;
    row->time_us[i] = -1;
    row->wrong[i] = -1;
  }

  c->in_place = 0;
  coll->place(c);
  /* One checked operation on each. */
  if (a->check) {
    for (int i = 0; i < n; i++) {
      algo_t *al = &x->algos[i];
      if (!al->ok) continue;
      c->comm = al->comm;
      c->algo = al->name;
      c->timing = 0;
      coll->fill(c);
      perf_upload_case(w, c);
      sc_result_t r = run_ops(w, c, 1, msg);
      if (r == SC_SUCCESS) perf_download_case(w, c);
      int64_t wrong = r == SC_SUCCESS ? coll->check(c) : 0;
      if (!settle(x, i, at, r, msg)) continue;
      perf_check_sc(sc_allreduce(&wrong, &wrong, 1, SC_INT64, SC_SUM, w->comm),
                    "sc_allreduce(#wrong)");
      row->wrong[i] = wrong;
      if (wrong > 0) {
        x->run.total_wrong += wrong;
        if (w->rank == 0) {
          printf("# WRONG %s at %zu B: %lld wrong elements\n", al->name, row->bytes,
                 (long long)wrong);
          fflush(stdout);
        }
      }
    }
  }

  /* Each one's warm-up, then the timed rounds. */
  c->timing = 1;
  coll->fill(c);
  perf_upload_case(w, c);
  for (int i = 0; i < n; i++) {
    algo_t *al = &x->algos[i];
    if (!al->ok) continue;
    c->comm = al->comm;
    c->algo = al->name;
    settle(x, i, at, run_ops(w, c, a->warmup, msg), msg);
  }
  int rounds = a->iters / MIN_ROUND_ITERS;
  rounds = rounds < 1 ? 1 : rounds > ROUNDS ? ROUNDS : rounds;
  for (int round = 0; round < rounds; round++) {
    int iters = a->iters / rounds + (round < a->iters % rounds);
    for (int j = 0; j < n; j++) {
      int i = (j + round) % n;
      algo_t *al = &x->algos[i];
      if (!al->ok) continue;
      c->comm = al->comm;
      c->algo = al->name;
      perf_check_sc(sc_barrier(w->comm), "sc_barrier");
      double t0 = perf_now_s();
      sc_result_t r = run_ops(w, c, iters, msg);
      al->round_us[round] = (perf_now_s() - t0) * 1e6 / iters;
      settle(x, i, at, r, msg);
    }
  }

  /* A round is done when the last rank is; the median round stands. */
  double us[PERF_MAX_ALGOS * ROUNDS];
  for (int i = 0; i < n; i++)
    for (int k = 0; k < rounds; k++) us[i * rounds + k] = x->algos[i].round_us[k];
  perf_check_sc(sc_allreduce(us, us, (size_t)(n * rounds), SC_FLOAT64, SC_MAX, w->comm),
                "sc_allreduce(time)");
  for (int i = 0; i < n; i++)
    if (x->algos[i].ok) row->time_us[i] = perf_median(&us[i * rounds], rounds);

  /* A wrong result is not a candidate for the best. */
  row->best = -1;
  for (int i = 0; i < n - 1; i++)
    if (row->time_us[i] >= 0 && row->wrong[i] <= 0 &&
        (row->best < 0 || row->time_us[i] < row->time_us[row->best]))
      row->best = i;
  row->auto_pick = NULL;
  algo_t *au = &x->algos[n - 1];
  const char *pick = NULL;
  if (au->comm) {
    c->comm = au->comm;
    c->algo = au->name;
    if (coll->auto_pick(c, &pick) == SC_SUCCESS) row->auto_pick = pick;
  }
  /* auto against the best round by round: the two ran back to back in each
   * round, so load that comes and goes between rounds cancels out. A time
   * exists only for an algorithm that completed every round. */
  row->auto_ratio = -1;
  if (row->best >= 0 && row->time_us[n - 1] >= 0 && row->time_us[row->best] > 0) {
    double ratio[ROUNDS];
    for (int k = 0; k < rounds; k++)
      ratio[k] = us[(n - 1) * rounds + k] / us[row->best * rounds + k];
    row->auto_ratio = perf_median(ratio, rounds);
    x->run.compared++;
    /* As printed, with 2 decimals. */
    if ((long long)(row->auto_ratio * 100 + 0.5) <= 110) x->run.within++;
  }
  c->comm = w->comm;
  c->algo = NULL;
}

int perf_compare(const perf_world_t *w) {
  const perf_coll_t *coll = w->coll;
  const perf_args_t *a = w->a;
  const perf_dtype_info_t *dt = &perf_dtype_infos[a->dtypes[0]];
  cmp_t x;
  memset(&x, 0, sizeof(x));
  x.w = w;
  int n = 0;
  for (; coll->compare_algos[n] && n < PERF_MAX_ALGOS - 1; n++)
    x.algos[n].name = coll->compare_algos[n];
  x.algos[n++].name = "auto";
  x.run.nalgos = n;
  for (int i = 0; i < n; i++) x.run.names[i] = x.algos[i].name;
  x.run.type = dt->name;
  x.run.redop = coll->has_op ? perf_op_name_of(perf_op_values[a->ops[0]]) : "none";
  const char *env = getenv(coll->algo_env);
  if (env && !(x.saved_env = strdup(env))) {
    fprintf(stderr, "%s: out of memory\n", coll->binary);
    exit(3);
  }

  if (w->rank == 0) perf_print_compare_header(w, &x.run);
  for (int i = 0; i < n; i++) create(&x, i, -1);
  if (w->rank == 0) perf_print_compare_columns(&x.run);

  perf_case_t c = {
      .comm = w->comm,
      .rank = w->rank,
      .nranks = w->nranks,
      .dtype = dt->dtype,
      .elem_size = sc_dtype_size(dt->dtype),
      .op = coll->has_op ? perf_op_values[a->ops[0]] : SC_SUM,
      .root = coll->has_root ? a->root : 0,
      .send_alloc = w->send_alloc,
      .recv_alloc = w->recv_alloc,
      .reduces = coll->has_op,
  };
  perf_setup_values(&c);
  size_t size = a->minbytes;
  do {
    perf_set_count(coll, &c, size);
    perf_compare_row_t row = {.bytes = c.total * c.elem_size, .count = c.count};
    measure(&x, &c, &row);
    if (w->rank == 0) {
      perf_print_compare_row(&x.run, &row);
      if (a->json_path) {
        if (x.run.nrows == x.rows_cap) x.rows = grow(x.rows, &x.rows_cap, sizeof(*x.rows));
        x.rows[x.run.nrows++] = row;
        x.run.rows = x.rows;
      }
    }
  } while (perf_next_size(a, &size));

  int status = x.run.total_wrong > 0 ? 1 : x.run.failed ? 3 : 0;
  if (w->rank == 0) {
    perf_print_compare_footer(&x.run);
    if (a->json_path && perf_write_compare_json(w, &x.run) != 0) status = status ? status : 3;
  }
  for (int i = 0; i < n; i++)
    if (x.algos[i].comm) sc_comm_destroy(x.algos[i].comm);
  free(x.rows);
  free(x.notes);
  free(x.saved_env);
  return status;
}
