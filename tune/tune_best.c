/* The cheapest of a collective's registered algorithms under a model: pure,
 * so that every rank makes the same choice from the same model. */
#include <math.h>

#include "algorithms/sparse.h"
#include "base/error.h"
#include "tune/tune.h"

sc_result_t sc_tune_best(const sc_link_model_t *m, const sc_coll_args_t *a, int *best,
                         double *est) {
  int n;
  const sc_algo_entry_t *c = sc_algo_candidates(a->coll, &n);
  *best = 0;
  for (int i = 0; i < n; i++) {
    sc_coll_args_t ai = *a;
    if (c[i].hier) {
      /* Without a hierarchy it is a slower flat algorithm: not a choice. */
      if (!sc_hier_useful(a) || m->local_beta_s_per_b <= 0 || m->host_cores > 0) {
        est[i] = INFINITY;
        continue;
      }
      if (a->coll == SC_COLL_ALLREDUCE) ai.rail_algo = sc_tune_hier_rail(m, a);
    }
    /* The all-reduce candidate's measured network factor (sc_link_model_t). */
    sc_link_model_t mi = *m;
    if (a->coll == SC_COLL_ALLREDUCE && i < SC_TUNE_MAX_CANDIDATES &&
        m->allreduce_beta_scale[i] > 0)
      mi.beta_s_per_b *= m->allreduce_beta_scale[i];
    /* A candidate that cannot build its schedule here is not a choice. */
    if (sc_tune_predict(&mi, c[i].gen, &ai, &est[i]) != SC_SUCCESS) est[i] = INFINITY;
    if (est[i] < est[*best]) *best = i;
  }
  if (est[*best] == INFINITY)
    return SC_ERR(SC_ERR_INTERNAL, "no %s algorithm can run on %d ranks for %zu elements",
                  sc_coll_name(a->coll), a->nranks, a->count);
  return SC_SUCCESS;
}

int sc_tune_hier_rail(const sc_link_model_t *m, const sc_coll_args_t *a) {
  if (!a->host_of) return 0;
  int nhosts = 0, lmax = 0;
  for (int r = 0; r < a->nranks; r++)
    if (a->host_of[r] >= nhosts) nhosts = a->host_of[r] + 1;
  for (int x = 0; x < nhosts; x++) {
    int l = 0;
    for (int r = 0; r < a->nranks; r++) l += a->host_of[r] == x;
    if (l > lmax) lmax = l;
  }
  if (nhosts < 2 || lmax < 1) return 0;
  /* One rail on its own: one rank per host, a share of the vector (the
   * rails' sharing of a host's link slows them alike). */
  sc_coll_args_t ra = *a;
  ra.host_of = NULL;
  ra.nranks = nhosts;
  ra.rank = 0;
  ra.count = (a->count + (size_t)lmax - 1) / (size_t)lmax;
  double est[SC_TUNE_MAX_CANDIDATES];
  int best;
  if (sc_tune_best(m, &ra, &best, est) != SC_SUCCESS) return 0;
  return best;
}

const char *sc_tune_candidate_name(sc_coll_t coll, int index) {
  int n;
  const sc_algo_entry_t *c = sc_algo_candidates(coll, &n);
  return index >= 0 && index < n ? c[index].name : "?";
}

int sc_tune_best_sparse(const sc_link_model_t *m, const sc_coll_args_t *a, double est[3]) {
  static const sc_sched_gen_t gens[3] = {sc_sparse_gtopk_schedule, sc_sparse_gtopk_tree_schedule,
                                         sc_sparse_gtopk_hier_schedule};
  static const int algos[3] = {SC_SPARSE_GTOPK, SC_SPARSE_GTOPK_TREE, SC_SPARSE_GTOPK_HIER};
  const int rd = sc_algo_find(SC_COLL_ALLREDUCE, "rd");
  const double rd_scale = rd >= 0 && rd < SC_TUNE_MAX_CANDIDATES && m->allreduce_beta_scale[rd] > 0
                              ? m->allreduce_beta_scale[rd]
                              : 1.0;
  int best = 0;
  for (int i = 0; i < 3; i++) {
    est[i] = INFINITY;
    if (algos[i] == SC_SPARSE_GTOPK_HIER && !sc_hier_useful(a)) continue;
    sc_link_model_t mi = *m;
    if (algos[i] != SC_SPARSE_GTOPK_TREE) mi.beta_s_per_b *= rd_scale;
    if (sc_tune_predict(&mi, gens[i], a, &est[i]) != SC_SUCCESS) est[i] = INFINITY;
    if (est[i] < est[best]) best = i;
  }
  return algos[best];
}
