/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_gtopk_allreduce_on_stream: the blocking gTop-k (lib/sparse/ef.c) run as a
 * queued job of the communicator's progress thread (lib/core/stream.h), once the
 * work the caller's stream holds before the call is done; the stream waits,
 * on the device, until the job released it. The blocking form's argument
 * check (sc_gtopk_check, on the stream path: device memory only) runs here,
 * so that a bad argument fails the call itself, not the communicator later. */
#include <string.h>

#include "kernels/devrt.h"
#include "lib/core/comm.h"
#include "lib/core/stream.h"
#include "lib/sparse/ef.h"

/* job_args: grad, n, k, method, ef. The call's check found device memory (the
 * stream path takes nothing else), so the job runs the device step directly:
 * classifying grad again would call a NULL grad (n = 0) host memory. */
static sc_result_t gtopk_job(sc_comm_t *comm, const sc_op_t *op) {
  void *grad = (void *)(uintptr_t)op->job_args[0];
  size_t n = (size_t)op->job_args[1], k = (size_t)op->job_args[2];
  sc_select_t method = (sc_select_t)op->job_args[3];
  sc_ef_t *ef = (sc_ef_t *)(uintptr_t)op->job_args[4];
  return sc_ef_step_device(grad, n, op->dtype, k, method, ef, comm);
}

sc_result_t sc_gtopk_allreduce_on_stream(void *grad, size_t n, sc_dtype_t dtype, size_t k,
                                         sc_select_t method, sc_ef_t *ef, sc_comm_t *comm,
                                         sc_stream_t stream) {
  const char *fn = "sc_gtopk_allreduce_on_stream";
  sc_mem_kind_t kind = SC_MEM_HOST;
  SC_CHECK(sc_gtopk_check(fn, SC_PATH_STREAM, grad, n, dtype, &k, method, ef, comm, &kind));
  /* hitopk's first step makes sub-communicators (sc_comm_split, collective
   * on comm), which a job of comm's own progress thread cannot do; the cost
   * model picks it for the blocking form only (it prices no staging). */
  if (comm->cfg.gtopk_algo == SC_SPARSE_HITOPK)
    return SC_ERR(SC_ERR_UNSUPPORTED,
                  "%s: SC_GTOPK_ALGO=hitopk is not a stream form's algorithm (use the blocking "
                  "sc_gtopk_allreduce, or another SC_GTOPK_ALGO)",
                  fn);
  sc_op_t op = {.coll = SC_COLL_ALLREDUCE,
                .recvbuf = grad,
                .count = n,
                .dtype = dtype,
                .op = SC_SUM,
                .device = 1,
                .job = gtopk_job};
  op.job_args[0] = (uint64_t)(uintptr_t)grad;
  op.job_args[1] = n;
  op.job_args[2] = k;
  op.job_args[3] = (uint64_t)method;
  op.job_args[4] = (uint64_t)(uintptr_t)ef;
  SC_CHECK(sc_ef_device_prepare(fn, n, dtype, k, ef));
  return sc_stream_submit(fn, comm, &op, stream);
}
