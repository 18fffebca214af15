/* SPDX-License-Identifier: BSD-3-Clause */
/* The low-rank kernels of kernels/cpu/lowrank.h for one element type:
 * included by kernels/cpu/lowrank.c with LR_T (float or double), LR_SFX
 * (f32 or f64) and LR_EPS (the type's machine epsilon) defined.
 * Reductions accumulate in the independent lanes of a 32-byte vector,
 * folded in a fixed tree: vectorized without reassociating anything, the
 * order of operations is the source's on every machine. */
#define LR_CAT_(a, b) a##_##b
#define LR_CAT(a, b)  LR_CAT_(a, b)
#define LR_FN(name)   LR_CAT(name, LR_SFX)

/* Lanes of 16 bytes (4 floats, 2 doubles), as gcc's generic vectors (one
 * SSE register); each reduction keeps two of them, so the accumulators stay
 * in registers and two additions are in flight. */
typedef LR_T LR_FN(lr_vec) __attribute__((vector_size(16)));
#define LR_V  LR_FN(lr_vec)
#define LR_VL (16 / sizeof(LR_T))

static inline LR_V LR_FN(lr_load)(const LR_T *p) {
  LR_V v;
  memcpy(&v, p, sizeof v);
  return v;
}

static inline LR_T LR_FN(lr_fold)(LR_V lo, LR_V hi) {
  LR_T a[4];
  const LR_V v = lo + hi;
  memcpy(a, &v, sizeof v);
  if (LR_VL == 4) return (a[0] + a[1]) + (a[2] + a[3]);
  return a[0] + a[1];
}

static LR_T LR_FN(lr_dot)(const LR_T *a, const LR_T *b, size_t n) {
  LR_V lo = {0}, hi = {0};
  size_t j = 0;
  for (; j + 2 * LR_VL <= n; j += 2 * LR_VL) {
    lo += LR_FN(lr_load)(a + j) * LR_FN(lr_load)(b + j);
    hi += LR_FN(lr_load)(a + j + LR_VL) * LR_FN(lr_load)(b + j + LR_VL);
  }
  LR_T tail = 0;
  for (; j < n; j++) tail += a[j] * b[j];
  return LR_FN(lr_fold)(lo, hi) + tail;
}

/* y[0..n) += a * x[0..n), in constant-length chunks that -O2 vectorizes. */
static void LR_FN(lr_axpy)(LR_T *restrict y, LR_T a, const LR_T *restrict x, size_t n) {
  size_t j = 0;
  for (; j + LR_CHUNK <= n; j += LR_CHUNK)
    for (size_t l = 0; l < LR_CHUNK; l++) y[j + l] += a * x[j + l];
  for (; j < n; j++) y[j] += a * x[j];
}

void LR_FN(sc_lr_project_portable)(LR_T *pt, const LR_T *m, size_t rows, size_t cols,
                                   const LR_T *qt, size_t r) {
  for (size_t i = 0; i < rows; i++) {
    const LR_T *restrict mi = m + i * cols;
    size_t k = 0;
    /* Four columns of Q per pass over the row: one load of M feeds four
     * accumulations. */
    for (; k + 4 <= r; k += 4) {
      const LR_T *restrict q0 = qt + k * cols, *restrict q1 = q0 + cols, *restrict q2 = q1 + cols,
                           *restrict q3 = q2 + cols;
      LR_V a0 = {0}, b0 = {0}, a1 = {0}, b1 = {0}, a2 = {0}, b2 = {0}, a3 = {0}, b3 = {0};
      size_t j = 0;
      for (; j + 2 * LR_VL <= cols; j += 2 * LR_VL) {
        const LR_V x = LR_FN(lr_load)(mi + j), y = LR_FN(lr_load)(mi + j + LR_VL);
        a0 += x * LR_FN(lr_load)(q0 + j);
        b0 += y * LR_FN(lr_load)(q0 + j + LR_VL);
        a1 += x * LR_FN(lr_load)(q1 + j);
        b1 += y * LR_FN(lr_load)(q1 + j + LR_VL);
        a2 += x * LR_FN(lr_load)(q2 + j);
        b2 += y * LR_FN(lr_load)(q2 + j + LR_VL);
        a3 += x * LR_FN(lr_load)(q3 + j);
        b3 += y * LR_FN(lr_load)(q3 + j + LR_VL);
      }
      LR_T t0 = 0, t1 = 0, t2 = 0, t3 = 0;
      for (; j < cols; j++) {
        const LR_T x = mi[j];
        t0 += x * q0[j];
        t1 += x * q1[j];
        t2 += x * q2[j];
        t3 += x * q3[j];
      }
      pt[k * rows + i] = LR_FN(lr_fold)(a0, b0) + t0;
      pt[(k + 1) * rows + i] = LR_FN(lr_fold)(a1, b1) + t1;
      pt[(k + 2) * rows + i] = LR_FN(lr_fold)(a2, b2) + t2;
      pt[(k + 3) * rows + i] = LR_FN(lr_fold)(a3, b3) + t3;
    }
    for (; k < r; k++) pt[k * rows + i] = LR_FN(lr_dot)(mi, qt + k * cols, cols);
  }
}

#if LR_AVX2
/* 32-byte vectors for the projection's accumulators: lane l of one covers
 * the same columns as lane l of the portable version's two 16-byte halves,
 * and the fold adds the halves first, so both give the same bits. Loads go
 * through memcpy and no 32-byte vector crosses a function boundary. */
typedef LR_T LR_FN(lr_wide) __attribute__((vector_size(32)));
#define LR_W             LR_FN(lr_wide)
#define LR_WL            (32 / sizeof(LR_T))
#define LR_WLOAD(dst, p) memcpy(&(dst), (p), sizeof(dst))
#define LR_WFOLD(w, out)                                                                           \
  do {                                                                                             \
    LR_V lo_, hi_;                                                                                 \
    memcpy(&lo_, &(w), sizeof lo_);                                                                \
    memcpy(&hi_, (const char *)&(w) + sizeof lo_, sizeof hi_);                                     \
    (out) = LR_FN(lr_fold)(lo_, hi_);                                                              \
  } while (0)

/* Four columns of Q against rows i and i + 1 of M (two == 1) or row i alone:
 * each load of Q feeds both rows, which halves the projection's reads of Q
 * (4 rows of cols elements, from the second-level cache at 4096 columns) and
 * gives the adds eight independent chains; every (row, column) keeps its
 * own accumulator and order, so the bits are those of one row at a time. */
__attribute__((target("avx2"))) static inline void LR_FN(lr_project4_avx2)(LR_T *pt, const LR_T *m,
                                                                           size_t rows, size_t cols,
                                                                           const LR_T *qt, size_t i,
                                                                           size_t k, int two) {
  const LR_T *restrict mi = m + i * cols, *restrict mn = two ? mi + cols : mi;
  const LR_T *qs[4];
  for (int c = 0; c < 4; c++) qs[c] = qt + (k + (size_t)c) * cols;
  LR_W a[4] = {{0}}, b[4] = {{0}}, x, y, q;
  size_t j = 0;
  for (; j + LR_WL <= cols; j += LR_WL) {
    LR_WLOAD(x, mi + j);
    LR_WLOAD(y, mn + j);
    /* Unrolled, so that a[] and b[] stay in registers: rolled, they were
     * kept in memory and the projection took 2.0x a memcpy against 1.5x. */
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
      LR_WLOAD(q, qs[c] + j);
      a[c] += x * q;
      b[c] += y * q;
    }
  }
  LR_T t[8] = {0}, f[8];
  for (; j < cols; j++)
    for (int c = 0; c < 4; c++) {
      t[c] += mi[j] * qs[c][j];
      t[4 + c] += mn[j] * qs[c][j];
    }
  for (int c = 0; c < 4; c++) {
    LR_WFOLD(a[c], f[c]);
    LR_WFOLD(b[c], f[4 + c]);
  }
  for (int c = 0; c < 4; c++) {
    pt[(k + (size_t)c) * rows + i] = f[c] + t[c];
    if (two) pt[(k + (size_t)c) * rows + i + 1] = f[4 + c] + t[4 + c];
  }
}

__attribute__((target("avx2"))) static void LR_FN(lr_project_avx2)(LR_T *pt, const LR_T *m,
                                                                   size_t rows, size_t cols,
                                                                   const LR_T *qt, size_t r) {
  for (size_t i = 0; i < rows; i += 2) {
    const int two = i + 1 < rows;
    size_t k = 0;
    for (; k + 4 <= r; k += 4) LR_FN(lr_project4_avx2)(pt, m, rows, cols, qt, i, k, two);
    for (; k < r; k++) {
      pt[k * rows + i] = LR_FN(lr_dot)(m + i * cols, qt + k * cols, cols);
      if (two) pt[k * rows + i + 1] = LR_FN(lr_dot)(m + (i + 1) * cols, qt + k * cols, cols);
    }
  }
}
#undef LR_W
#undef LR_WL
#undef LR_WLOAD
#undef LR_WFOLD
#endif

void LR_FN(sc_lr_project)(LR_T *pt, const LR_T *m, size_t rows, size_t cols, const LR_T *qt,
                          size_t r) {
#if LR_AVX2
  if (lr_has_avx2()) {
    LR_FN(lr_project_avx2)(pt, m, rows, cols, qt, r);
    return;
  }
#endif
  LR_FN(sc_lr_project_portable)(pt, m, rows, cols, qt, r);
}

void LR_FN(sc_lr_project_t)(LR_T *qt, const LR_T *m, size_t rows, size_t cols, const LR_T *pt,
                            size_t r) {
  if (r == 0) return;
  for (size_t x = 0; x < r * cols; x++) qt[x] = 0;
  /* Strips of columns narrow enough that the r partial rows of Q and four
   * rows of M stay in the first-level cache; four rows of M are added to a
   * partial row of Q held in registers, in row order (the order of a plain
   * loop over the rows), so Q is loaded and stored once per four rows. */
  size_t strip = (32768 / sizeof(LR_T)) / (r + 4);
  strip = strip < 2 * LR_VL ? 2 * LR_VL : strip / (2 * LR_VL) * (2 * LR_VL);
  for (size_t j0 = 0; j0 < cols; j0 += strip) {
    const size_t w = cols - j0 < strip ? cols - j0 : strip;
    size_t i = 0;
    for (; i + 4 <= rows; i += 4) {
      const LR_T *m0 = m + i * cols + j0, *m1 = m0 + cols, *m2 = m1 + cols, *m3 = m2 + cols;
      for (size_t k = 0; k < r; k++) {
        const LR_T *pk = pt + k * rows + i;
        const LR_T p0 = pk[0], p1 = pk[1], p2 = pk[2], p3 = pk[3];
        LR_T *q = qt + k * cols + j0;
        size_t j = 0;
        for (; j + LR_VL <= w; j += LR_VL) {
          LR_V v = LR_FN(lr_load)(q + j);
          v += p0 * LR_FN(lr_load)(m0 + j);
          v += p1 * LR_FN(lr_load)(m1 + j);
          v += p2 * LR_FN(lr_load)(m2 + j);
          v += p3 * LR_FN(lr_load)(m3 + j);
          memcpy(q + j, &v, sizeof v);
        }
        for (; j < w; j++) {
          LR_T v = q[j];
          v += p0 * m0[j];
          v += p1 * m1[j];
          v += p2 * m2[j];
          v += p3 * m3[j];
          q[j] = v;
        }
      }
    }
    for (; i < rows; i++) {
      const LR_T *mi = m + i * cols + j0;
      for (size_t k = 0; k < r; k++) LR_FN(lr_axpy)(qt + k * cols + j0, pt[k * rows + i], mi, w);
    }
  }
}

void LR_FN(sc_lr_expand)(LR_T *out, size_t nrows, size_t cols, const LR_T *pt, size_t ldp,
                         const LR_T *qt, size_t r, LR_T alpha, LR_T beta) {
  for (size_t i = 0; i < nrows; i++) {
    LR_T *oi = out + i * cols;
    const LR_T *pi = pt + i;
    /* The sum over k in order from zero, held in a register per vector of
     * columns; then beta out + alpha sum. */
    size_t j = 0;
    for (; j + LR_VL <= cols; j += LR_VL) {
      LR_V acc = {0};
      for (size_t k = 0; k < r; k++) acc += pi[k * ldp] * LR_FN(lr_load)(qt + k * cols + j);
      LR_V o = alpha * acc;
      if (beta != 0) o = beta * LR_FN(lr_load)(oi + j) + o;
      memcpy(oi + j, &o, sizeof o);
    }
    for (; j < cols; j++) {
      LR_T acc = 0;
      for (size_t k = 0; k < r; k++) acc += pi[k * ldp] * qt[k * cols + j];
      oi[j] = beta != 0 ? beta * oi[j] + alpha * acc : alpha * acc;
    }
  }
}

size_t LR_FN(sc_lr_orth)(LR_T *vt, size_t n, size_t r) {
  size_t kept = 0;
  for (size_t k = 0; k < r; k++) {
    LR_T *v = vt + k * n;
    const LR_T orig = sqrt(LR_FN(lr_dot)(v, v, n));
    LR_T nrm = orig;
    /* Twice is enough (Kahan-Parlett) unless a pass cancels most of what is
     * left; a third pass then covers what rounding brought back. */
    for (int pass = 0; pass < 3 && k > 0 && nrm > 0; pass++) {
      for (size_t j = 0; j < k; j++) {
        const LR_T *u = vt + j * n;
        const LR_T d = LR_FN(lr_dot)(v, u, n);
        if (d != 0) LR_FN(lr_axpy)(v, -d, u, n);
      }
      const LR_T before = nrm;
      nrm = sqrt(LR_FN(lr_dot)(v, v, n));
      if (nrm > (LR_T)0.5 * before) break;
    }
    if (!(nrm > (LR_T)(64 * LR_EPS) * orig) || !(nrm < INFINITY)) {
      for (size_t x = 0; x < n; x++) v[x] = 0;
      continue;
    }
    const LR_T inv = 1 / nrm;
    for (size_t x = 0; x < n; x++) v[x] *= inv;
    kept++;
  }
  return kept;
}

void LR_FN(sc_lr_normal)(LR_T *out, size_t n, uint64_t seed) {
  uint64_t s = seed;
  for (size_t x = 0; x < n; x += 2) {
    /* Uniforms in (0, 1]: 53 bits, never 0 so that the log is finite. */
    const double u1 = ((double)(lr_splitmix64(&s) >> 11) + 1) * 0x1p-53;
    const double u2 = (double)(lr_splitmix64(&s) >> 11) * 0x1p-53;
    const double rad = sqrt(-2 * log(u1)), th = 6.283185307179586 * u2;
    out[x] = (LR_T)(rad * cos(th));
    if (x + 1 < n) out[x + 1] = (LR_T)(rad * sin(th));
  }
}

#undef LR_V
#undef LR_VL
#undef LR_FN
#undef LR_CAT
#undef LR_CAT_
