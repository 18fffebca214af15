/* The cheapest of a collective's registered algorithms under a model: pure,
 * so that every rank makes the same choice from the same model. */
#include <math.h>

#include "base/error.h"
#include "tune/tune.h"

sc_result_t sc_tune_best(const sc_link_model_t *m, const sc_coll_args_t *a, int *best,
                         double *est) {
  int n;
  const sc_algo_entry_t *c = sc_algo_candidates(a->coll, &n);
  *best = 0;
  for (int i = 0; i < n; i++) {
    /* A candidate that cannot build its schedule here is not a choice. */
    if (sc_tune_predict(m, c[i].gen, a, &est[i]) != SC_SUCCESS) est[i] = INFINITY;
    if (est[i] < est[*best]) *best = i;
  }
  if (est[*best] == INFINITY)
    return SC_ERR(SC_ERR_INTERNAL, "no %s algorithm can run on %d ranks for %zu elements",
                  sc_coll_name(a->coll), a->nranks, a->count);
  return SC_SUCCESS;
}

const char *sc_tune_candidate_name(sc_coll_t coll, int index) {
  int n;
  const sc_algo_entry_t *c = sc_algo_candidates(coll, &n);
  return index >= 0 && index < n ? c[index].name : "?";
}
