/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_lowrank_allreduce (PowerSGD and ACP-SGD) across ranks, every dtype:
 * - every rank gets the same bits (hashes all-gathered);
 * - gradients whose average Mbar has rank <= r (integer outer products,
 *   exact in every dtype) come back as Mbar: PowerSGD's first result is
 *   U U^T Mbar with U spanning Mbar Q, which is Mbar's column space;
 *   ACP-SGD's second, U U^T Mbar with U spanning Mbar V;
 * - full-rank gradients, checks that need no knowledge of the random factor
 *   (float32 and float64): PowerSGD's first result R has rank r and
 *   R = U U^T Mbar for U an orthonormal basis of R's column space; ACP-SGD's
 *   first, R = Mbar V V^T for V one of R's row space; the references and
 *   bases are computed here in double (pivoted Gram-Schmidt);
 * - error feedback: the mean of 100 results for a constant gradient per
 *   rank approaches Mbar as 1/t (errors printed at 25, 50, 100, decreasing,
 *   the last well below the error without feedback, which stays at the
 *   rank-r truncation level);
 * - argument errors.
 * --device: gradients in device memory (the stand-in's or CUDA's), staged by
 * the library; --quick: fewer shapes. Run under sc-run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/reduce.h"
#include "kernels/devrt.h"
#include "test/multi/mr_common.h"

static sc_comm_t *comm;
static const sc_devrt_t *rt; /* --device */
static void *stream, *event;

static void dev_sync(void) {
  if (rt->event_record(event, stream) != SC_SUCCESS ||
      sc_dev_event_wait(rt, event, 60000, "test copy") != SC_SUCCESS)
    mr_fail("a device copy failed: %s", sc_last_error());
}

static const sc_dtype_t dtypes[] = {SC_FLOAT16, SC_BFLOAT16, SC_FLOAT32, SC_FLOAT64};

static size_t esize(sc_dtype_t dt) {
  return sc_dtype_size(dt);
}

static void store(void *g, size_t x, sc_dtype_t dt, double v) {
  switch (dt) {
  case SC_FLOAT16:
    ((uint16_t *)g)[x] = sc_float_to_half((float)v);
    break;
  case SC_BFLOAT16:
    ((uint16_t *)g)[x] = sc_float_to_bfloat16((float)v);
    break;
  case SC_FLOAT32:
    ((float *)g)[x] = (float)v;
    break;
  default:
    ((double *)g)[x] = v;
  }
}

static double load(const void *g, size_t x, sc_dtype_t dt) {
  switch (dt) {
  case SC_FLOAT16:
    return sc_half_to_float(((const uint16_t *)g)[x]);
  case SC_BFLOAT16:
    return sc_bfloat16_to_float(((const uint16_t *)g)[x]);
  case SC_FLOAT32:
    return ((const float *)g)[x];
  default:
    return ((const double *)g)[x];
  }
}

/* Rank r's gradient entry (i, j). lowrank > 0: sum over t < lowrank of
 * a(r, t, i) b(t, j), small integers (exact in every dtype), so that the
 * average has rank <= lowrank; 0: an integer in [-8, 8] from a hash. */
static double grad_entry(int r, size_t i, size_t j, int lowrank) {
  if (lowrank) {
    double s = 0;
    for (int t = 0; t < lowrank; t++) {
      const int a = (int)((r * 7u + (unsigned)t * 13u + i * 5u + i * i) % 7u) - 3;
      const int b = (int)(((unsigned)t * 11u + j * 3u + j * j * (unsigned)(t + 1) + 1u) % 7u) - 3;
      s += a * b;
    }
    return s;
  }
  uint64_t h = (uint64_t)r * 0x9e3779b97f4a7c15ull ^ (i * 0xbf58476d1ce4e5b9ull) ^ (j + 1) * 1337;
  h ^= h >> 29;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 32;
  return (double)(int)(h % 17) - 8;
}

static void mbar_of(double *mb, size_t rows, size_t cols, int lowrank) {
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < cols; j++) {
      double s = 0;
      for (int r = 0; r < mr_nranks; r++) s += grad_entry(r, i, j, lowrank);
      mb[i * cols + j] = s / mr_nranks;
    }
}

/* One call on this rank's gradient g (host image, of dt), through device
 * memory under --device. */
static sc_result_t call(void *g, size_t bytes, sc_lowrank_t *lr) {
  if (!rt) return sc_lowrank_allreduce(g, lr, comm);
  void *d = NULL;
  if (rt->malloc_device(&d, bytes ? bytes : 1) != SC_SUCCESS) {
    mr_fail("no device memory");
    return SC_ERR_NOMEM;
  }
  if (bytes && rt->memcpy_async(d, g, bytes, stream) != SC_SUCCESS) mr_fail("upload failed");
  dev_sync();
  sc_result_t res = sc_lowrank_allreduce(d, lr, comm);
  if (bytes && rt->memcpy_async(g, d, bytes, stream) != SC_SUCCESS) mr_fail("download failed");
  dev_sync();
  rt->free_device(d);
  return res;
}

/* Every rank holds the same bytes. */
static void same_bits(const void *buf, size_t bytes, const char *what) {
  uint64_t h = 1469598103934665603ull;
  for (size_t x = 0; x < bytes; x++) h = (h ^ ((const uint8_t *)buf)[x]) * 1099511628211ull;
  uint64_t *all = malloc((size_t)mr_nranks * sizeof(uint64_t));
  MR_OK(sc_allgather(&h, all, 1, SC_UINT64, comm));
  mr_checks++;
  for (int r = 0; r < mr_nranks; r++)
    if (all[r] != h) {
      mr_fail("%s: rank %d's result differs from rank %d's", what, r, mr_rank);
      break;
    }
  free(all);
}

/* Pivoted Gram-Schmidt on the nv vectors of length len at vecs (nv x len,
 * overwritten): the k most significant directions into basis (k x len).
 * Returns what is left of the largest vector after k steps. */
static double pivoted_basis(double *vecs, size_t nv, size_t len, size_t k, double *basis) {
  for (size_t s = 0; s < k; s++) {
    size_t best = 0;
    double bn = -1;
    for (size_t v = 0; v < nv; v++) {
      double n = 0;
      for (size_t x = 0; x < len; x++) n += vecs[v * len + x] * vecs[v * len + x];
      if (n > bn) bn = n, best = v;
    }
    double *u = basis + s * len;
    const double inv = bn > 0 ? 1 / sqrt(bn) : 0;
    for (size_t x = 0; x < len; x++) u[x] = vecs[best * len + x] * inv;
    for (int pass = 0; pass < 2; pass++)
      for (size_t v = 0; v < nv; v++) {
        double d = 0;
        for (size_t x = 0; x < len; x++) d += vecs[v * len + x] * u[x];
        for (size_t x = 0; x < len; x++) vecs[v * len + x] -= d * u[x];
      }
  }
  double left = 0;
  for (size_t v = 0; v < nv; v++) {
    double n = 0;
    for (size_t x = 0; x < len; x++) n += vecs[v * len + x] * vecs[v * len + x];
    left = fmax(left, sqrt(n));
  }
  return left;
}

static double max_abs(const double *a, size_t n) {
  double m = 0;
  for (size_t x = 0; x < n; x++) m = fmax(m, fabs(a[x]));
  return m;
}

/* R = U U^T Mbar (cols_space) or R = Mbar V V^T, with the basis from R's own
 * column or row space, of rank r: within tol of max |Mbar|. */
static void check_projection(const double *res, const double *mb, size_t rows, size_t cols,
                             size_t r, int col_space, double tol, const char *what) {
  const size_t len = col_space ? rows : cols, nv = col_space ? cols : rows;
  double *vecs = malloc(nv * len * sizeof(double)), *u = malloc(r * len * sizeof(double));
  for (size_t v = 0; v < nv; v++)
    for (size_t x = 0; x < len; x++)
      vecs[v * len + x] = col_space ? res[x * cols + v] : res[v * cols + x];
  const double scale = max_abs(mb, rows * cols) * sqrt((double)(rows + cols));
  const double left = pivoted_basis(vecs, nv, len, r, u);
  mr_checks++;
  if (left > tol * scale) mr_fail("%s: the result has rank > %zu (%.3g left)", what, r, left);
  double err = 0;
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < cols; j++) {
      double ref = 0;
      for (size_t k = 0; k < r; k++) {
        double c = 0; /* (U^T Mbar)[k, j] or (Mbar V)[i, k] */
        if (col_space) {
          for (size_t x = 0; x < rows; x++) c += u[k * len + x] * mb[x * cols + j];
          ref += u[k * len + i] * c;
        } else {
          for (size_t x = 0; x < cols; x++) c += mb[i * cols + x] * u[k * len + x];
          ref += c * u[k * len + j];
        }
      }
      err = fmax(err, fabs(res[i * cols + j] - ref));
    }
  mr_checks++;
  if (err > tol * scale)
    mr_fail("%s: off the projection by %.3g (tolerance %.3g)", what, err, tol * scale);
  /* Not the trivial projection: a rank-r result of a full-rank Mbar is
   * nonzero. */
  mr_checks++;
  if (max_abs(res, rows * cols) == 0) mr_fail("%s: the result is zero", what);
  free(vecs);
  free(u);
}

static double tol_of(sc_dtype_t dt) {
  return dt == SC_FLOAT16 ? 4e-3 : dt == SC_BFLOAT16 ? 3e-2 : dt == SC_FLOAT32 ? 1e-4 : 1e-10;
}

/* The exact and projection checks of one shape, dtype and mode. */
static void one(size_t rows, size_t cols, int rank, sc_dtype_t dt, sc_lowrank_mode_t mode,
                int lowrank, uint64_t seed) {
  char what[160];
  snprintf(what, sizeof what, "%s %zux%zu rank %d %s %s", mode ? "acpsgd" : "powersgd", rows, cols,
           rank, mr_dtype_names[dt], lowrank ? "low-rank" : "full-rank");
  const size_t n = rows * cols, bytes = n * esize(dt);
  size_t r = (size_t)rank;
  if (r > rows) r = rows;
  if (r > cols) r = cols;
  void *g = malloc(bytes ? bytes : 1);
  double *mb = malloc((n ? n : 1) * sizeof(double)), *res = malloc((n ? n : 1) * sizeof(double));
  mbar_of(mb, rows, cols, lowrank);
  sc_lowrank_t *lr = NULL;
  MR_OK(sc_lowrank_create(rows, cols, dt, rank, mode, 0, seed, &lr));
  for (int c = 0; c < 2; c++) {
    for (size_t i = 0; i < rows; i++)
      for (size_t j = 0; j < cols; j++)
        store(g, i * cols + j, dt, grad_entry(mr_rank, i, j, lowrank));
    MR_OK(call(n ? g : NULL, bytes, lr));
    same_bits(g, bytes, what);
    for (size_t x = 0; x < n; x++) res[x] = load(g, x, dt);
    const int exact_call = mode == SC_LOWRANK_POWERSGD ? 0 : 1;
    if (lowrank && c == exact_call) {
      double err = 0;
      for (size_t x = 0; x < n; x++) err = fmax(err, fabs(res[x] - mb[x]));
      mr_checks++;
      if (err > tol_of(dt) * fmax(max_abs(mb, n), 1)) mr_fail("%s: off Mbar by %.3g", what, err);
    }
    if (!lowrank && c == 0 && r < rows && r < cols)
      check_projection(res, mb, rows, cols, r, mode == SC_LOWRANK_POWERSGD, tol_of(dt), what);
  }
  MR_OK(sc_lowrank_destroy(lr));
  free(g);
  free(mb);
  free(res);
}

/* Relative Frobenius distance of the running mean of results from Mbar
 * after 25, 50 and 100 calls on a constant gradient. */
static void feedback_errors(sc_lowrank_mode_t mode, int ef, double err[3]) {
  const size_t rows = 24, cols = 16, n = rows * cols;
  float *g = malloc(n * sizeof(float));
  double *mb = malloc(n * sizeof(double)), *sum = calloc(n, sizeof(double)), nm = 0;
  mbar_of(mb, rows, cols, 0);
  for (size_t x = 0; x < n; x++) nm += mb[x] * mb[x];
  sc_lowrank_t *lr = NULL;
  MR_OK(sc_lowrank_create(rows, cols, SC_FLOAT32, 2, mode, ef, 99, &lr));
  int k = 0;
  for (int t = 1; t <= 100; t++) {
    for (size_t i = 0; i < rows; i++)
      for (size_t j = 0; j < cols; j++) g[i * cols + j] = (float)grad_entry(mr_rank, i, j, 0);
    MR_OK(call(g, n * sizeof(float), lr));
    for (size_t x = 0; x < n; x++) sum[x] += g[x];
    if (t == 25 || t == 50 || t == 100) {
      double e = 0;
      for (size_t x = 0; x < n; x++) e += (sum[x] / t - mb[x]) * (sum[x] / t - mb[x]);
      err[k++] = sqrt(e / nm);
    }
  }
  same_bits(g, n * sizeof(float), "feedback");
  MR_OK(sc_lowrank_destroy(lr));
  free(g);
  free(mb);
  free(sum);
}

static void feedback(sc_lowrank_mode_t mode) {
  double with[3], without[3];
  feedback_errors(mode, 1, with);
  feedback_errors(mode, 0, without);
  const char *name = mode ? "acpsgd" : "powersgd";
  if (mr_rank == 0)
    printf("%s mean-of-results error at 25/50/100 calls: feedback %.4f %.4f %.4f, "
           "none %.4f %.4f %.4f\n",
           name, with[0], with[1], with[2], without[0], without[1], without[2]);
  mr_checks += 3;
  if (!(with[0] > with[1] && with[1] > with[2]))
    mr_fail("%s: with feedback the error does not decrease", name);
  /* 1/t: halving per doubling, allowing for the residual's fluctuation. */
  if (!(with[2] < 0.75 * with[0] / 2)) mr_fail("%s: not converging like 1/t", name);
  if (!(with[2] < 0.25 * without[2] && without[2] > 0.5 * without[0]))
    mr_fail("%s: feedback %.4f not well below the truncation error %.4f", name, with[2],
            without[2]);
}

int main(int argc, char **argv) {
  int quick = 0, device = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = 1;
    if (!strcmp(argv[i], "--device")) device = 1;
  }
  if (device) {
    rt = sc_devrt();
    if (!rt) {
      printf("skipped: no device runtime\n");
      return 77;
    }
    if (rt->stream_create(&stream) != SC_SUCCESS || rt->event_create(&event) != SC_SUCCESS)
      return 1;
  }
  if (sc_comm_init_env(&comm) != SC_SUCCESS) {
    fprintf(stderr, "init failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &mr_rank);
  sc_comm_size(comm, &mr_nranks);
  /* rows, cols, rank; the rank-2/3 gradients' average has rank <= the rank
   * wherever the rank is >= 3 or min(rows, cols). */
  static const struct {
    size_t rows, cols;
    int rank;
  } shapes[] = {{0, 5, 2}, {1, 1, 1}, {5, 3, 3}, {3, 7, 5}, {37, 23, 4}, {13, 61, 3}, {130, 17, 5}};
  const size_t nshapes = sizeof shapes / sizeof shapes[0];
  for (size_t s = quick ? 2 : 0; s < nshapes; s++)
    for (int t = 0; t < 4; t++)
      for (int mode = 0; mode < 2; mode++) {
        if (quick && (size_t)(t + mode) % 2 != s % 2) continue;
        const int lowrank = shapes[s].rank >= 3 ? 3 : 2;
        one(shapes[s].rows, shapes[s].cols, shapes[s].rank, dtypes[t], (sc_lowrank_mode_t)mode,
            lowrank, 1000 + s);
        if (dtypes[t] == SC_FLOAT32 || dtypes[t] == SC_FLOAT64)
          one(shapes[s].rows, shapes[s].cols, shapes[s].rank, dtypes[t], (sc_lowrank_mode_t)mode, 0,
              2000 + s);
      }
  if (!device) {
    feedback(SC_LOWRANK_POWERSGD);
    feedback(SC_LOWRANK_ACPSGD);
  }
  /* Arguments refused at the call, before anything travels. */
  sc_lowrank_t *lr = NULL;
  MR_OK(sc_lowrank_create(4, 4, SC_FLOAT32, 2, SC_LOWRANK_ACPSGD, 1, 5, &lr));
  mr_checks += 4;
  if (sc_lowrank_allreduce(NULL, lr, comm) != SC_ERR_INVALID_ARG)
    mr_fail("a NULL grad was not refused");
  float g[16] = {0};
  if (sc_lowrank_allreduce(g, NULL, comm) != SC_ERR_INVALID_ARG)
    mr_fail("a NULL state was not refused");
  if (sc_lowrank_allreduce(g, lr, NULL) != SC_ERR_INVALID_ARG)
    mr_fail("a NULL comm was not refused");
  sc_lowrank_t *bad = NULL;
  if (sc_lowrank_create(4, 4, SC_INT8, 2, SC_LOWRANK_ACPSGD, 1, 5, &bad) != SC_ERR_INVALID_ARG)
    mr_fail("int8 was not refused");
  MR_OK(sc_lowrank_destroy(lr));
  MR_OK(sc_barrier(comm));
  MR_OK(sc_comm_destroy(comm));
  if (rt) {
    rt->event_destroy(event);
    rt->stream_destroy(stream);
  }
  printf("rank %d of %d: %ld checks, %ld failures\n", mr_rank, mr_nranks, mr_checks, mr_failures);
  return mr_failures ? 1 : 0;
}
