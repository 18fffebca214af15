/* SPDX-License-Identifier: BSD-3-Clause */
/* The kernel-driven all-reduce (kernels/ipc_allreduce_plan.h) on the stand-in
 * runtime: one block, run by the stream's thread on host views of every
 * rank's region (the peers' through the stand-in's IPC mappings), with the
 * flags as release/acquire atomics, the same chunk plan, the same reduction
 * order (rank order, the CPU kernels) and the same bounded waits as the CUDA
 * kernel, so that the path, its agreement and its failures are tested on
 * machines without a GPU. The arguments outgrow launch_host's copy, so they
 * travel in an allocation the run frees (the stand-in is a test runtime). */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/reduce.h"
#include "kernels/devrt_emu.h"
#include "kernels/ipc_allreduce_plan.h"
#include "lib/base/clock.h"
#include "lib/base/dtype.h"
#include "lib/base/error.h"

/* Waits of the emulated barrier: yield for a while, then sleep in slices
 * (ranks outnumber the cores of a test machine). */
#define EMU_YIELDS   200
#define EMU_SLEEP_NS 50000L

static int emu_give_up(const sc_ipcar_args_t *a, uint32_t why) {
  uint32_t zero = 0;
  __atomic_compare_exchange_n(sc_ipcar_status(a->region[a->rank]), &zero, why, 0, __ATOMIC_ACQ_REL,
                              __ATOMIC_ACQUIRE);
  return 1;
}

static int emu_barrier(const sc_ipcar_args_t *a, uint32_t e) {
  for (int t = 0; t < a->nranks; t++)
    __atomic_store_n(sc_ipcar_flag(a->region[t], 0, (uint32_t)a->rank), e, __ATOMIC_RELEASE);
  const int64_t start = sc_now_us();
  for (int t = 0; t < a->nranks; t++) {
    volatile uint32_t *mine = sc_ipcar_flag(a->region[a->rank], 0, (uint32_t)t);
    for (unsigned spins = 0; !sc_ipcar_reached(__atomic_load_n(mine, __ATOMIC_ACQUIRE), e);
         spins++) {
      uint32_t why = 0;
      if (__atomic_load_n(a->abort_flag, __ATOMIC_ACQUIRE))
        why = SC_IPCAR_ST_ABORTED | (uint32_t)t;
      else if ((uint64_t)(sc_now_us() - start) * 1000 > a->timeout_ns)
        why = SC_IPCAR_ST_TIMEOUT | (uint32_t)t;
      if (why) return emu_give_up(a, why);
      if (spins < EMU_YIELDS) {
        sched_yield();
      } else {
        struct timespec ts = {0, EMU_SLEEP_NS};
        nanosleep(&ts, NULL);
      }
    }
    if (__atomic_load_n(sc_ipcar_status(a->region[t]), __ATOMIC_ACQUIRE) != 0)
      return emu_give_up(a, SC_IPCAR_ST_PEER | (uint32_t)t);
  }
  return 0;
}

/* Elements [e0, e1) of every rank's half, reduced in rank order into out. */
static void emu_fold(const sc_ipcar_args_t *a, uint8_t *out, uint64_t e0, uint64_t e1) {
  const sc_dtype_t dt = (sc_dtype_t)a->dtype;
  const size_t es = sc_dtype_size(dt);
  if (e1 <= e0) return;
  const size_t n = (size_t)(e1 - e0);
  memcpy(out + e0 * es, a->region[0] + a->half_off + e0 * es, n * es);
  for (int j = 1; j < a->nranks; j++)
    sc_reduce_kernel(dt, (sc_redop_t)a->op, out + e0 * es, out + e0 * es,
                     a->region[j] + a->half_off + e0 * es, n);
  if (a->op == SC_AVG) sc_avg_finalize(dt, out + e0 * es, n, a->nranks);
}

static void run_ipcar(void *p) {
  sc_ipcar_args_t *a = *(sc_ipcar_args_t **)p;
  const size_t es = sc_dtype_size((sc_dtype_t)a->dtype);
  const uint64_t ve = SC_IPCAR_VEC / es, nvec = sc_ipcar_vecs(a->count, (uint32_t)es);
  uint8_t *out = a->out;
  if (emu_barrier(a, a->epoch)) goto done;
  if (a->mode == SC_IPCAR_ONESHOT) {
    emu_fold(a, out, 0, a->count);
    goto done;
  }
  uint64_t b, e;
  sc_ipcar_chunk(nvec, (uint32_t)a->nranks, (uint32_t)a->rank, &b, &e);
  /* The chunk's elements below count, folded into out first (the own half is
   * one of the inputs) and then published in the own half. */
  uint64_t e0 = b * ve, e1 = e * ve < a->count ? e * ve : a->count;
  emu_fold(a, out, e0, e1);
  if (e1 > e0) memcpy(a->region[a->rank] + a->half_off + e0 * es, out + e0 * es, (e1 - e0) * es);
  if (emu_barrier(a, a->epoch + 1)) goto done;
  for (int j = 0; j < a->nranks; j++) {
    if (j == a->rank) continue;
    sc_ipcar_chunk(nvec, (uint32_t)a->nranks, (uint32_t)j, &b, &e);
    e0 = b * ve;
    e1 = e * ve < a->count ? e * ve : a->count;
    if (e1 > e0) memcpy(out + e0 * es, a->region[j] + a->half_off + e0 * es, (e1 - e0) * es);
  }
done:
  free(a);
}

sc_result_t sc_emu_ipc_allreduce(const sc_devrt_t *rt, const struct sc_ipcar_args *in,
                                 void *stream) {
  const char *fn = "sc_dev_ipc_allreduce";
  const size_t es = sc_dtype_size((sc_dtype_t)in->dtype);
  if (es == 0) return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid dtype %d", fn, in->dtype);
  if (in->nranks < 1 || in->nranks > SC_IPCAR_MAX_RANKS || in->rank < 0 || in->rank >= in->nranks ||
      in->nblocks != 1)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: rank %d of %d, %d blocks (the stand-in runs one)", fn,
                  in->rank, in->nranks, in->nblocks);
  if (in->count == 0) return SC_SUCCESS;
  sc_ipcar_args_t *a = malloc(sizeof(*a));
  if (!a) return SC_ERR(SC_ERR_NOMEM, "%s: arguments", fn);
  *a = *in;
  /* Every region from its flags to the end of this launch's vectors. */
  const size_t need = in->half_off + sc_ipcar_vecs(in->count, (uint32_t)es) * SC_IPCAR_VEC;
  sc_result_t r = SC_SUCCESS;
  for (int j = 0; j < in->nranks && r == SC_SUCCESS; j++) {
    void *h = NULL;
    r = sc_emu_view(rt, in->region[j], need, fn, "a rank's region", &h);
    a->region[j] = h;
  }
  if (r == SC_SUCCESS) r = sc_emu_view(rt, in->out, in->count * es, fn, "out", &a->out);
  if (r != SC_SUCCESS) {
    free(a);
    return r;
  }
  r = rt->launch_host(stream, run_ipcar, &a, sizeof a);
  if (r != SC_SUCCESS) free(a);
  return r;
}
