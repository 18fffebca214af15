/* SPDX-License-Identifier: BSD-3-Clause */
/* The nccl-tests-style harness: the sweep over dtypes, ops and sizes, with
 * timing; flags, checking and output are in perf_args.c, perf_check.c and
 * perf_output.c, the -a compare sweep in perf_compare.c. */
#include "perf/perf_common.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf/perf_internal.h"

#define PAGE_BYTES 4096

/* ---- dtypes and ops ---- */

const perf_dtype_info_t perf_dtype_infos[] = {
    {"int8", SC_INT8, 0, 8, 1, 0, 0, 0},
    {"uint8", SC_UINT8, 0, 8, 0, 0, 0, 0},
    {"int32", SC_INT32, 0, 32, 1, 0, 0, 0},
    {"uint32", SC_UINT32, 0, 32, 0, 0, 0, 0},
    {"int64", SC_INT64, 0, 64, 1, 0, 0, 0},
    {"uint64", SC_UINT64, 0, 64, 0, 0, 0, 0},
    {"half", SC_FLOAT16, 1, 0, 0, 2048.0, 15, 10},
    {"bfloat16", SC_BFLOAT16, 1, 0, 0, 256.0, 127, 7},
    {"float", SC_FLOAT32, 1, 0, 0, 16777216.0, 127, 23},
    {"double", SC_FLOAT64, 1, 0, 0, 9007199254740992.0, 1023, 52},
};
_Static_assert(sizeof(perf_dtype_infos) / sizeof(perf_dtype_infos[0]) == PERF_N_DTYPES,
               "PERF_N_DTYPES does not match the table");

const char *const perf_op_names[] = {"sum", "prod", "min", "max", "avg"};
const sc_redop_t perf_op_values[] = {SC_SUM, SC_PROD, SC_MIN, SC_MAX, SC_AVG};
_Static_assert(sizeof(perf_op_names) / sizeof(perf_op_names[0]) == PERF_N_OPS &&
                   sizeof(perf_op_values) / sizeof(perf_op_values[0]) == PERF_N_OPS,
               "PERF_N_OPS does not match the tables");

const char *perf_op_name_of(sc_redop_t op) {
  for (int i = 0; i < PERF_N_OPS; i++)
    if (perf_op_values[i] == op) return perf_op_names[i];
  return "?";
}

/* ---- failures ---- */

static const perf_coll_t *current_coll;
static int current_rank = -1;

void perf_check_sc(sc_result_t r, const char *call) {
  if (r == SC_SUCCESS) return;
  const char *detail = sc_last_error();
  char who[32];
  if (current_rank >= 0)
    snprintf(who, sizeof(who), "rank %d", current_rank);
  else /* before the communicator exists */
    snprintf(who, sizeof(who), "SC_RANK=%s", getenv("SC_RANK") ? getenv("SC_RANK") : "(unset)");
  /* sc_gtopk_perf calls this without perf_main (no coll). */
  fprintf(stderr, "%s: %s: %s failed: %s\n",
          current_coll ? current_coll->binary : program_invocation_short_name, who, call,
          (detail && *detail) ? detail : sc_strerror(r));
  fflush(NULL);
  exit(3);
}

/* ---- the sweep ---- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double perf_median(const double *v, int n) {
  double tmp[64];
  if (n <= 0) return -1;
  if (n > 64) n = 64;
  memcpy(tmp, v, (size_t)n * sizeof(double));
  qsort(tmp, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
}

double perf_max_over(sc_comm_t *comm, double v) {
  double m;
  perf_check_sc(sc_allreduce(&v, &m, 1, SC_FLOAT64, SC_MAX, comm), "sc_allreduce");
  return m;
}

void perf_sent_over(sc_comm_t *comm, uint64_t sent, int nranks, double *max, double *mean) {
  double s = (double)sent, sum;
  perf_check_sc(sc_allreduce(&s, max, 1, SC_FLOAT64, SC_MAX, comm), "sc_allreduce");
  perf_check_sc(sc_allreduce(&s, &sum, 1, SC_FLOAT64, SC_SUM, comm), "sc_allreduce");
  *mean = sum / nranks;
}

const char *perf_wrong_text(int64_t wrong, char buf[32]) {
  if (wrong < 0) return "n/a";
  snprintf(buf, 32, "%lld", (long long)wrong);
  return buf;
}

void perf_json_wrong(FILE *f, int64_t wrong) {
  if (wrong < 0)
    fprintf(f, "null");
  else
    fprintf(f, "%lld", (long long)wrong);
}

double perf_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double busbw_factor(perf_busbw_t kind, int nranks) {
  switch (kind) {
  case PERF_BUSBW_ALLREDUCE:
    return 2.0 * (nranks - 1) / nranks;
  case PERF_BUSBW_GATHER:
    return (double)(nranks - 1) / nranks;
  case PERF_BUSBW_ONE:
    return 1.0;
  }
  return 1.0;
}

/* ---- --mem device ---- */

static void *to_device(const perf_world_t *w, void *p) {
  size_t max = w->a->maxbytes;
  char *b = p;
  if (b >= (char *)w->send_alloc && b <= (char *)w->send_alloc + max)
    return (char *)w->dev_send + (b - (char *)w->send_alloc);
  if (b >= (char *)w->recv_alloc && b <= (char *)w->recv_alloc + w->recv_max)
    return (char *)w->dev_recv + (b - (char *)w->recv_alloc);
  /* Every placement points into the two allocations; anything else is a bug
   * of a benchmark, and must not reach the library as a host pointer. */
  fprintf(stderr, "%s: a buffer outside the allocations\n", w->coll->binary);
  exit(3);
}

void perf_call_case(const perf_world_t *w, const perf_case_t *c, perf_case_t *call) {
  *call = *c;
  if (w->a->mem != PERF_MEM_DEVICE) return;
  call->sendbuf = to_device(w, c->sendbuf);
  call->recvbuf = to_device(w, c->recvbuf);
  call->send_alloc = w->dev_send;
  call->recv_alloc = w->dev_recv;
}

/* The whole array is the most any collective reads or writes of either
 * allocation (in place included), except where a case says it receives more. */
static size_t case_bytes(const perf_case_t *c, int recv) {
  size_t whole = c->total * c->elem_size;
  return recv && c->recv_bytes > whole ? c->recv_bytes : whole;
}

void perf_upload_case(const perf_world_t *w, const perf_case_t *c) {
  if (w->a->mem != PERF_MEM_DEVICE) return;
  perf_dev_upload(w->dev_send, w->send_alloc, case_bytes(c, 0));
  perf_dev_upload(w->dev_recv, w->recv_alloc, case_bytes(c, 1));
}

void perf_download_case(const perf_world_t *w, const perf_case_t *c) {
  if (w->a->mem != PERF_MEM_DEVICE) return;
  perf_dev_download(w->send_alloc, w->dev_send, case_bytes(c, 0));
  perf_dev_download(w->recv_alloc, w->dev_recv, case_bytes(c, 1));
}

static void run_placement(const perf_world_t *w, perf_case_t *c, int in_place, perf_result_t *res) {
  const perf_coll_t *coll = w->coll;
  const perf_args_t *a = w->a;
  perf_case_t call;
  c->in_place = in_place;
  c->skip = 0;
  coll->place(c);
  res->wrong = -1;
  if (c->skip) { /* the same on every rank: no collective call is left unmatched */
    res->time_us = res->algbw = res->busbw = -1;
    return;
  }
  if (a->check) {
    c->timing = 0;
    coll->fill(c);
    perf_upload_case(w, c);
    perf_call_case(w, c, &call);
    perf_check_sc(coll->run(&call), coll->name);
    perf_download_case(w, c);
    int64_t wrong = coll->check(c);
    perf_check_sc(sc_allreduce(&wrong, &wrong, 1, SC_INT64, SC_SUM, c->comm),
                  "sc_allreduce(#wrong)");
    res->wrong = wrong;
  }
  c->timing = 1;
  coll->fill(c);
  perf_upload_case(w, c);
  perf_call_case(w, c, &call);
  perf_check_sc(sc_barrier(c->comm), "sc_barrier");
  /* With device buffers a blocking call returns once the result is in
   * device memory, so the host clock times the whole operation. */
  for (int i = 0; i < a->warmup; i++) perf_check_sc(coll->run(&call), coll->name);
  perf_check_sc(sc_barrier(c->comm), "sc_barrier");
  double t0 = perf_now_s();
  for (int i = 0; i < a->iters; i++) perf_check_sc(coll->run(&call), coll->name);
  double us = (perf_now_s() - t0) * 1e6 / a->iters;
  /* The operation is done when the last rank is. */
  perf_check_sc(sc_allreduce(&us, &us, 1, SC_FLOAT64, SC_MAX, c->comm), "sc_allreduce(time)");
  res->time_us = us;
  size_t bytes = c->total * c->elem_size;
  res->algbw = us > 0 ? (double)bytes / (us * 1e-6) / 1e9 : 0;
  res->busbw = res->algbw * busbw_factor(coll->busbw, c->nranks);
}

static void *alloc_pages(size_t bytes) {
  size_t rounded = (bytes + PAGE_BYTES - 1) / PAGE_BYTES * PAGE_BYTES;
  if (rounded == 0) rounded = PAGE_BYTES;
  void *p = aligned_alloc(PAGE_BYTES, rounded);
  /* Touch every page now so that no page fault lands in a timed loop. */
  if (p) memset(p, 0, rounded);
  return p;
}

void perf_set_count(const perf_coll_t *coll, perf_case_t *c, size_t size) {
  c->recv_bytes = 0;
  if (coll->set_count) {
    coll->set_count(c, size);
    return;
  }
  /* Rounded down like nccl-tests: whole elements, whole blocks per rank. */
  size_t elems = size / c->elem_size;
  if (coll->blocks_per_rank) {
    c->count = elems / (size_t)c->nranks;
    c->total = c->count * (size_t)c->nranks;
  } else {
    c->count = c->total = elems;
  }
}

int perf_next_size(const perf_args_t *a, size_t *size) {
  size_t next = a->stepfactor > 1 ? *size * (size_t)a->stepfactor : *size + a->stepbytes;
  if (next <= *size) next = *size + 1; /* 0 x factor, or overflow */
  if (next <= *size || next > a->maxbytes) return 0;
  *size = next;
  return 1;
}

/* The usual run: every dtype, op and size, out of place and in place. */
static int sweep(const perf_world_t *w) {
  const perf_coll_t *coll = w->coll;
  const perf_args_t *a = w->a;
  if (w->rank == 0) perf_print_header(coll, a, w->nranks, w->ranks);

  perf_row_t *rows = NULL;
  size_t nrows = 0, rows_cap = 0;
  int64_t total_wrong = 0;
  double busbw_sum = 0;
  int busbw_n = 0;

  for (int di = 0; di < a->ndtypes; di++) {
    const perf_dtype_info_t *dt = &perf_dtype_infos[a->dtypes[di]];
    for (int oi = 0; oi < a->nops; oi++) {
      perf_case_t c = {
          .comm = w->comm,
          .rank = w->rank,
          .nranks = w->nranks,
          .dtype = dt->dtype,
          .elem_size = sc_dtype_size(dt->dtype),
          .op = coll->has_op ? perf_op_values[a->ops[oi]] : SC_SUM,
          .root = coll->has_root ? a->root : 0,
          .algo = coll->algo_env ? getenv(coll->algo_env) : NULL,
          .send_alloc = w->send_alloc,
          .recv_alloc = w->recv_alloc,
          .reduces = coll->has_op,
      };
      perf_setup_values(&c);
      size_t size = a->minbytes;
      do {
        perf_set_count(coll, &c, size);
        perf_row_t row = {
            .bytes = c.total * c.elem_size,
            .count = c.count,
            .type = dt->name,
            .redop = coll->has_op ? perf_op_name_of(c.op) : "none",
            .root = coll->has_root ? c.root : -1,
        };
        run_placement(w, &c, 0, &row.res[0]);
        run_placement(w, &c, 1, &row.res[1]);
        for (int p = 0; p < 2; p++) {
          if (row.res[p].time_us < 0) continue; /* no such form */
          if (row.res[p].wrong > 0) total_wrong += row.res[p].wrong;
          busbw_sum += row.res[p].busbw;
          busbw_n++;
        }
        if (w->rank == 0) {
          perf_print_row(&row);
          if (a->json_path) {
            if (nrows == rows_cap) {
              rows_cap = rows_cap ? 2 * rows_cap : 64;
              perf_row_t *grown = realloc(rows, rows_cap * sizeof(*rows));
              if (!grown) {
                fprintf(stderr, "%s: out of memory\n", coll->binary);
                exit(3);
              }
              rows = grown;
            }
            rows[nrows++] = row;
          }
        }
      } while (perf_next_size(a, &size));
    }
  }

  double avg_busbw = busbw_n ? busbw_sum / busbw_n : 0;
  int status = total_wrong > 0 ? 1 : 0;
  if (w->rank == 0) {
    printf("# Out of bounds values : %lld %s\n", (long long)total_wrong,
           total_wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n", avg_busbw);
    printf("#\n");
    fflush(stdout);
    if (a->json_path &&
        perf_write_json(coll, a, w->nranks, w->ranks, rows, nrows, total_wrong, avg_busbw) != 0)
      status = status ? status : 3;
  }
  free(rows);
  return status;
}

/* The receive allocation: the whole array of the largest size, or more where
 * a case of the sweep says it receives more. */
static size_t recv_alloc_bytes(const perf_coll_t *coll, const perf_args_t *a, int rank,
                               int nranks) {
  size_t most = a->maxbytes;
  if (!coll->set_count) return most;
  for (int di = 0; di < a->ndtypes; di++) {
    perf_case_t c = {.rank = rank,
                     .nranks = nranks,
                     .dtype = perf_dtype_infos[a->dtypes[di]].dtype,
                     .elem_size = sc_dtype_size(perf_dtype_infos[a->dtypes[di]].dtype)};
    size_t size = a->minbytes;
    do {
      perf_set_count(coll, &c, size);
      if (c.recv_bytes > most) most = c.recv_bytes;
    } while (perf_next_size(a, &size));
  }
  return most;
}

int perf_main(const perf_coll_t *coll, int argc, char **argv) {
  perf_args_t a;
  current_coll = coll;
  perf_parse_args(coll, argc, argv, &a);
  if (a.algo) setenv(coll->algo_env, a.algo, 1);
  /* Before init: a run without a device ends on every rank alike. */
  if (a.mem == PERF_MEM_DEVICE && perf_mem_device_ready(coll->binary) != 0) return 2;

  sc_comm_t *comm = NULL;
  perf_check_sc(sc_comm_init_env(&comm), "sc_comm_init_env");
  int rank, nranks;
  perf_check_sc(sc_comm_rank(comm, &rank), "sc_comm_rank");
  perf_check_sc(sc_comm_size(comm, &nranks), "sc_comm_size");
  current_rank = rank;
  if (coll->has_root && a.root >= nranks) {
    fprintf(stderr, "%s: -r %d: root must be below nranks %d\n", coll->binary, a.root, nranks);
    sc_comm_destroy(comm);
    return 2;
  }

  size_t recv_max = recv_alloc_bytes(coll, &a, rank, nranks);
  perf_rank_desc_t me;
  memset(&me, 0, sizeof(me));
  me.pid = (int32_t)getpid();
  me.device = -1;
  void *dev_send = NULL, *dev_recv = NULL;
  if (a.mem == PERF_MEM_DEVICE) {
    int local_rank = 0, local_size = 1, host_index = 0, nhosts = 1;
    perf_check_sc(sc_comm_local(comm, &local_rank, &local_size, &host_index, &nhosts),
                  "sc_comm_local");
    me.device = perf_mem_pick_device(local_rank);
    dev_send = perf_dev_alloc(a.maxbytes);
    dev_recv = perf_dev_alloc(recv_max);
  }
  gethostname(me.host, sizeof(me.host) - 1);
  perf_rank_desc_t *ranks = calloc((size_t)nranks, sizeof(*ranks));
  void *send_alloc = alloc_pages(a.maxbytes);
  void *recv_alloc = alloc_pages(recv_max);
  if (!ranks || !send_alloc || !recv_alloc) {
    fprintf(stderr, "%s: rank %d: cannot allocate %zu + %zu bytes\n", coll->binary, rank,
            a.maxbytes, recv_max);
    return 3;
  }
  perf_check_sc(sc_allgather(&me, ranks, sizeof(me), SC_UINT8, comm), "sc_allgather(rank info)");

  const perf_world_t w = {
      .coll = coll,
      .a = &a,
      .comm = comm,
      .rank = rank,
      .nranks = nranks,
      .ranks = ranks,
      .send_alloc = send_alloc,
      .recv_alloc = recv_alloc,
      .recv_max = recv_max,
      .dev_send = dev_send,
      .dev_recv = dev_recv,
  };
  int status = a.compare ? perf_compare(&w) : sweep(&w);

  perf_check_sc(sc_comm_destroy(comm), "sc_comm_destroy");
  free(ranks);
  free(send_alloc);
  free(recv_alloc);
  if (a.mem == PERF_MEM_DEVICE) {
    perf_dev_free(dev_send);
    perf_dev_free(dev_recv);
    perf_mem_finish();
  }
  return status;
}
