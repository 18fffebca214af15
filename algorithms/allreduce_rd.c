/* Placeholder: being written (issue: dense all-reduce suite). */
#include "algorithms/algorithms.h"
#include "lib/error.h"

sc_result_t sc_rd_allreduce_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  return SC_ERR(SC_ERR_UNSUPPORTED, "recursive doubling is not written yet");
}

sc_result_t sc_rd_allgather_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  return SC_ERR(SC_ERR_UNSUPPORTED, "recursive doubling all-gather is not written yet");
}
