/* SPDX-License-Identifier: BSD-3-Clause */
/* The error-feedback state (sc_ef_t) shared by the host step (lib/sparse/ef.c)
 * and the device step (lib/sparse/ef_dev.c). */
#ifndef SC_SPARSE_EF_H
#define SC_SPARSE_EF_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/sparse_merge.h"
#include "kernels/devrt.h"
#include "lib/core/device.h"
#include "sparsecoll.h"

/* Host work buffers of one step, sized by k. */
typedef struct ef_work {
  uint32_t *sel_idx, *out_idx, *w_idx;
  void *sel_val, *out_val, *w_val;
  uint64_t *w_key;
  uint8_t *w_src, *surv;
  size_t cap; /* entries each buffer holds; 0: none allocated */
} ef_work_t;

/* Where the residual lives. It is fixed by the first step that uses the
 * state: the residual belongs with the gradients (docs/API.md: "An sc_ef_t keeps
 * its residual where the gradients it is used with live"), and moving it
 * between host and device behind the caller's back would hide a mistake. */
typedef enum sc_ef_kind { SC_EF_UNBOUND, SC_EF_HOST, SC_EF_DEVICE } sc_ef_kind_t;

struct sc_ef {
  size_t n;
  sc_dtype_t dtype;
  void *residual; /* host memory until bound to a device, then device memory */
  sc_ef_kind_t kind;
  int device;                   /* SC_EF_DEVICE: the device of the residual */
  const sc_devrt_t *rt;         /* SC_EF_DEVICE: the runtime that allocated it */
  ef_work_t work;               /* host path: kept from step to step (same k every step) */
  struct sc_hitopk_buf *hitopk; /* hitopk's buffers (lib/sparse/hitopk.c), kept likewise */
};

/* v[i] = x in dtype t (float16/bfloat16 rounded through float32). */
void sc_ef_put(sc_dtype_t t, void *v, size_t i, double x);
/* res += grad over n elements, in the dtype's arithmetic (fp16/bf16 through
 * float32): the step's acc = grad + residual, for ef.c and hitopk.c. */
void sc_ef_accumulate(sc_dtype_t t, void *res, const void *grad, size_t n);

/* The one check of sc_gtopk_allreduce's arguments, for it and for its stream
 * form (path SC_PATH_ANY or SC_PATH_STREAM, sc_buffers_classify's): on
 * success *k is clamped to n, *kind is grad's memory, and ef (if any) is
 * unbound or bound to that kind. */
sc_result_t sc_gtopk_check(const char *fn, sc_buf_path_t path, const void *grad, size_t n,
                           sc_dtype_t dtype, size_t *k, sc_select_t method, const sc_ef_t *ef,
                           const sc_comm_t *comm, sc_mem_kind_t *kind);
/* ef (NULL: none) may take gradients of this memory kind: it is unbound or
 * bound to the same kind (which device is the device step's check). */
sc_result_t sc_ef_check_kind(const char *fn, const sc_ef_t *ef, sc_mem_kind_t kind);

/* For the stream form, on the caller's thread before its stream waits: the
 * device memory sc_ef_step_device will need for (n, dtype, k) and ef's
 * device residual, allocated now, because a CUDA allocation may wait for
 * every stream and the job runs while the caller's stream waits for it
 * (lib/core/exec_device_mem.c says more). The job finds them in the context
 * pool's most recently released context. */
sc_result_t sc_ef_device_prepare(const char *fn, size_t n, sc_dtype_t dtype, size_t k, sc_ef_t *ef);
/* The device form of sc_gtopk_allreduce (arguments checked, k <= n). */
sc_result_t sc_ef_step_device(void *grad, size_t n, sc_dtype_t dtype, size_t k, sc_select_t method,
                              sc_ef_t *ef, sc_comm_t *comm);

/* Copies the residual into out (host memory, n elements), wherever it lives
 * (tests compare the two paths' residuals through it). */
sc_result_t sc_ef_residual_read(const sc_ef_t *ef, void *out);

/* GAUSSIAN may select up to 2k: keeps the exact top-k of the nnz selected
 * (sel_idx, sel_val) in place and returns that count (<= k). mw has room
 * for nnz entries; out_idx/out_val are scratch for nnz entries. Both paths
 * trim with this, so they send the same sets. */
size_t sc_ef_trim(sc_dtype_t dtype, size_t k, uint32_t *sel_idx, void *sel_val, size_t nnz,
                  uint32_t *out_idx, void *out_val, sc_merge_work_t *mw);

#endif
