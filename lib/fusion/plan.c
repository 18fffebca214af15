/* SPDX-License-Identifier: BSD-3-Clause */
/* The planners (see plan.h and docs/ALGORITHMS.md, "Bucket fusion"). */
#include "lib/fusion/plan.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static int sc_same_group(const sc_fplan_in_t *in, size_t a, size_t b) {
  return !in->group || in->group[a] == in->group[b];
}

static double sc_bw(const sc_fplan_in_t *in, size_t l) {
  return in->bw_us ? in->bw_us[l] : 0.0;
}

size_t sc_fplan_none(const sc_fplan_in_t *in, size_t *first) {
  for (size_t l = 0; l <= in->n; l++) first[l] = l;
  return in->n;
}

size_t sc_fplan_single(const sc_fplan_in_t *in, size_t *first) {
  size_t nb = 0;
  if (in->n == 0) {
    first[0] = 0;
    return 0;
  }
  first[nb++] = 0;
  for (size_t l = 1; l < in->n; l++)
    if (!sc_same_group(in, l - 1, l)) first[nb++] = l;
  first[nb] = in->n;
  return nb;
}

size_t sc_fplan_size(const sc_fplan_in_t *in, size_t bucket_bytes, size_t *first) {
  size_t nb = 0, fill = 0;
  first[0] = 0;
  if (in->n == 0) return 0;
  nb = 1;
  fill = in->bytes[0];
  for (size_t l = 1; l < in->n; l++) {
    if (!sc_same_group(in, l - 1, l) || fill + in->bytes[l] > bucket_bytes) {
      first[nb++] = l;
      fill = 0;
    }
    fill += in->bytes[l];
  }
  first[nb] = in->n;
  return nb;
}

size_t sc_fplan_dear_capped(const sc_fplan_in_t *in, size_t bucket_bytes, size_t first_cap,
                            size_t *first) {
  size_t n = in->n, nb = 0, fill = 0, cap = first_cap < bucket_bytes ? first_cap : bucket_bytes;
  first[0] = 0;
  if (n == 0) return 0;
  /* Walk from tensor n-1 down, recording each bucket's lowest index into
   * first[] from the top, then move the list to the front. */
  size_t *top = first + n; /* room: at most n buckets, first[0..n] */
  size_t cnt = 0;
  fill = in->bytes[n - 1];
  for (size_t l = n - 1; l-- > 0;) {
    if (!sc_same_group(in, l, l + 1) || fill + in->bytes[l] > cap) {
      *top-- = l + 1;
      cnt++;
      fill = 0;
      cap = cap > bucket_bytes / 2 ? bucket_bytes : 2 * cap;
    }
    fill += in->bytes[l];
  }
  nb = cnt + 1;
  /* first[n-cnt+1 .. n] hold the inner boundaries in ascending order. */
  for (size_t i = 0; i < cnt; i++) first[1 + i] = first[n - cnt + 1 + i];
  first[0] = 0;
  first[nb] = n;
  return nb;
}

size_t sc_fplan_dear(const sc_fplan_in_t *in, size_t bucket_bytes, size_t *first) {
  size_t cap = bucket_bytes / SC_FPLAN_DEAR_FIRST_DIV;
  return sc_fplan_dear_capped(in, bucket_bytes, cap ? cap : 1, first);
}

size_t sc_fplan_mgwfbp_cap(const sc_fplan_in_t *in, double alpha_us, double beta_us_per_byte,
                           size_t max_bytes, size_t *first) {
  size_t n = in->n, nb = 0;
  first[0] = 0;
  if (n == 0) return 0;
  nb = 1;
  double ready = sc_bw(in, 0), comm_free = 0.0;
  size_t bytes = in->bytes[0];
  for (size_t l = 0; l + 1 < n; l++) {
    double start = comm_free > ready ? comm_free : ready; /* of the bucket ending at l */
    double next_ready = ready + sc_bw(in, l + 1);
    if (sc_same_group(in, l, l + 1) && next_ready - start < alpha_us &&
        bytes + in->bytes[l + 1] <= max_bytes) {
      bytes += in->bytes[l + 1];
    } else {
      comm_free = start + alpha_us + beta_us_per_byte * (double)bytes;
      first[nb++] = l + 1;
      bytes = in->bytes[l + 1];
    }
    ready = next_ready;
  }
  first[nb] = n;
  return nb;
}

size_t sc_fplan_omgs(const sc_fplan_in_t *in, double alpha_us, double beta_us_per_byte,
                     size_t max_bytes, size_t *first) {
  size_t n = in->n;
  first[0] = 0;
  if (n == 0) return 0;
  /* end[j]: the earliest modelled end of tensors [0, j) cut into buckets;
   * cut[j]: where the last of those buckets starts (kept in first[], which
   * has the n + 1 entries); ready[j]: when tensor j-1's gradient is ready. */
  double *end = NULL, *ready = NULL;
  size_t *cut = first;
  end = (double *)calloc(2 * (n + 1), sizeof(double));
  if (!end) return sc_fplan_none(in, first); /* out of memory: WFBP is a valid plan */
  ready = end + n + 1;
  for (size_t l = 0; l < n; l++) ready[l + 1] = ready[l] + sc_bw(in, l);
  end[0] = 0.0;
  cut[0] = 0;
  for (size_t j = 1; j <= n; j++) {
    double best = INFINITY;
    size_t arg = j - 1, bytes = 0;
    /* The last bucket is [i, j); scanning i downwards grows it, and a tie
     * prefers the larger bucket (fewer startups in reality than modelled). */
    for (size_t i = j; i-- > 0;) {
      if (i + 1 < j && (!sc_same_group(in, i, i + 1) || bytes + in->bytes[i] > max_bytes)) break;
      bytes += in->bytes[i];
      double s = end[i] > ready[j] ? end[i] : ready[j];
      double e = s + alpha_us + beta_us_per_byte * (double)bytes;
      if (e <= best) {
        best = e;
        arg = i;
      }
    }
    end[j] = best;
    cut[j] = arg;
  }
  /* Walk the cuts back from n, then reverse into first[]. */
  size_t nb = 0;
  for (size_t j = n; j > 0; j = cut[j]) nb++;
  size_t *tmp = (size_t *)end; /* end[] is no longer needed: same size or larger */
  size_t k = nb;
  for (size_t j = n; j > 0; j = cut[j]) tmp[--k] = cut[j];
  for (size_t b = 0; b < nb; b++) first[b] = tmp[b];
  first[nb] = n;
  free(end);
  return nb;
}

size_t sc_fplan_p3_slice_elems(size_t slice_bytes, size_t elem_size) {
  size_t e = elem_size ? slice_bytes / elem_size : 0;
  return e ? e : 1;
}

size_t sc_fplan_p3_nslices(size_t count, size_t slice_elems) {
  return count / slice_elems + (count % slice_elems != 0);
}

size_t sc_fplan_p3_default_slice(double alpha_us, double beta_us_per_byte) {
  if (!(beta_us_per_byte > 0) || !(alpha_us >= 0)) return SC_FPLAN_P3_SLICE_MAX;
  double s = SC_FPLAN_P3_SLICE_ALPHAS * alpha_us / beta_us_per_byte;
  if (!(s >= (double)SC_FPLAN_P3_SLICE_MIN)) return SC_FPLAN_P3_SLICE_MIN;
  if (s >= (double)SC_FPLAN_P3_SLICE_MAX) return SC_FPLAN_P3_SLICE_MAX;
  return (size_t)s / 4096 * 4096; /* whole pages: slices of every dtype stay aligned */
}

long sc_fplan_p3_next(size_t n, const uint64_t *agreed, const uint64_t *launched) {
  for (size_t t = n; t-- > 0;)
    if (agreed[t] > launched[t]) return (long)t;
  return -1;
}

size_t sc_fplan_p3_batch(size_t n, const uint64_t *agreed, uint64_t *launched, size_t *next,
                         const size_t *ns, const size_t *full_bytes, const size_t *tail_bytes,
                         size_t budget_bytes, size_t max_slices, size_t *out_t, size_t *out_i) {
  size_t cnt = 0, bytes = 0;
  while (cnt < max_slices) {
    long c = sc_fplan_p3_next(n, agreed, launched);
    if (c < 0) break;
    size_t t = (size_t)c, i = next[t];
    size_t b = i + 1 == ns[t] ? tail_bytes[t] : full_bytes[t];
    if (cnt > 0 && (b > budget_bytes || bytes > budget_bytes - b)) break;
    bytes += b;
    out_t[cnt] = t;
    out_i[cnt] = i;
    cnt++;
    if (++next[t] == ns[t]) {
      next[t] = 0;
      launched[t]++;
    }
  }
  return cnt;
}

double sc_fplan_timeline(const sc_fplan_in_t *in, const size_t *first, size_t nb, double alpha_us,
                         double beta_us_per_byte, double *start, double *end) {
  double ready = 0.0, comm_free = 0.0;
  size_t l = 0;
  for (size_t b = 0; b < nb; b++) {
    size_t bytes = 0;
    for (; l < first[b + 1]; l++) {
      ready += sc_bw(in, l);
      bytes += in->bytes[l];
    }
    double s = comm_free > ready ? comm_free : ready;
    comm_free = s + alpha_us + beta_us_per_byte * (double)bytes;
    if (start) start[b] = s;
    if (end) end[b] = comm_free;
  }
  return comm_free;
}

void sc_fplan_fit_line(const double *x, const double *y, int n, double *alpha_us,
                       double *beta_us_per_byte) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (int i = 0; i < n; i++) {
    sx += x[i];
    sy += y[i];
    sxx += x[i] * x[i];
    sxy += x[i] * y[i];
  }
  double d = n * sxx - sx * sx;
  double b = d != 0 ? (n * sxy - sx * sy) / d : 0;
  double a = (sy - b * sx) / n;
  if (!(a > 0 && a <= y[0])) {
    a = y[0] > 0 ? y[0] : 1.0;
    /* Least squares for the slope alone, through (0, a). */
    b = sxx > 0 ? (sxy - a * sx) / sxx : 0;
  }
  if (!(b > 1e-9)) b = 1e-9;
  *alpha_us = a;
  *beta_us_per_byte = b;
}

double sc_fplan_trial_cost(const double *pts, int n, double c) {
  /* The usable points (both positive) by modelled cost, which the
   * buckets' sizes need not order (shapes); of equal costs the first. */
  double x[SC_FPLAN_TRIAL_MAX], y[SC_FPLAN_TRIAL_MAX];
  int k = 0;
  for (int i = 0; i < n && i < SC_FPLAN_TRIAL_MAX; i++) {
    const double px = pts[2 * i], py = pts[2 * i + 1];
    if (!(px > 0.0 && py > 0.0)) continue;
    int at = k;
    while (at > 0 && x[at - 1] > px) at--;
    if (at > 0 && x[at - 1] == px) continue;
    for (int j = k; j > at; j--) {
      x[j] = x[j - 1];
      y[j] = y[j - 1];
    }
    x[at] = px;
    y[at] = py;
    k++;
  }
  if (!k) return c; /* no trial */
  /* A measured time below one of a smaller modelled cost (shapes the model
   * orders otherwise, or noise) is raised to it: the cost never falls as c
   * rises, nor below what a cheaper-modelled bucket measured. */
  for (int i = 1; i < k; i++)
    if (y[i] < y[i - 1]) y[i] = y[i - 1];
  if (c <= x[0]) return y[0] * c / x[0];
  if (c >= x[k - 1]) return y[k - 1] * c / x[k - 1];
  int i = 1;
  while (x[i] < c) i++;
  return y[i - 1] + (y[i] - y[i - 1]) * (c - x[i - 1]) / (x[i] - x[i - 1]);
}
