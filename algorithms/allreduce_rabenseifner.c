/* Placeholder: being written (issue: dense all-reduce suite). */
#include "algorithms/algorithms.h"
#include "lib/error.h"

sc_result_t sc_rabenseifner_allreduce_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  return SC_ERR(SC_ERR_UNSUPPORTED, "Rabenseifner is not written yet");
}

sc_result_t sc_rh_reduce_scatter_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  return SC_ERR(SC_ERR_UNSUPPORTED, "recursive halving is not written yet");
}
