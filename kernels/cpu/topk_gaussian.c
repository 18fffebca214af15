/* Gaussian-k, the approximate selector of "Understanding Top-k
 * Sparsification": fit a normal distribution to the values in one pass, take
 * the threshold whose two-sided tail holds a fraction k/n, count, adjust the
 * threshold at most three times, and select with the last one. Every pass is a
 * streaming loop the compiler vectorizes (moments, counts) or a compaction
 * whose branch is almost never taken. */
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/topk.h"
#include "kernels/cpu/topk_keys.h"

#define SC_TOPK_REFINE_MAX 3
/* Elements per block of the moment pass: fp16/bf16 are widened to float32
 * a block at a time (stack buffer), and blocks have a constant trip count
 * for the vectorizer. */
#define SC_TOPK_BLOCK 256
#define SC_TOPK_LANES 4

double sc_topk_norm_quantile(double p) {
  /* Peter J. Acklam's rational approximations (central region and tails). */
  static const double a[6] = {-3.969683028665376e+01, 2.209460984245205e+02,
                              -2.759285104469687e+02, 1.383577518672690e+02,
                              -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[5] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                              6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[6] = {-7.784894002430293e-03, -3.223964580411365e-01,
                              -2.400758277161838e+00, -2.549671348867720e+00,
                              4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[4] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                              3.754408661907416e+00};
  const double p_low = 0.02425;
  if (!(p > 0.0)) return -INFINITY;
  if (!(p < 1.0)) return INFINITY;
  double x;
  if (p < p_low || p > 1.0 - p_low) {
    double q = sqrt(-2.0 * log(p < p_low ? p : 1.0 - p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    if (p >= p_low) x = -x;
  } else {
    double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
  }
  /* One Halley step on Phi(x) - p takes the 1e-9 relative error of the
   * approximation to about machine precision. */
  double e = 0.5 * erfc(-x / sqrt(2.0)) - p;
  double u = e * sqrt(2.0 * M_PI) * exp(x * x / 2.0);
  return x - u / (1.0 + x * u / 2.0);
}

/* Sums over the finite values (NaN and +-inf are left out of the fit). */
typedef struct moments {
  double sum[SC_TOPK_LANES], sumsq[SC_TOPK_LANES];
  uint64_t count[SC_TOPK_LANES];
} moments_t;

/* m multiple of SC_TOPK_LANES, at most SC_TOPK_BLOCK. The lanes are separate
 * sums (the vectorizer may not reorder one floating-point sum, but it maps
 * independent ones onto vector lanes), and non-finite values are masked with
 * integer operations (a float compare could trap, so gcc would keep it as a
 * branch). */
static void moments_f32_block(const float *x, size_t m, moments_t *acc) {
  double s[SC_TOPK_LANES], q[SC_TOPK_LANES];
  uint32_t c[SC_TOPK_LANES];
  for (size_t l = 0; l < SC_TOPK_LANES; l++) {
    s[l] = acc->sum[l];
    q[l] = acc->sumsq[l];
    c[l] = 0;
  }
  for (size_t i = 0; i < m; i += SC_TOPK_LANES) {
    for (size_t l = 0; l < SC_TOPK_LANES; l++) {
      uint32_t u;
      memcpy(&u, &x[i + l], sizeof u);
      uint32_t fin = (u & 0x7fffffffu) < 0x7f800000u;
      u &= 0u - fin;
      float v;
      memcpy(&v, &u, sizeof v);
      s[l] += (double)v;
      q[l] += (double)v * (double)v;
      c[l] += fin;
    }
  }
  for (size_t l = 0; l < SC_TOPK_LANES; l++) {
    acc->sum[l] = s[l];
    acc->sumsq[l] = q[l];
    acc->count[l] += c[l];
  }
}

static void moments_f64_block(const double *x, size_t m, moments_t *acc) {
  double s[SC_TOPK_LANES], q[SC_TOPK_LANES];
  uint64_t c[SC_TOPK_LANES];
  for (size_t l = 0; l < SC_TOPK_LANES; l++) {
    s[l] = acc->sum[l];
    q[l] = acc->sumsq[l];
    c[l] = 0;
  }
  for (size_t i = 0; i < m; i += SC_TOPK_LANES) {
    for (size_t l = 0; l < SC_TOPK_LANES; l++) {
      uint64_t u;
      memcpy(&u, &x[i + l], sizeof u);
      uint64_t fin = (u & 0x7fffffffffffffffull) < 0x7ff0000000000000ull;
      u &= 0ull - fin;
      double v;
      memcpy(&v, &u, sizeof v);
      s[l] += v;
      q[l] += v * v;
      c[l] += fin;
    }
  }
  for (size_t l = 0; l < SC_TOPK_LANES; l++) {
    acc->sum[l] = s[l];
    acc->sumsq[l] = q[l];
    acc->count[l] += c[l];
  }
}

static void moments(const void *x, size_t n, sc_dtype_t dtype, double *mean, double *stddev,
                    size_t *finite) {
  moments_t acc;
  memset(&acc, 0, sizeof acc);
  float buf[SC_TOPK_BLOCK];
  size_t i = 0;
  for (; i + SC_TOPK_BLOCK <= n; i += SC_TOPK_BLOCK) {
    switch (dtype) {
    case SC_FLOAT16:
      sc_half_to_float_array(buf, (const uint16_t *)x + i, SC_TOPK_BLOCK);
      moments_f32_block(buf, SC_TOPK_BLOCK, &acc);
      break;
    case SC_BFLOAT16:
      sc_bfloat16_to_float_array(buf, (const uint16_t *)x + i, SC_TOPK_BLOCK);
      moments_f32_block(buf, SC_TOPK_BLOCK, &acc);
      break;
    case SC_FLOAT32:
      moments_f32_block((const float *)x + i, SC_TOPK_BLOCK, &acc);
      break;
    default:
      moments_f64_block((const double *)x + i, SC_TOPK_BLOCK, &acc);
      break;
    }
  }
  /* The tail, padded with NaN (not counted) to whole lanes. */
  size_t rest = n - i;
  if (rest > 0) {
    double tail[SC_TOPK_BLOCK];
    for (size_t j = 0; j < SC_TOPK_BLOCK; j++) tail[j] = NAN;
    for (size_t j = 0; j < rest; j++) {
      switch (dtype) {
      case SC_FLOAT16:
        tail[j] = sc_half_to_float(((const uint16_t *)x)[i + j]);
        break;
      case SC_BFLOAT16:
        tail[j] = sc_bfloat16_to_float(((const uint16_t *)x)[i + j]);
        break;
      case SC_FLOAT32:
        tail[j] = ((const float *)x)[i + j];
        break;
      default:
        tail[j] = ((const double *)x)[i + j];
        break;
      }
    }
    size_t padded = (rest + SC_TOPK_LANES - 1) / SC_TOPK_LANES * SC_TOPK_LANES;
    moments_f64_block(tail, padded, &acc);
  }
  double s = 0, ss = 0;
  uint64_t c = 0;
  for (size_t l = 0; l < SC_TOPK_LANES; l++) {
    s += acc.sum[l];
    ss += acc.sumsq[l];
    c += acc.count[l];
  }
  *finite = (size_t)c;
  if (c == 0) {
    *mean = *stddev = 0;
    return;
  }
  double mu = s / (double)c;
  double var = ss / (double)c - mu * mu;
  *mean = mu;
  *stddev = var > 0 ? sqrt(var) : 0;
}

/* The largest key whose magnitude is <= t (t >= 0, finite): |v| > t exactly
 * when key(v) > that key, so the passes compare integers. Binary search over
 * the keys (at most 63 steps): exact for every dtype without per-type
 * rounding code. */
static uint64_t threshold_key(const sc_topk_ops_t *ops, double t) {
  uint64_t lo = 0, hi = ops->inf_key;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo + 1) / 2;
    if (ops->key_value(mid) <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

sc_result_t sc_topk_gaussian_indices(const void *x, size_t n, sc_dtype_t dtype, size_t k,
                                     uint32_t *indices, size_t *nnz) {
  const sc_topk_ops_t *ops = sc_topk_ops(dtype);
  *nnz = 0;
  if (!ops) return SC_ERR(SC_ERR_INVALID_ARG, "sc_topk: dtype %d is not floating point", dtype);
  if (k == 0 || n == 0) return SC_SUCCESS;
  if (k >= n) return sc_topk_exact_indices(x, n, dtype, k, indices, nnz);

  double mu, sigma;
  size_t finite;
  moments(x, n, dtype, &mu, &sigma, &finite);
  if (finite == 0) return sc_topk_exact_indices(x, n, dtype, k, indices, nnz);
  double z = -sc_topk_norm_quantile((double)k / (double)n / 2.0);
  double t = fabs(mu) + z * sigma;
  /* The caller's 2k indices receive the selection during each count; the
   * last count's selection is the answer when it fits. */
  size_t cap = k <= SIZE_MAX / 2 ? 2 * k : SIZE_MAX;
  size_t count = 0;
  for (int round = 0;; round++) {
    /* Values so large that the sums overflowed: no usable fit. */
    if (!isfinite(t)) return sc_topk_exact_indices(x, n, dtype, k, indices, nnz);
    count = ops->collect(x, n, threshold_key(ops, t), indices, cap);
    if (round == SC_TOPK_REFINE_MAX) break;
    if (count < 2 * k / 3.0)
      t *= 0.5;
    else if (count > 4 * k / 3.0)
      t *= 1.5;
    else
      break;
  }
  /* More than 2k passed: everything above the threshold ranks above
   * everything below it, so the exact top-k among them is the exact top-k of
   * the whole vector. */
  if (count > cap) return sc_topk_exact_indices(x, n, dtype, k, indices, nnz);
  *nnz = count;
  return SC_SUCCESS;
}
