/* SPDX-License-Identifier: BSD-3-Clause */
/* HiTopKComm (Shi et al., MLSys 2021) as an algorithm of sc_gtopk_allreduce.
 * With H hosts of L ranks and local rank l on host h:
 *   1. acc = grad + residual; dense reduce-scatter (SUM) of acc inside the
 *      host: rank l holds shard l of the host sum;
 *   2. top-kl of that shard (the configured selection; a GAUSSIAN overshoot
 *      cut to its exact top kl); the residual becomes zero except on shard l,
 *      where it keeps the host-sum shard minus the selection: the host's
 *      mass on shard l lives in this one rank's residual from now on;
 *   3. all-gather of the H selections among the ranks of local rank l (one
 *      per host), summed in host order into a dense shard;
 *   4. dense all-gather of the shards inside the host; grad = sum / nranks.
 * Every rank of one local rank sums the same sets in the same order, and
 * the all-gather copies bits, so the result is identical on every rank.
 * The two sub-communicators (host, and "rail" among equal local ranks) are
 * made by the first step on a communicator and kept with it. */
#include "lib/sparse/hitopk.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/reduce.h"
#include "kernels/cpu/sparse_merge.h"
#include "lib/base/log.h"
#include "lib/core/comm.h"
#include "lib/sparse/ef.h"
#include "lib/sparse/sparse.h"

typedef struct hitopk_comms {
  sc_comm_t *host, *rail;
} hitopk_comms_t;

static void *comms_create(void) {
  return calloc(1, sizeof(hitopk_comms_t));
}

static void comms_free(void *state) {
  hitopk_comms_t *c = state;
  if (c->host) sc_comm_destroy(c->host);
  if (c->rail) sc_comm_destroy(c->rail);
  free(c);
}

static sc_result_t get_comms(sc_comm_t *comm, hitopk_comms_t **out) {
  hitopk_comms_t *c = sc_comm_ext(comm, SC_EXT_HITOPK, comms_create, comms_free);
  if (!c) return SC_ERR(SC_ERR_NOMEM, "sc_gtopk_allreduce: hitopk state");
  if (!c->host) {
    const sc_tune_state_t *t = &comm->tune;
    SC_CHECK(sc_comm_split(comm, t->host_index, t->local_rank, &c->host));
    sc_result_t r = sc_comm_split(comm, t->local_rank, t->host_index, &c->rail);
    if (r != SC_SUCCESS) {
      sc_comm_destroy(c->host);
      c->host = NULL;
      return r;
    }
  }
  *out = c;
  return SC_SUCCESS;
}

/* A step's buffers, kept in the sc_ef_t between steps: fresh pages for a
 * gradient-sized buffer on every call cost more than the step's arithmetic. */
typedef struct sc_hitopk_buf {
  size_t padded, shard, cap, rec_b, nrec; /* what the buffers hold */
  uint8_t *pad;  /* L * shard elements: acc padded, later the gathered result */
  uint8_t *mine; /* shard elements: this rank's host-sum shard, later the summed shard */
  uint32_t *idx, *w_idx, *o_idx;
  uint8_t *val, *w_val, *o_val, *w_src;
  uint64_t *w_key;
  uint8_t *rec, *recs; /* this rank's packed set, and the H gathered */
  double *sum;         /* shard elements */
} hitopk_buf_t;

static void buf_release(hitopk_buf_t *b) {
  free(b->pad);
  free(b->mine);
  free(b->idx);
  free(b->w_idx);
  free(b->o_idx);
  free(b->val);
  free(b->w_val);
  free(b->o_val);
  free(b->w_src);
  free(b->w_key);
  free(b->rec);
  free(b->recs);
  free(b->sum);
  memset(b, 0, sizeof(*b));
}

void sc_hitopk_buf_free(struct sc_hitopk_buf *b) {
  if (!b) return;
  buf_release(b);
  free(b);
}

static sc_result_t buf_reserve(hitopk_buf_t *b, size_t L, size_t H, const sc_hitopk_plan_t *p,
                               size_t es, size_t rec) {
  const size_t c = 2 * p->kl_max + 1, s = p->shard ? p->shard : 1;
  if (b->pad && b->padded >= L * s * es && b->shard >= s * 8 && b->cap >= c * 8 &&
      b->rec_b >= rec && b->nrec >= rec * H)
    return SC_SUCCESS;
  buf_release(b);
  b->pad = malloc(L * s * es);
  b->mine = malloc(s * es);
  b->idx = malloc(c * 4);
  b->w_idx = malloc(c * 4);
  b->o_idx = malloc(c * 4);
  b->val = malloc(c * es);
  b->w_val = malloc(c * es);
  b->o_val = malloc(c * es);
  b->w_src = malloc(c);
  b->w_key = malloc(c * 8);
  b->rec = calloc(rec, 1);
  b->recs = malloc(rec * H);
  b->sum = malloc(s * sizeof(double));
  if (!b->pad || !b->mine || !b->idx || !b->w_idx || !b->o_idx || !b->val || !b->w_val ||
      !b->o_val || !b->w_src || !b->w_key || !b->rec || !b->recs || !b->sum) {
    buf_release(b);
    return SC_ERR(SC_ERR_NOMEM, "sc_gtopk_allreduce: hitopk buffers for a shard of %zu", s);
  }
  b->padded = L * s * es;
  b->shard = s * 8; /* sum's bytes; mine's are fewer */
  b->cap = c * 8;   /* the widest per-entry array (w_key) */
  b->rec_b = rec;
  b->nrec = rec * H;
  return SC_SUCCESS;
}

/* grad = sum / np over n elements (float32 arithmetic but for float64, as SC_AVG). */
static void average(sc_dtype_t t, void *grad, const void *sum, size_t n, int np) {
  if (t == SC_FLOAT32) {
    float *g = grad;
    const float *s = sum;
    for (size_t i = 0; i < n; i++) g[i] = s[i] / (float)np;
  } else if (t == SC_FLOAT64) {
    double *g = grad;
    const double *s = sum;
    for (size_t i = 0; i < n; i++) g[i] = s[i] / (double)np;
  } else {
    for (size_t i = 0; i < n; i++)
      sc_ef_put(t, grad, i, (double)((float)sc_sparse_value(t, sum, i) / (float)np));
  }
}

/* Sum of the H sets, in host order, into the dense shard (float64 in
 * float64, float32 arithmetic otherwise), each set checked first. */
static sc_result_t sum_sets(const char *fn, sc_dtype_t t, const hitopk_buf_t *b, size_t H,
                            size_t rec, const sc_hitopk_plan_t *p, double *sum) {
  const size_t es = sc_dtype_size(t);
  for (size_t h = 0; h < H; h++) {
    const uint8_t *r = b->recs + h * rec;
    uint64_t nnz;
    memcpy(&nnz, r, 8);
    if (nnz > p->kl_max)
      return SC_ERR(SC_ERR_REMOTE, "%s: hitopk: host %zu sent %llu entries, more than %zu", fn, h,
                    (unsigned long long)nnz, p->kl_max);
    const uint8_t *ix = r + 8, *vv = r + 8 + p->kl_max * 4;
    for (size_t i = 0; i < nnz; i++) {
      uint32_t j;
      memcpy(&j, ix + i * 4, 4);
      if (j >= p->len)
        return SC_ERR(SC_ERR_REMOTE, "%s: hitopk: host %zu sent index %u outside a shard of %zu",
                      fn, h, j, p->len);
      double v = sc_sparse_value(t, vv, i);
      sum[j] = t == SC_FLOAT64 ? sum[j] + v : (double)((float)sum[j] + (float)v);
    }
  }
  (void)es;
  return SC_SUCCESS;
}

/* res: the residual (host memory), NULL without error feedback. */
static sc_result_t step(void *grad, size_t n, sc_dtype_t t, size_t k, sc_select_t method, void *res,
                        sc_comm_t *comm, hitopk_comms_t *cm, size_t L, size_t H, hitopk_buf_t *b) {
  const char *fn = "sc_gtopk_allreduce";
  const size_t es = sc_dtype_size(t);
  sc_hitopk_plan_t p;
  sc_hitopk_plan(n, k, (int)L, comm->tune.local_rank, &p);
  const size_t rec = (8 + p.kl_max * (4 + es) + 7) / 8 * 8;
  SC_CHECK(buf_reserve(b, L, H, &p, es, rec));
  if (L * p.shard > n) memset(b->pad + n * es, 0, (L * p.shard - n) * es);
  if (p.shard) memset(b->sum, 0, p.shard * sizeof(double));
  memset(b->rec, 0, rec);
  const void *acc = grad;
  if (res) {
    sc_ef_accumulate(t, res, grad, n);
    acc = res;
  }
  /* 1: the host sum's shard l. */
  if (n) memcpy(b->pad, acc, n * es);
  if (L > 1)
    SC_CHECK(sc_reduce_scatter(b->pad, b->mine, p.shard, t, SC_SUM, cm->host));
  else if (p.shard)
    memcpy(b->mine, b->pad, p.shard * es);
  /* From here the residual's mass is the host's shard: the other positions
   * moved to their local ranks. */
  if (res && n) {
    memset(res, 0, n * es);
    memcpy((uint8_t *)res + p.off * es, b->mine, p.len * es);
  }
  /* 2: top-kl of the shard. */
  size_t nnz = 0;
  if (p.len && p.kl) {
    SC_CHECK(sc_topk(b->mine, p.len, t, p.kl, method, b->idx, b->val, &nnz));
    if (nnz > 2 * p.kl) return SC_ERR(SC_ERR_INTERNAL, "%s: sc_topk returned %zu > 2k", fn, nnz);
    if (nnz > p.kl) {
      sc_merge_work_t mw = {b->w_idx, b->w_val, b->w_key, b->w_src, nnz};
      nnz = sc_ef_trim(t, p.kl, b->idx, b->val, nnz, b->o_idx, b->o_val, &mw);
    }
  }
  if (res)
    for (size_t i = 0; i < nnz; i++) sc_ef_put(t, res, p.off + b->idx[i], 0.0);
  /* 3: the sets of the H ranks holding shard l. */
  uint64_t nn = nnz;
  memcpy(b->rec, &nn, 8);
  memcpy(b->rec + 8, b->idx, nnz * 4);
  memcpy(b->rec + 8 + p.kl_max * 4, b->val, nnz * es);
  sc_result_t r = H > 1 ? sc_allgather(b->rec, b->recs, rec, SC_UINT8, cm->rail)
                        : (memcpy(b->recs, b->rec, rec), SC_SUCCESS);
  if (r == SC_SUCCESS) r = sum_sets(fn, t, b, H, rec, &p, b->sum);
  if (r == SC_SUCCESS) {
    for (size_t i = 0; i < p.shard; i++) sc_ef_put(t, b->mine, i, b->sum[i]);
    /* 4: every shard to every rank of the host. */
    if (L > 1)
      r = sc_allgather(b->mine, b->pad, p.shard, t, cm->host);
    else if (p.shard)
      memcpy(b->pad, b->mine, p.shard * es);
  }
  if (r != SC_SUCCESS) { /* the selection goes back: nothing is lost */
    if (res)
      for (size_t i = 0; i < nnz; i++)
        sc_ef_put(t, res, p.off + b->idx[i], sc_sparse_value(t, b->val, i));
    return r;
  }
  average(t, grad, b->pad, n, comm->nranks);
  return SC_SUCCESS;
}

sc_result_t sc_hitopk_step_at(void *grad, void *res, size_t n, sc_dtype_t dtype, size_t k,
                              sc_select_t method, sc_ef_t *ef, sc_comm_t *comm) {
  const sc_tune_state_t *t = &comm->tune;
  int L;
  if (!sc_hitopk_layout_ok(t->host_of, comm->nranks, t->nhosts, &L))
    return SC_ERR(SC_ERR_UNSUPPORTED,
                  "sc_gtopk_allreduce: hitopk needs the same number of ranks on every host "
                  "(%d ranks on %d hosts, this host %d)",
                  comm->nranks, t->nhosts, t->local_size);
  hitopk_comms_t *cm = NULL;
  if (comm->nranks > 1) SC_CHECK(get_comms(comm, &cm));
  if (!ef) {
    hitopk_buf_t b;
    memset(&b, 0, sizeof(b));
    sc_result_t r =
        step(grad, n, dtype, k, method, res, comm, cm, (size_t)L, (size_t)t->nhosts, &b);
    buf_release(&b);
    return r;
  }
  if (!ef->hitopk && !(ef->hitopk = calloc(1, sizeof(*ef->hitopk))))
    return SC_ERR(SC_ERR_NOMEM, "sc_gtopk_allreduce: hitopk buffers");
  return step(grad, n, dtype, k, method, res, comm, cm, (size_t)L, (size_t)t->nhosts, ef->hitopk);
}

sc_result_t sc_hitopk_step(void *grad, size_t n, sc_dtype_t dtype, size_t k, sc_select_t method,
                           sc_ef_t *ef, sc_comm_t *comm) {
  return sc_hitopk_step_at(grad, ef ? ef->residual : NULL, n, dtype, k, method, ef, comm);
}
