/* The planners (see plan.h and docs/ALGORITHMS.md, "Bucket fusion"). */
#include "fusion/plan.h"

#include <stdint.h>

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

/* Buckets filled from the last tensor (the first layer in forward order)
 * backwards, the k-th of them capped at min(bucket_bytes, first_cap * 2^k). */
static size_t sc_fplan_forward_grow(const sc_fplan_in_t *in, size_t bucket_bytes, size_t first_cap,
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

size_t sc_fplan_size_forward(const sc_fplan_in_t *in, size_t bucket_bytes, size_t *first) {
  return sc_fplan_forward_grow(in, bucket_bytes, bucket_bytes, first);
}

size_t sc_fplan_dear(const sc_fplan_in_t *in, size_t bucket_bytes, size_t *first) {
  size_t cap = bucket_bytes / SC_FPLAN_DEAR_FIRST_DIV;
  return sc_fplan_forward_grow(in, bucket_bytes, cap ? cap : 1, first);
}

size_t sc_fplan_mgwfbp(const sc_fplan_in_t *in, double alpha_us, double beta_us_per_byte,
                       size_t *first) {
  return sc_fplan_mgwfbp_cap(in, alpha_us, beta_us_per_byte, SIZE_MAX, first);
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
