/* SPDX-License-Identifier: BSD-3-Clause */
/* The device kernels on the stand-in runtime (kernels/devrt_emu.h). The
 * arguments are checked on the calling thread (so errors come back with a
 * detail); the work runs later on the stream's thread, on host views
 * translated at enqueue time. */
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/reduce.h"
#include "kernels/cpu/topk.h"
#include "kernels/cpu/topk_keys.h"
#include "kernels/devrt_emu.h"
#include "kernels/sym_pack.h"
#include "lib/base/clock.h"
#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/base/log.h"

sc_result_t sc_emu_view(const sc_devrt_t *rt, const void *p, size_t bytes, const char *fn,
                        const char *name, void **out) {
  *out = NULL;
  if (bytes == 0) return SC_SUCCESS;
  if (!p)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: %s is NULL with %zu bytes to use", fn, name, bytes);
  void *h = rt->host_view(p);
  if (!h)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "%s: %s (%p) is neither device memory nor pinned memory of the stand-in", fn,
                  name, p);
  int dev;
  if (rt->pointer_device(p, &dev)) {
    void *base;
    size_t size;
    SC_CHECK(rt->mem_range(p, &base, &size));
    size_t off = (size_t)((const char *)p - (const char *)base);
    if (off > size || bytes > size - off)
      return SC_ERR(SC_ERR_INVALID_ARG,
                    "%s: %s: %zu bytes at %p run past its device allocation (%zu bytes left)", fn,
                    name, bytes, p, off > size ? 0 : size - off);
  }
  *out = h;
  return SC_SUCCESS;
}

/* Elements of es bytes from p to the end of its allocation (pinned memory:
 * unknown, no bound). */
static size_t room(const sc_devrt_t *rt, const void *p, size_t es) {
  int dev;
  void *base;
  size_t size;
  if (!rt->pointer_device(p, &dev) || rt->mem_range(p, &base, &size) != SC_SUCCESS) return SIZE_MAX;
  size_t off = (size_t)((const char *)p - (const char *)base);
  return off > size ? 0 : (size - off) / es;
}

static sc_result_t float_size(const char *fn, sc_dtype_t dtype, size_t *es) {
  if (!sc_topk_ops(dtype))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: dtype %d is not a float type", fn, (int)dtype);
  *es = sc_dtype_size(dtype);
  return SC_SUCCESS;
}

/* ---- reduce ---- */

typedef struct reduce_args {
  void *dst;
  const void *a, *b;
  size_t count;
  int dtype, op, nranks;
} reduce_args_t;

static void run_reduce(void *p) {
  const reduce_args_t *r = p;
  sc_reduce_kernel((sc_dtype_t)r->dtype, (sc_redop_t)r->op, r->dst, r->a, r->b, r->count);
}

static void run_avg(void *p) {
  const reduce_args_t *r = p;
  sc_avg_finalize((sc_dtype_t)r->dtype, r->dst, r->count, r->nranks);
}

sc_result_t sc_emu_reduce(const sc_devrt_t *rt, void *dst, const void *a, const void *b,
                          size_t count, sc_dtype_t dtype, sc_redop_t op, void *stream) {
  const char *fn = "sc_dev_reduce";
  size_t es = sc_dtype_size(dtype);
  if (es == 0) return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid dtype %d", fn, (int)dtype);
  if ((unsigned)op > SC_AVG) return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid op %d", fn, (int)op);
  if (count == 0) return SC_SUCCESS;
  reduce_args_t r = {.count = count, .dtype = (int)dtype, .op = (int)op};
  void *va, *vb;
  SC_CHECK(sc_emu_view(rt, dst, count * es, fn, "dst", &r.dst));
  SC_CHECK(sc_emu_view(rt, a, count * es, fn, "a", &va));
  SC_CHECK(sc_emu_view(rt, b, count * es, fn, "b", &vb));
  r.a = va;
  r.b = vb;
  return rt->launch_host(stream, run_reduce, &r, sizeof r);
}

sc_result_t sc_emu_avg_finalize(const sc_devrt_t *rt, void *buf, size_t count, sc_dtype_t dtype,
                                int nranks, void *stream) {
  const char *fn = "sc_dev_avg_finalize";
  size_t es = sc_dtype_size(dtype);
  if (es == 0) return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid dtype %d", fn, (int)dtype);
  if (count == 0 || nranks <= 1) return SC_SUCCESS;
  reduce_args_t r = {.count = count, .dtype = (int)dtype, .nranks = nranks};
  SC_CHECK(sc_emu_view(rt, buf, count * es, fn, "buf", &r.dst));
  return rt->launch_host(stream, run_avg, &r, sizeof r);
}

/* ---- symmetric packing ---- */

typedef struct sym_args {
  void *dst;
  const void *src;
  size_t d, es;
  int unpack;
} sym_args_t;

static void run_sym(void *p) {
  const sym_args_t *a = p;
  if (a->unpack)
    sc_sym_unpack(a->dst, a->src, a->d, a->es);
  else
    sc_sym_pack(a->dst, a->src, a->d, a->es);
}

sc_result_t sc_emu_sym(const sc_devrt_t *rt, int unpack, void *dst, const void *src, size_t d,
                       size_t es, void *stream) {
  const char *fn = unpack ? "sc_dev_sym_unpack" : "sc_dev_sym_pack";
  if (d == 0) return SC_SUCCESS;
  if (es != 1 && es != 2 && es != 4 && es != 8)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: element size %zu", fn, es);
  size_t full = d * d * es, packed = (size_t)sc_sym_packed_count(d) * es;
  sym_args_t a = {.d = d, .es = es, .unpack = unpack};
  void *vs;
  SC_CHECK(sc_emu_view(rt, dst, unpack ? full : packed, fn, "dst", &a.dst));
  SC_CHECK(sc_emu_view(rt, src, unpack ? packed : full, fn, "src", &vs));
  a.src = vs;
  return rt->launch_host(stream, run_sym, &a, sizeof a);
}

/* ---- top-k ---- */

/* The workspace: the stream's thread writes the count, then the call's
 * token; the caller polls for its token (a token per call, so a stale
 * answer from an earlier call is never taken for this one's). */
typedef struct topk_box {
  uint64_t token;
  uint64_t nnz;
  int32_t status;
} topk_box_t;
_Static_assert(sizeof(topk_box_t) <= SC_EMU_TOPK_WORKSPACE, "box fits the workspace");

typedef struct topk_args {
  const void *x;
  size_t n, k;
  int dtype, method;
  uint32_t *idx;
  void *val;
  topk_box_t *box;
  uint64_t token;
} topk_args_t;

static void run_topk(void *p) {
  const topk_args_t *t = p;
  size_t nnz = 0;
  sc_dtype_t dtype = (sc_dtype_t)t->dtype;
  sc_result_t r = t->method == SC_SELECT_GAUSSIAN
                      ? sc_topk_gaussian_indices(t->x, t->n, dtype, t->k, t->idx, &nnz)
                  : t->method == SC_SELECT_MSTOPK
                      ? sc_topk_mstopk_indices(t->x, t->n, dtype, t->k, t->idx, &nnz)
                      : sc_topk_exact_indices(t->x, t->n, dtype, t->k, t->idx, &nnz);
  if (r == SC_SUCCESS && t->val) sc_topk_gather_values(t->x, dtype, t->idx, nnz, t->val);
  t->box->nnz = r == SC_SUCCESS ? nnz : 0;
  t->box->status = (int32_t)r;
  __atomic_store_n(&t->box->token, t->token, __ATOMIC_RELEASE);
}

static long topk_timeout_ms(void) {
  static atomic_long cached;
  long v = atomic_load_explicit(&cached, memory_order_relaxed);
  if (v == 0) {
    if (sc_config_long("SC_TIMEOUT_MS", 1, 24L * 3600 * 1000, &v) != SC_SUCCESS) v = 300000;
    atomic_store_explicit(&cached, v, memory_order_relaxed);
  }
  return v;
}

sc_result_t sc_emu_topk(const sc_devrt_t *rt, const void *x, size_t n, sc_dtype_t dtype, size_t k,
                        sc_select_t method, uint32_t *indices, void *values, size_t *nnz,
                        void *workspace, size_t workspace_bytes, void *stream) {
  const char *fn = "sc_dev_topk";
  static atomic_uint_fast64_t tokens;
  size_t es = sc_dtype_size(dtype), m = k < n ? k : n;
  topk_args_t t = {.n = n, .k = k, .dtype = (int)dtype, .method = (int)method};
  void *vx, *vbox;
  *nnz = 0;
  if (workspace_bytes < SC_EMU_TOPK_WORKSPACE || ((uintptr_t)workspace & 7))
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "%s: workspace %p of %zu bytes: sc_dev_topk_workspace_size gives %d, 8-aligned",
                  fn, workspace, workspace_bytes, SC_EMU_TOPK_WORKSPACE);
  SC_CHECK(sc_emu_view(rt, x, n * es, fn, "x", &vx));
  /* As sc_topk: the selection uses 2 min(k, n) entries as workspace. */
  SC_CHECK(sc_emu_view(rt, indices, 2 * m * sizeof(uint32_t), fn, "indices (2 min(k, n) entries)",
                       (void **)&t.idx));
  if (values)
    SC_CHECK(sc_emu_view(rt, values, 2 * m * es, fn, "values (2 min(k, n) entries)", &t.val));
  SC_CHECK(sc_emu_view(rt, workspace, SC_EMU_TOPK_WORKSPACE, fn, "workspace", &vbox));
  t.x = vx;
  t.box = vbox;
  t.token = atomic_fetch_add(&tokens, 1) + 1;
  SC_CHECK(rt->launch_host(stream, run_topk, &t, sizeof t));
  long timeout = topk_timeout_ms();
  int64_t deadline = sc_now_ms() + timeout;
  for (unsigned polls = 0; __atomic_load_n(&t.box->token, __ATOMIC_ACQUIRE) != t.token; polls++) {
    if (sc_now_ms() >= deadline)
      return SC_ERR(SC_ERR_TIMEOUT, "%s: the selection on the stream did not finish in %ld ms", fn,
                    timeout);
    if (polls < 64) {
      sched_yield();
    } else {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, NULL);
    }
  }
  if (t.box->status != SC_SUCCESS)
    return SC_ERR((sc_result_t)t.box->status, "%s: the selection of %zu of %zu failed", fn, k, n);
  *nnz = (size_t)t.box->nnz;
  return SC_SUCCESS;
}

/* ---- sparse gather and scatter, error feedback ---- */

typedef struct sparse_args {
  void *dst;
  const void *src;
  const uint32_t *idx;
  const uint8_t *survived;
  size_t nnz, n;
  int dtype, divisor, zero_first, restore;
} sparse_args_t;

static void copy_elem(void *dst, size_t i, const void *src, size_t j, size_t es) {
  memcpy((char *)dst + i * es, (const char *)src + j * es, es);
}

static void bad_index(const char *fn, uint32_t idx, size_t n) {
  /* A GPU would fault on this access; the stand-in skips it and says so. */
  SC_WARN(SC_SUBSYS_COLL, "%s on the stand-in: index %u outside the %zu entries: skipped", fn, idx,
          n);
}

static void run_gather(void *p) {
  const sparse_args_t *s = p;
  size_t es = sc_dtype_size((sc_dtype_t)s->dtype);
  for (size_t j = 0; j < s->nnz; j++) {
    if (s->idx[j] >= s->n)
      bad_index("sc_dev_sparse_gather", s->idx[j], s->n);
    else
      copy_elem(s->dst, j, s->src, s->idx[j], es);
  }
}

/* v / d as sc_gtopk_allreduce averages: float32 arithmetic, float64 for
 * float64, fp16/bf16 rounded to nearest even. */
static void divide_elem(sc_dtype_t dtype, void *dst, size_t i, const void *src, size_t j, int d) {
  switch (dtype) {
  case SC_FLOAT16:
    ((uint16_t *)dst)[i] =
        sc_float_to_half(sc_half_to_float(((const uint16_t *)src)[j]) / (float)d);
    break;
  case SC_BFLOAT16:
    ((uint16_t *)dst)[i] =
        sc_float_to_bfloat16(sc_bfloat16_to_float(((const uint16_t *)src)[j]) / (float)d);
    break;
  case SC_FLOAT32:
    ((float *)dst)[i] = ((const float *)src)[j] / (float)d;
    break;
  default:
    ((double *)dst)[i] = ((const double *)src)[j] / (double)d;
    break;
  }
}

static void run_scatter(void *p) {
  const sparse_args_t *s = p;
  sc_dtype_t dtype = (sc_dtype_t)s->dtype;
  size_t es = sc_dtype_size(dtype);
  if (s->zero_first) memset(s->dst, 0, s->n * es);
  for (size_t j = 0; j < s->nnz; j++) {
    uint32_t i = s->idx[j];
    if (i >= s->n)
      bad_index(s->restore ? "sc_dev_ef_restore" : "sc_dev_sparse_scatter", i, s->n);
    else if (s->restore && s->survived && s->survived[j])
      continue;
    else if (s->divisor == 1)
      copy_elem(s->dst, i, s->src, j, es);
    else
      divide_elem(dtype, s->dst, i, s->src, j, s->divisor);
  }
}

static void run_clear(void *p) {
  const sparse_args_t *s = p;
  size_t es = sc_dtype_size((sc_dtype_t)s->dtype);
  for (size_t j = 0; j < s->nnz; j++) {
    if (s->idx[j] >= s->n)
      bad_index("sc_dev_ef_clear", s->idx[j], s->n);
    else
      memset((char *)s->dst + (size_t)s->idx[j] * es, 0, es);
  }
}

sc_result_t sc_emu_sparse_gather(const sc_devrt_t *rt, void *values, const void *x,
                                 const uint32_t *indices, size_t nnz, sc_dtype_t dtype,
                                 void *stream) {
  const char *fn = "sc_dev_sparse_gather";
  size_t es = 0;
  SC_CHECK(float_size(fn, dtype, &es));
  if (nnz == 0) return SC_SUCCESS;
  sparse_args_t s = {.nnz = nnz, .dtype = (int)dtype};
  void *vx, *vi;
  SC_CHECK(sc_emu_view(rt, values, nnz * es, fn, "values", &s.dst));
  SC_CHECK(sc_emu_view(rt, indices, nnz * sizeof(uint32_t), fn, "indices", &vi));
  SC_CHECK(sc_emu_view(rt, x, es, fn, "x", &vx));
  s.src = vx;
  s.idx = vi;
  s.n = room(rt, x, es);
  return rt->launch_host(stream, run_gather, &s, sizeof s);
}

/* The checks shared by scatter, clear and restore on a residual of n
 * entries (clear and restore: n from the allocation). */
static sc_result_t sparse_views(const sc_devrt_t *rt, const char *fn, void *dst, size_t n,
                                const uint32_t *indices, const void *values, size_t nnz, size_t es,
                                sparse_args_t *s) {
  void *vi, *vv;
  SC_CHECK(sc_emu_view(rt, dst, n * es, fn, "dst", &s->dst));
  SC_CHECK(sc_emu_view(rt, indices, nnz * sizeof(uint32_t), fn, "indices", &vi));
  SC_CHECK(sc_emu_view(rt, values, values ? nnz * es : 0, fn, "values", &vv));
  s->idx = vi;
  s->src = vv;
  s->n = n;
  s->nnz = nnz;
  return SC_SUCCESS;
}

sc_result_t sc_emu_sparse_scatter(const sc_devrt_t *rt, void *dst, size_t n,
                                  const uint32_t *indices, const void *values, size_t nnz,
                                  sc_dtype_t dtype, int zero_first, int divisor, void *stream) {
  const char *fn = "sc_dev_sparse_scatter";
  size_t es = 0;
  SC_CHECK(float_size(fn, dtype, &es));
  if (divisor < 1) return SC_ERR(SC_ERR_INVALID_ARG, "%s: divisor %d < 1", fn, divisor);
  if (nnz > n) return SC_ERR(SC_ERR_INVALID_ARG, "%s: nnz %zu > n %zu", fn, nnz, n);
  if (nnz && !values) return SC_ERR(SC_ERR_INVALID_ARG, "%s: values is NULL", fn);
  if (n == 0 || (nnz == 0 && !zero_first)) return SC_SUCCESS;
  sparse_args_t s = {.dtype = (int)dtype, .divisor = divisor, .zero_first = zero_first};
  SC_CHECK(sparse_views(rt, fn, dst, n, indices, values, nnz, es, &s));
  return rt->launch_host(stream, run_scatter, &s, sizeof s);
}

sc_result_t sc_emu_ef_accumulate(const sc_devrt_t *rt, void *residual, const void *grad, size_t n,
                                 sc_dtype_t dtype, void *stream) {
  const char *fn = "sc_dev_ef_accumulate";
  size_t es = 0;
  SC_CHECK(float_size(fn, dtype, &es));
  if (n == 0) return SC_SUCCESS;
  reduce_args_t r = {.count = n, .dtype = (int)dtype, .op = SC_SUM};
  void *vg;
  SC_CHECK(sc_emu_view(rt, residual, n * es, fn, "residual", &r.dst));
  SC_CHECK(sc_emu_view(rt, grad, n * es, fn, "grad", &vg));
  r.a = r.dst;
  r.b = vg;
  return rt->launch_host(stream, run_reduce, &r, sizeof r);
}

sc_result_t sc_emu_ef_clear(const sc_devrt_t *rt, void *residual, const uint32_t *indices,
                            size_t nnz, sc_dtype_t dtype, void *stream) {
  const char *fn = "sc_dev_ef_clear";
  size_t es = 0;
  SC_CHECK(float_size(fn, dtype, &es));
  if (nnz == 0) return SC_SUCCESS;
  sparse_args_t s = {.dtype = (int)dtype};
  SC_CHECK(sparse_views(rt, fn, residual, 0, indices, NULL, nnz, es, &s));
  SC_CHECK(sc_emu_view(rt, residual, es, fn, "residual", &s.dst));
  s.n = room(rt, residual, es);
  return rt->launch_host(stream, run_clear, &s, sizeof s);
}

sc_result_t sc_emu_ef_restore(const sc_devrt_t *rt, void *residual, const uint32_t *indices,
                              const void *values, const uint8_t *survived, size_t nnz,
                              sc_dtype_t dtype, void *stream) {
  const char *fn = "sc_dev_ef_restore";
  size_t es = 0;
  SC_CHECK(float_size(fn, dtype, &es));
  if (nnz == 0) return SC_SUCCESS;
  if (!values) return SC_ERR(SC_ERR_INVALID_ARG, "%s: values is NULL", fn);
  sparse_args_t s = {.dtype = (int)dtype, .divisor = 1, .restore = 1};
  SC_CHECK(sparse_views(rt, fn, residual, 0, indices, values, nnz, es, &s));
  void *vs;
  SC_CHECK(sc_emu_view(rt, survived, survived ? nnz : 0, fn, "survived", &vs));
  SC_CHECK(sc_emu_view(rt, residual, es, fn, "residual", &s.dst));
  s.survived = vs;
  s.n = room(rt, residual, es);
  return rt->launch_host(stream, run_scatter, &s, sizeof s);
}
