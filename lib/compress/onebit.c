/* SPDX-License-Identifier: BSD-3-Clause */
/* The 1-bit compressed all-reduce (1-bit Adam's two-phase exchange, and
 * signSGD with majority vote); docs/ALGORITHMS.md, "1-bit compressed
 * all-reduce". The n elements are padded to npad, a multiple of 8 * P, and
 * cut into P chunks of npad / P; rank j is the server of chunk j. Phase 1 is
 * one all-to-all of bytes: block j carries this rank's packed signs of chunk
 * j and its 8-byte worker scale. Phase 2 is one all-gather of bytes: each
 * server's packed result signs and its scale (SCALED), or the "positive"
 * and "negative" planes of its vote (MAJORITY). Padding elements are never
 * read as input, never counted at a server and never written back.
 * Arithmetic is in double whatever the dtype, residuals too, in index order,
 * so that a reference can repeat it bit for bit. Device buffers are staged
 * through host memory of the state's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/reduce.h"
#include "kernels/cpu/signpack.h"
#include "kernels/devrt.h"
#include "lib/base/error.h"
#include "lib/compress/compress.h"
#include "lib/core/comm.h"
#include "lib/core/device.h"

struct sc_onebit {
  size_t n, npad, chunk, cb; /* cb: bytes of one chunk's packed signs */
  sc_dtype_t dtype;
  sc_onebit_mode_t mode;
  int nranks;
  double *w;              /* npad: the worker residual (SCALED), the input (MAJORITY) */
  double *sres;           /* chunk: the server residual (SCALED) */
  double *acc;            /* chunk: the server's sum */
  uint8_t *send1, *recv1; /* nranks * blk1 */
  uint8_t *recv2;         /* nranks * blk2 */
  size_t blk1, blk2;
  void *stage; /* n elements of dtype, for device buffers */
  const sc_devrt_t *rt;
  void *stream, *event;
};

static int float_dtype(sc_dtype_t t) {
  return t == SC_FLOAT32 || t == SC_FLOAT64 || t == SC_FLOAT16 || t == SC_BFLOAT16;
}

sc_result_t sc_onebit_destroy(sc_onebit_t *ob) {
  if (!ob) return SC_SUCCESS;
  free(ob->w);
  free(ob->sres);
  free(ob->acc);
  free(ob->send1);
  free(ob->recv1);
  free(ob->recv2);
  free(ob->stage);
  if (ob->rt) {
    if (ob->event) ob->rt->event_destroy(ob->event);
    if (ob->stream) ob->rt->stream_destroy(ob->stream);
  }
  free(ob);
  return SC_SUCCESS;
}

sc_result_t sc_onebit_create(size_t n, sc_dtype_t dtype, sc_onebit_mode_t mode, sc_comm_t *comm,
                             sc_onebit_t **ob) {
  if (!ob) return SC_ERR(SC_ERR_INVALID_ARG, "sc_onebit_create: ob is NULL");
  *ob = NULL;
  if (!comm) return SC_ERR(SC_ERR_INVALID_ARG, "sc_onebit_create: comm is NULL");
  if (!float_dtype(dtype))
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_onebit_create: dtype %d is not a float type", (int)dtype);
  if (mode != SC_ONEBIT_SCALED && mode != SC_ONEBIT_MAJORITY)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_onebit_create: unknown mode %d", (int)mode);
  const size_t p = (size_t)comm->nranks, unit = 8 * p;
  if (n > (SIZE_MAX / 16 - unit) / 8)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_onebit_create: n %zu is too large", n);
  sc_onebit_t *o = calloc(1, sizeof(*o));
  if (!o) return SC_ERR(SC_ERR_NOMEM, "sc_onebit_create: state");
  o->n = n;
  o->npad = (n + unit - 1) / unit * unit;
  o->chunk = o->npad / p;
  o->cb = o->chunk / 8;
  o->dtype = dtype;
  o->mode = mode;
  o->nranks = comm->nranks;
  o->blk1 = o->cb + 8;
  o->blk2 = mode == SC_ONEBIT_SCALED ? o->cb + 8 : 2 * o->cb;
  const size_t c1 = o->chunk ? o->chunk : 1;
  o->w = calloc(o->npad ? o->npad : 1, sizeof(double));
  o->sres = calloc(c1, sizeof(double));
  o->acc = calloc(c1, sizeof(double));
  o->send1 = calloc(p, o->blk1);
  o->recv1 = calloc(p, o->blk1);
  o->recv2 = calloc(p, o->blk2 ? o->blk2 : 1);
  if (!o->w || !o->sres || !o->acc || !o->send1 || !o->recv1 || !o->recv2) {
    sc_onebit_destroy(o);
    return SC_ERR(SC_ERR_NOMEM, "sc_onebit_create: state for n = %zu on %d ranks", n, comm->nranks);
  }
  *ob = o;
  return SC_SUCCESS;
}

/* w[i] = x[i] (add 0) or w[i] += x[i] (add 1), for i < n; returns the sum
 * of the new w[i]^2 in index order. */
static double load(double *w, const void *x, size_t n, sc_dtype_t t, int add) {
  double sq = 0.0;
  if (!add) memset(w, 0, n * sizeof(double));
  switch (t) {
  case SC_FLOAT32: {
    const float *f = x;
    for (size_t i = 0; i < n; i++) {
      w[i] += (double)f[i];
      sq += w[i] * w[i];
    }
    break;
  }
  case SC_FLOAT64: {
    const double *d = x;
    for (size_t i = 0; i < n; i++) {
      w[i] += d[i];
      sq += w[i] * w[i];
    }
    break;
  }
  default: {
    const uint16_t *h = x;
    for (size_t i = 0; i < n; i++) {
      w[i] += (double)(t == SC_FLOAT16 ? sc_half_to_float(h[i]) : sc_bfloat16_to_float(h[i]));
      sq += w[i] * w[i];
    }
  }
  }
  return sq;
}

/* x[i] = v[i] in dtype t, for i < n. */
static void store(void *x, const double *v, size_t n, sc_dtype_t t) {
  switch (t) {
  case SC_FLOAT32: {
    float *f = x;
    for (size_t i = 0; i < n; i++) f[i] = (float)v[i];
    break;
  }
  case SC_FLOAT64:
    memcpy(x, v, n * sizeof(double));
    break;
  default: {
    uint16_t *h = x;
    for (size_t i = 0; i < n; i++)
      h[i] = t == SC_FLOAT16 ? sc_float_to_half((float)v[i]) : sc_float_to_bfloat16((float)v[i]);
  }
  }
}

/* ||v||_2 / sqrt(m) from the sum of squares sq; 0 for m == 0. */
static double rms(double sq, size_t m) {
  return m ? sqrt(sq) / sqrt((double)m) : 0.0;
}

/* Real (unpadded) elements of chunk j. */
static size_t chunk_len(const sc_onebit_t *o, int j) {
  const size_t base = (size_t)j * o->chunk;
  return base >= o->n ? 0 : (o->n - base < o->chunk ? o->n - base : o->chunk);
}

/* Phase 1's blocks: chunk j's signs of w and this rank's scale; with
 * `sub`, w keeps w - scale sign(w) (the worker residual). */
static void worker_pack(sc_onebit_t *o, double scale, int sub) {
  for (int j = 0; j < o->nranks; j++) {
    uint8_t *blk = o->send1 + (size_t)j * o->blk1;
    double *w = o->w + (size_t)j * o->chunk;
    memset(blk, 0, o->cb);
    if (sub)
      sc_sign_pack_sub_f64(blk, w, chunk_len(o, j), scale);
    else
      sc_sign_pack_f64(blk, w, chunk_len(o, j));
    memcpy(blk + o->cb, &scale, 8);
  }
}

/* SCALED on float32 in two passes over x and w instead of load's write of
 * c = w + x and worker_pack's second pass over it: the first sums c^2, the
 * second recomputes c (the same double sum), packs its signs and leaves
 * c - scale sign(c) in w. The same bits as load + worker_pack. */
static void worker_f32(sc_onebit_t *o, const float *x) {
  double sq = 0.0;
  for (size_t i = 0; i < o->n; i++) {
    const double c = o->w[i] + (double)x[i];
    sq += c * c;
  }
  const double scale = rms(sq, o->n);
  for (int j = 0; j < o->nranks; j++) {
    uint8_t *blk = o->send1 + (size_t)j * o->blk1;
    const size_t base = (size_t)j * o->chunk, m = chunk_len(o, j), full = m / 8;
    double *w = o->w + base;
    const float *xj = x + base;
    memset(blk, 0, o->cb);
    for (size_t b = 0; b < full; b++) {
      unsigned byte = 0;
      for (int k = 0; k < 8; k++) {
        const double c = w[8 * b + k] + (double)xj[8 * b + k];
        const unsigned bit = c >= 0.0;
        byte |= bit << (7 - k);
        w[8 * b + k] = c - (bit ? scale : -scale);
      }
      blk[b] = (uint8_t)byte;
    }
    for (size_t i = 8 * full; i < m; i++) {
      const double c = w[i] + (double)xj[i];
      const unsigned bit = c >= 0.0;
      blk[i / 8] |= (uint8_t)(bit << (7 - i % 8));
      w[i] = c - (bit ? scale : -scale);
    }
    memcpy(blk + o->cb, &scale, 8);
  }
}

/* acc[k] = 0 + the sum over ranks (in rank order) of +-a_i by rank i's
 * sign of element k, for k < m: one pass over acc, 8 elements a byte. */
static void server_sum(sc_onebit_t *o, size_t m) {
  const int p = o->nranks, scaled = o->mode == SC_ONEBIT_SCALED;
  const size_t full = m / 8;
  for (size_t b = 0; b < full; b++) {
    double t[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    for (int i = 0; i < p; i++) {
      const uint8_t *blk = o->recv1 + (size_t)i * o->blk1;
      double a = 1.0;
      if (scaled) memcpy(&a, blk + o->cb, 8);
      const unsigned byte = blk[b];
      for (int k = 0; k < 8; k++) t[k] += byte >> (7 - k) & 1 ? a : -a;
    }
    memcpy(o->acc + 8 * b, t, sizeof(t));
  }
  for (size_t k = 8 * full; k < m; k++) {
    double t = 0.0;
    for (int i = 0; i < p; i++) {
      const uint8_t *blk = o->recv1 + (size_t)i * o->blk1;
      double a = 1.0;
      if (scaled) memcpy(&a, blk + o->cb, 8);
      t += sc_sign_bit(blk, k) ? a : -a;
    }
    o->acc[k] = t;
  }
}

/* The server's step on chunk `me` from recv1; writes its phase-2 block. */
static void server(sc_onebit_t *o, int me, uint8_t *out) {
  const size_t m = chunk_len(o, me);
  server_sum(o, m);
  const int scaled = o->mode == SC_ONEBIT_SCALED;
  memset(out, 0, o->blk2);
  if (!scaled) { /* the vote: +1 plane, then -1 plane; neither is a tie */
    sc_sign_pack_pos_f64(out, o->acc, m);
    for (size_t k = 0; k < m; k++) o->acc[k] = -o->acc[k];
    sc_sign_pack_pos_f64(out + o->cb, o->acc, m);
    return;
  }
  const double p = (double)o->nranks;
  double sq = 0.0;
  for (size_t k = 0; k < m; k++) {
    o->sres[k] = o->acc[k] / p + o->sres[k];
    sq += o->sres[k] * o->sres[k];
  }
  const double scale = rms(sq, m);
  sc_sign_pack_sub_f64(out, o->sres, m, scale);
  memcpy(out + o->cb, &scale, 8);
}

/* x = the phase-2 result, chunk by chunk (acc as scratch). */
static void unpack_result(sc_onebit_t *o, void *x) {
  const size_t es = sc_dtype_size(o->dtype);
  for (int j = 0; j < o->nranks; j++) {
    const size_t m = chunk_len(o, j);
    const uint8_t *blk = o->recv2 + (size_t)j * o->blk2;
    void *dst = (uint8_t *)x + (size_t)j * o->chunk * es;
    if (o->mode == SC_ONEBIT_SCALED) {
      double a;
      memcpy(&a, blk + o->cb, 8);
      if (o->dtype == SC_FLOAT32) {
        sc_sign_unpack_f32(dst, blk, m, a);
        continue;
      }
      sc_sign_unpack_f64(o->acc, blk, m, a);
    } else {
      for (size_t k = 0; k < m; k++)
        o->acc[k] = (double)sc_sign_bit(blk, k) - (double)sc_sign_bit(blk + o->cb, k);
    }
    store(dst, o->acc, m, o->dtype);
  }
}

static sc_result_t run(sc_onebit_t *o, void *x, sc_comm_t *comm) {
  const int me = comm->rank;
  if (o->mode == SC_ONEBIT_SCALED && o->dtype == SC_FLOAT32) {
    worker_f32(o, x);
  } else if (o->mode == SC_ONEBIT_SCALED) {
    const double scale = rms(load(o->w, x, o->n, o->dtype, 1), o->n);
    worker_pack(o, scale, 1);
  } else {
    load(o->w, x, o->n, o->dtype, 0);
    worker_pack(o, 1.0, 0);
  }
  SC_CHECK(sc_alltoall(o->send1, o->recv1, o->blk1, SC_UINT8, comm));
  uint8_t *mine = o->recv2 + (size_t)me * o->blk2;
  server(o, me, mine);
  SC_CHECK(sc_allgather(mine, o->recv2, o->blk2, SC_UINT8, comm));
  unpack_result(o, x);
  return SC_SUCCESS;
}

/* Copies bytes between host and device on the state's stream, waited for. */
static sc_result_t stage_copy(sc_onebit_t *o, void *dst, const void *src, size_t bytes,
                              const sc_comm_t *comm) {
  SC_CHECK(o->rt->memcpy_async(dst, src, bytes, o->stream));
  SC_CHECK(o->rt->event_record(o->event, o->stream));
  return sc_dev_event_wait(o->rt, o->event, comm->cfg.timeout_ms, "sc_onebit_allreduce staging");
}

sc_result_t sc_onebit_allreduce(void *buf, sc_onebit_t *ob, sc_comm_t *comm) {
  if (!ob) return SC_ERR(SC_ERR_INVALID_ARG, "sc_onebit_allreduce: ob is NULL");
  if (!comm) return SC_ERR(SC_ERR_INVALID_ARG, "sc_onebit_allreduce: comm is NULL");
  if (comm->nranks != ob->nranks)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "sc_onebit_allreduce: the state was made for %d ranks, the communicator has "
                  "%d",
                  ob->nranks, comm->nranks);
  if (ob->n == 0) return SC_SUCCESS;
  if (!buf) return SC_ERR(SC_ERR_INVALID_ARG, "sc_onebit_allreduce: buf is NULL, n = %zu", ob->n);
  const void *bufs[1] = {buf};
  const char *names[1] = {"buf"};
  sc_mem_kind_t kind = SC_MEM_HOST;
  SC_CHECK(sc_buffers_kind("sc_onebit_allreduce", 1, bufs, names, &kind));
  if (kind == SC_MEM_HOST) return run(ob, buf, comm);
  const size_t bytes = ob->n * sc_dtype_size(ob->dtype);
  if (!ob->rt) {
    ob->rt = sc_devrt();
    if (!ob->rt) return SC_ERR(SC_ERR_INTERNAL, "sc_onebit_allreduce: device buffer, no runtime");
  }
  if (!ob->stage && !(ob->stage = malloc(bytes)))
    return SC_ERR(SC_ERR_NOMEM, "sc_onebit_allreduce: %zu staging bytes", bytes);
  if (!ob->stream) SC_CHECK(ob->rt->stream_create(&ob->stream));
  if (!ob->event) SC_CHECK(ob->rt->event_create(&ob->event));
  SC_CHECK(stage_copy(ob, ob->stage, buf, bytes, comm));
  SC_CHECK(run(ob, ob->stage, comm));
  return stage_copy(ob, buf, ob->stage, bytes, comm);
}
