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
 * so that a reference can repeat it bit for bit. Each side keeps the value
 * whose signs it last sent and that value's scale, and forms the residual
 * from them when the next call reads it (sc_sign_residual): one pass over
 * the worker's n doubles per call, and one over the server's chunk.
 * Device buffers are staged through host memory of the state's. */
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
  double *w;              /* npad (SCALED): c of the last call, its residual pending */
  double wa;              /* the scale sent with w's signs */
  double *sres;           /* chunk (SCALED): the server's s of the last call */
  double sb;              /* the scale sent with sres's signs */
  double *luts;           /* nranks * 64: each rank's sc_sign_lut4_f64 of its scale */
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
  free(ob->luts);
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
  const int scaled = mode == SC_ONEBIT_SCALED;
  o->w = calloc(scaled && o->npad ? o->npad : 1, sizeof(double));
  o->sres = calloc(scaled && o->chunk ? o->chunk : 1, sizeof(double));
  o->luts = calloc(scaled ? 64 * p : 1, sizeof(double));
  o->send1 = calloc(p, o->blk1);
  o->recv1 = calloc(p, o->blk1);
  o->recv2 = calloc(p, o->blk2 ? o->blk2 : 1);
  if (!o->w || !o->sres || !o->luts || !o->send1 || !o->recv1 || !o->recv2) {
    sc_onebit_destroy(o);
    return SC_ERR(SC_ERR_NOMEM, "sc_onebit_create: state for n = %zu on %d ranks", n, comm->nranks);
  }
  *ob = o;
  return SC_SUCCESS;
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

/* fp16/bf16 go through float32 blocks of this many elements (a multiple of
 * 8, so that each block's signs start on a byte). */
enum { HALF_BLOCK = 256 };

static void half_block(float *f, const uint16_t *h, size_t len, sc_dtype_t t) {
  if (t == SC_FLOAT16)
    sc_half_to_float_array(f, h, len);
  else
    sc_bfloat16_to_float_array(f, h, len);
}

/* Chunk j of the worker step into blk's signs: SCALED forms c = residual +
 * x in w (adding c^2 to *sq), MAJORITY takes the signs of x. */
static void worker_chunk(sc_onebit_t *o, uint8_t *blk, const void *x, size_t base, size_t m,
                         double *sq) {
  const int scaled = o->mode == SC_ONEBIT_SCALED;
  double *w = o->w + base;
  switch (o->dtype) {
  case SC_FLOAT32:
    if (scaled)
      sc_sign_ef_f32(blk, w, (const float *)x + base, m, o->wa, sq);
    else
      sc_sign_pack_f32(blk, (const float *)x + base, m);
    return;
  case SC_FLOAT64:
    if (scaled)
      sc_sign_ef_f64(blk, w, (const double *)x + base, m, o->wa, sq);
    else
      sc_sign_pack_f64(blk, (const double *)x + base, m);
    return;
  default: {
    const uint16_t *h = (const uint16_t *)x + base;
    float f[HALF_BLOCK];
    for (size_t i = 0; i < m; i += HALF_BLOCK) {
      const size_t len = m - i < HALF_BLOCK ? m - i : HALF_BLOCK;
      half_block(f, h + i, len, o->dtype);
      if (scaled)
        sc_sign_ef_f32(blk + i / 8, w + i, f, len, o->wa, sq);
      else
        sc_sign_pack_f32(blk + i / 8, f, len);
    }
  }
  }
}

/* Phase 1's blocks: chunk j's signs and this rank's scale (1 for MAJORITY). */
static void worker(sc_onebit_t *o, const void *x) {
  double sq = 0.0;
  for (int j = 0; j < o->nranks; j++) {
    uint8_t *blk = o->send1 + (size_t)j * o->blk1;
    const size_t m = chunk_len(o, j), nb = sc_sign_bytes(m);
    worker_chunk(o, blk, x, (size_t)j * o->chunk, m, &sq);
    memset(blk + nb, 0, o->cb - nb);
  }
  const double scale = o->mode == SC_ONEBIT_SCALED ? rms(sq, o->n) : 1.0;
  for (int j = 0; j < o->nranks; j++) memcpy(o->send1 + (size_t)j * o->blk1 + o->cb, &scale, 8);
  o->wa = scale;
}

/* The server's step on chunk `me` from recv1; writes its phase-2 block. */
static void server(sc_onebit_t *o, int me, uint8_t *out) {
  const size_t m = chunk_len(o, me), nb = sc_sign_bytes(m);
  if (o->mode != SC_ONEBIT_SCALED) { /* the vote: +1 plane, then -1 plane */
    sc_sign_vote(out, out + o->cb, o->recv1, o->blk1, o->nranks, m);
    memset(out + nb, 0, o->cb - nb);
    memset(out + o->cb + nb, 0, o->cb - nb);
    return;
  }
  for (int i = 0; i < o->nranks; i++) {
    double a;
    memcpy(&a, o->recv1 + (size_t)i * o->blk1 + o->cb, 8);
    sc_sign_lut4_f64(o->luts + 64 * (size_t)i, a);
  }
  double sq = 0.0;
  sc_sign_sum_ef(out, o->sres, o->recv1, o->blk1, o->luts, o->nranks, m, o->sb, &sq);
  memset(out + nb, 0, o->cb - nb);
  const double scale = rms(sq, m);
  memcpy(out + o->cb, &scale, 8);
  o->sb = scale;
}

/* dst[k] = vals[1 + bit k of pos - bit k of neg] (neg NULL: vals[1 + 2 bit
 * - 1]) in dtype t, for k < m: the generic unpacking. */
static void unpack_vals(void *dst, const uint8_t *pos, const uint8_t *neg, size_t m,
                        const double vals[3], sc_dtype_t t) {
  for (size_t k = 0; k < m; k++) {
    const int v = neg ? sc_sign_bit(pos, k) - sc_sign_bit(neg, k) : 2 * sc_sign_bit(pos, k) - 1;
    const double d = vals[1 + v];
    switch (t) {
    case SC_FLOAT32:
      ((float *)dst)[k] = (float)d;
      break;
    case SC_FLOAT64:
      ((double *)dst)[k] = d;
      break;
    case SC_FLOAT16:
      ((uint16_t *)dst)[k] = sc_float_to_half((float)d);
      break;
    default:
      ((uint16_t *)dst)[k] = sc_float_to_bfloat16((float)d);
    }
  }
}

/* x = the phase-2 result, chunk by chunk. */
static void unpack_result(sc_onebit_t *o, void *x) {
  const size_t es = sc_dtype_size(o->dtype);
  for (int j = 0; j < o->nranks; j++) {
    const size_t m = chunk_len(o, j);
    const uint8_t *blk = o->recv2 + (size_t)j * o->blk2;
    void *dst = (uint8_t *)x + (size_t)j * o->chunk * es;
    if (o->mode != SC_ONEBIT_SCALED) {
      const double vals[3] = {-1.0, 0.0, 1.0};
      unpack_vals(dst, blk, blk + o->cb, m, vals, o->dtype);
      continue;
    }
    double a;
    memcpy(&a, blk + o->cb, 8);
    if (o->dtype == SC_FLOAT32) {
      sc_sign_unpack_f32(dst, blk, m, a);
    } else if (o->dtype == SC_FLOAT64) {
      sc_sign_unpack_f64(dst, blk, m, a);
    } else {
      const double vals[3] = {-a, 0.0, a};
      unpack_vals(dst, blk, NULL, m, vals, o->dtype);
    }
  }
}

static sc_result_t run(sc_onebit_t *o, void *x, sc_comm_t *comm) {
  const int me = comm->rank;
  worker(o, x);
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
