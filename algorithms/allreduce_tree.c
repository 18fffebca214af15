/* Placeholder: being written (issue: dense all-reduce suite). */
#include "algorithms/algorithms.h"
#include "lib/error.h"

sc_result_t sc_tree_allreduce_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  return SC_ERR(SC_ERR_UNSUPPORTED, "double binary tree is not written yet");
}
