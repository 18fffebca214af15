/* SPDX-License-Identifier: BSD-3-Clause */
/* Low-rank compressed all-reduce (sc_lowrank_*): PowerSGD with warm start
 * (Vogels et al.) and ACP-SGD's alternating single all-reduce, with optional
 * error feedback. The factors travel through sc_allreduce (SUM, float32 or
 * float64); everything after an all-reduce reads only reduced factors and
 * runs the fixed-order kernels of kernels/cpu/lowrank.h, so every rank gets
 * the same bits. Gradients of device memory are staged through host memory
 * (copied in, computed on the host, copied back). */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/lowrank.h"
#include "kernels/cpu/reduce.h"
#include "kernels/devrt.h"
#include "lib/base/error.h"
#include "lib/compress/compress.h"
#include "lib/core/comm.h"
#include "lib/core/device.h"

/* Elements of a half-precision gradient widened per step (on the stack). */
#define LR_WIDEN 256

struct sc_lowrank {
  size_t rows, cols, r;
  sc_dtype_t dtype;
  sc_lowrank_mode_t mode;
  int ef;
  int f64;        /* computed in double (float64 gradients), else float */
  uint64_t calls; /* completed calls: ACP-SGD's parity */
  void *pt, *qt;  /* the factors, transposed: r x rows and r x cols */
  void *mbuf;     /* rows x cols of the compute type: the residual, or the */
                  /* widened half gradient; NULL when M is the gradient */
  float *row;     /* a row of the result before narrowing to half */
  void *stage;    /* host image of a device gradient */
  void *m;        /* this call's M, between sc_lowrank_before's rounds */
  const sc_devrt_t *rt;
  void *stream, *event;
};

static void lr_free(sc_lowrank_t *lr) {
  free(lr->pt);
  free(lr->qt);
  free(lr->mbuf);
  free(lr->row);
  free(lr->stage);
  if (lr->rt) {
    if (lr->event) lr->rt->event_destroy(lr->event);
    if (lr->stream) lr->rt->stream_destroy(lr->stream);
  }
  free(lr);
}

static int lr_half(sc_dtype_t t) {
  return t == SC_FLOAT16 || t == SC_BFLOAT16;
}

sc_result_t sc_lowrank_create(size_t rows, size_t cols, sc_dtype_t dtype, int rank,
                              sc_lowrank_mode_t mode, int error_feedback, uint64_t seed,
                              sc_lowrank_t **lr) {
  static const char fn[] = "sc_lowrank_create";
  if (!lr) return SC_ERR(SC_ERR_INVALID_ARG, "%s: lr is NULL", fn);
  *lr = NULL;
  if (dtype != SC_FLOAT32 && dtype != SC_FLOAT64 && !lr_half(dtype))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: dtype %d is not a floating type", fn, (int)dtype);
  if (rank < 1) return SC_ERR(SC_ERR_INVALID_ARG, "%s: rank %d < 1", fn, rank);
  if (mode != SC_LOWRANK_POWERSGD && mode != SC_LOWRANK_ACPSGD)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: unknown mode %d", fn, (int)mode);
  const size_t cs = dtype == SC_FLOAT64 ? sizeof(double) : sizeof(float);
  if (rows != 0 && cols > SIZE_MAX / cs / rows)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: a %zu x %zu matrix overflows the address space", fn,
                  rows, cols);
  size_t r = (size_t)rank;
  if (r > rows) r = rows;
  if (r > cols) r = cols;
  sc_lowrank_t *s = calloc(1, sizeof(*s));
  if (!s) return SC_ERR(SC_ERR_NOMEM, "%s: state", fn);
  s->rows = rows;
  s->cols = cols;
  s->r = r;
  s->dtype = dtype;
  s->mode = mode;
  s->ef = error_feedback != 0;
  s->f64 = dtype == SC_FLOAT64;
  if (r > 0) {
    s->pt = malloc(r * rows * cs);
    s->qt = malloc(r * cols * cs);
    if (s->ef || lr_half(dtype)) s->mbuf = calloc(rows * cols, cs);
    if (lr_half(dtype)) s->row = malloc(cols * sizeof(float));
    if (!s->pt || !s->qt || ((s->ef || lr_half(dtype)) && !s->mbuf) ||
        (lr_half(dtype) && !s->row)) {
      lr_free(s);
      return SC_ERR(SC_ERR_NOMEM, "%s: factors and residual of a %zu x %zu matrix at rank %zu", fn,
                    rows, cols, r);
    }
    /* The first factor depends on the seed alone: the same on every rank. */
    if (s->f64) {
      sc_lr_normal_f64(s->qt, r * cols, seed);
      if (mode == SC_LOWRANK_POWERSGD) sc_lr_orth_f64(s->qt, cols, r);
    } else {
      sc_lr_normal_f32(s->qt, r * cols, seed);
      if (mode == SC_LOWRANK_POWERSGD) sc_lr_orth_f32(s->qt, cols, r);
    }
  }
  *lr = s;
  return SC_SUCCESS;
}

sc_result_t sc_lowrank_destroy(sc_lowrank_t *lr) {
  if (lr) lr_free(lr);
  return SC_SUCCESS;
}

/* The kernels on the state's compute type. */
static void lr_project(const sc_lowrank_t *s, const void *m) {
  if (s->f64)
    sc_lr_project_f64(s->pt, m, s->rows, s->cols, s->qt, s->r);
  else
    sc_lr_project_f32(s->pt, m, s->rows, s->cols, s->qt, s->r);
}

static void lr_project_t(const sc_lowrank_t *s, const void *m) {
  if (s->f64)
    sc_lr_project_t_f64(s->qt, m, s->rows, s->cols, s->pt, s->r);
  else
    sc_lr_project_t_f32(s->qt, m, s->rows, s->cols, s->pt, s->r);
}

static void lr_orth(const sc_lowrank_t *s, void *vt, size_t n) {
  if (s->f64)
    sc_lr_orth_f64(vt, n, s->r);
  else
    sc_lr_orth_f32(vt, n, s->r);
}

/* The residual keeps M minus this rank's own rank-r contribution. */
static void lr_feedback(const sc_lowrank_t *s) {
  if (!s->ef) return;
  if (s->f64)
    sc_lr_expand_f64(s->mbuf, s->rows, s->cols, s->pt, s->rows, s->qt, s->r, -1.0, 1.0);
  else
    sc_lr_expand_f32(s->mbuf, s->rows, s->cols, s->pt, s->rows, s->qt, s->r, -1.0f, 1.0f);
}

/* M = g (+ the residual), in the compute type; returns where M is. */
static void *lr_gather_m(sc_lowrank_t *s, void *g) {
  const size_t n = s->rows * s->cols;
  if (!s->mbuf) return g;
  if (s->dtype == SC_FLOAT64) {
    double *m = s->mbuf;
    const double *x = g;
    for (size_t i = 0; i < n; i++) m[i] += x[i];
  } else if (s->dtype == SC_FLOAT32) {
    float *m = s->mbuf;
    const float *x = g;
    for (size_t i = 0; i < n; i++) m[i] += x[i];
  } else {
    float *m = s->mbuf, w[LR_WIDEN];
    const uint16_t *h = g;
    for (size_t i = 0; i < n; i += LR_WIDEN) {
      const size_t c = n - i < LR_WIDEN ? n - i : LR_WIDEN;
      if (s->dtype == SC_FLOAT16)
        sc_half_to_float_array(w, h + i, c);
      else
        sc_bfloat16_to_float_array(w, h + i, c);
      if (s->ef)
        for (size_t j = 0; j < c; j++) m[i + j] += w[j];
      else
        for (size_t j = 0; j < c; j++) m[i + j] = w[j];
    }
  }
  return s->mbuf;
}

/* g = P Q^T / nranks from the reduced factors. */
static void lr_result(const sc_lowrank_t *s, void *g, int nranks) {
  if (s->f64) {
    sc_lr_expand_f64(g, s->rows, s->cols, s->pt, s->rows, s->qt, s->r, 1.0 / nranks, 0.0);
    return;
  }
  if (s->dtype == SC_FLOAT32) {
    sc_lr_expand_f32(g, s->rows, s->cols, s->pt, s->rows, s->qt, s->r, 1.0f / (float)nranks, 0.0f);
    return;
  }
  uint16_t *h = g;
  for (size_t i = 0; i < s->rows; i++) {
    sc_lr_expand_f32(s->row, 1, s->cols, (const float *)s->pt + i, s->rows, s->qt, s->r,
                     1.0f / (float)nranks, 0.0f);
    if (s->dtype == SC_FLOAT16)
      sc_float_to_half_array(h + i * s->cols, s->row, s->cols);
    else
      sc_float_to_bfloat16_array(h + i * s->cols, s->row, s->cols);
  }
}

int sc_lowrank_rounds(const sc_lowrank_t *s) {
  return s->r == 0 ? 0 : s->mode == SC_LOWRANK_POWERSGD ? 2 : 1;
}

void sc_lowrank_factor(const sc_lowrank_t *s, int k, void **factor, size_t *count,
                       sc_dtype_t *dtype) {
  /* P travels in PowerSGD's first round and ACP-SGD's even calls. */
  const int p = s->mode == SC_LOWRANK_POWERSGD ? k == 0 : s->calls % 2 == 0;
  *factor = p ? s->pt : s->qt;
  *count = s->r * (p ? s->rows : s->cols);
  *dtype = s->f64 ? SC_FLOAT64 : SC_FLOAT32;
}

void sc_lowrank_before(sc_lowrank_t *s, void *g, int k, void **factor, size_t *count,
                       sc_dtype_t *dtype) {
  if (k == 0) s->m = lr_gather_m(s, g);
  if (s->mode == SC_LOWRANK_POWERSGD && k == 0) {
    lr_project(s, s->m);
  } else if (s->mode == SC_LOWRANK_POWERSGD || s->calls % 2 == 1) {
    /* Q = M^T orth(P): PowerSGD's second round, ACP-SGD's odd calls. */
    lr_orth(s, s->pt, s->rows);
    lr_project_t(s, s->m);
    lr_feedback(s);
  } else {
    lr_orth(s, s->qt, s->cols);
    lr_project(s, s->m);
    lr_feedback(s);
  }
  sc_lowrank_factor(s, k, factor, count, dtype);
}

void sc_lowrank_finish(sc_lowrank_t *s, void *g, int nranks) {
  s->calls++;
  lr_result(s, g, nranks);
}

/* The compressed all-reduce of the host gradient g (the gradient itself or
 * its staged image); g is written only after every all-reduce succeeded. */
static sc_result_t lr_run(sc_lowrank_t *s, void *g, sc_comm_t *comm) {
  for (int k = 0; k < sc_lowrank_rounds(s); k++) {
    void *f;
    size_t n;
    sc_dtype_t dt;
    sc_lowrank_before(s, g, k, &f, &n, &dt);
    SC_CHECK(sc_allreduce(f, f, n, dt, SC_SUM, comm));
  }
  sc_lowrank_finish(s, g, comm->nranks);
  return SC_SUCCESS;
}

/* A blocking copy between the gradient on the device and its host image. */
static sc_result_t lr_copy(sc_lowrank_t *s, void *dst, const void *src, size_t bytes,
                           const sc_comm_t *comm) {
  SC_CHECK(s->rt->memcpy_async(dst, src, bytes, s->stream));
  SC_CHECK(s->rt->event_record(s->event, s->stream));
  return sc_dev_event_wait(s->rt, s->event, comm->cfg.timeout_ms, "low-rank gradient copy");
}

static sc_result_t lr_device(sc_lowrank_t *s, void *grad, sc_comm_t *comm) {
  static const char fn[] = "sc_lowrank_allreduce";
  const sc_devrt_t *rt = sc_devrt();
  if (!rt) return SC_ERR(SC_ERR_INTERNAL, "%s: device buffers but no device runtime", fn);
  if (s->rt && s->rt != rt)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: the state was used with another device runtime", fn);
  s->rt = rt;
  if (!s->stream) SC_CHECK(rt->stream_create(&s->stream));
  if (!s->event) SC_CHECK(rt->event_create(&s->event));
  const size_t bytes = s->rows * s->cols * sc_dtype_size(s->dtype);
  if (!s->stage && !(s->stage = malloc(bytes)))
    return SC_ERR(SC_ERR_NOMEM, "%s: host image of %zu bytes", fn, bytes);
  SC_CHECK(lr_copy(s, s->stage, grad, bytes, comm));
  SC_CHECK(lr_run(s, s->stage, comm));
  return lr_copy(s, grad, s->stage, bytes, comm);
}

sc_result_t sc_lowrank_allreduce(void *grad, sc_lowrank_t *lr, sc_comm_t *comm) {
  static const char fn[] = "sc_lowrank_allreduce";
  if (!lr) return SC_ERR(SC_ERR_INVALID_ARG, "%s: lr is NULL", fn);
  if (!comm) return SC_ERR(SC_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  if (lr->r == 0) return SC_SUCCESS;
  if (!grad)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: grad is NULL for a %zu x %zu matrix", fn, lr->rows,
                  lr->cols);
  const void *bufs[1] = {grad};
  const char *names[1] = {"grad"};
  sc_mem_kind_t kind = SC_MEM_HOST;
  SC_CHECK(sc_buffers_kind(fn, 1, bufs, names, &kind));
  if (kind == SC_MEM_DEVICE) return lr_device(lr, grad, comm);
  return lr_run(lr, grad, comm);
}
