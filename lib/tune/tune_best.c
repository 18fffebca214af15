/* SPDX-License-Identifier: BSD-3-Clause */
/* The cheapest of a collective's registered algorithms under a model: pure,
 * so that every rank makes the same choice from the same model. */
#include <math.h>

#include "algorithms/sparse_registry.h"
#include "lib/base/error.h"
#include "lib/tune/tune.h"

/* The all-reduce candidate whose measured network factor a's collective's
 * candidate takes: itself for an all-reduce, the registry's twin for a
 * reduce-scatter or all-gather (recursive halving and doubling change
 * partners every step as Rabenseifner does, and lose link time on a real
 * network as it does); -1: none. */
static int sc_tune_factor_index(sc_coll_t coll, int candidate) {
  if (coll == SC_COLL_ALLREDUCE) return candidate;
  int n;
  const sc_algo_entry_t *c = sc_algo_candidates(coll, &n);
  if (candidate < 0 || candidate >= n || !c[candidate].allreduce_twin) return -1;
  return sc_algo_find(SC_COLL_ALLREDUCE, c[candidate].allreduce_twin);
}

/* The measured network factor of all-reduce candidate f (1: none measured, or no f). */
static double sc_tune_net_factor(const sc_link_model_t *m, int f) {
  return f >= 0 && f < SC_TUNE_MAX_CANDIDATES && m->allreduce_beta_scale[f] > 0
             ? m->allreduce_beta_scale[f]
             : 1.0;
}

/* sc_tune_predict with that network factor (sc_link_model_t.allreduce_beta_scale);
 * sym: how the ranks' schedules map onto each other (a window of ranks is
 * replayed at large P). */
static sc_result_t sc_tune_predict_scaled(const sc_link_model_t *m, sc_sched_gen_t gen,
                                          const sc_coll_args_t *a, int candidate, int sym,
                                          sc_tune_scratch_t *t, double *est) {
  sc_link_model_t mi = *m;
  mi.beta_s_per_b *= sc_tune_net_factor(m, sc_tune_factor_index(a->coll, candidate));
  return sc_tune_predict_in(&mi, gen, a, sym, t, est);
}

int sc_tune_over_budget(const sc_link_model_t *m, const sc_algo_entry_t *c, int nranks) {
  return c->all_peers && m->peer_budget > 0 && nranks - 1 > m->peer_budget;
}

sc_result_t sc_tune_best_rail(const sc_link_model_t *m, const sc_coll_args_t *a, int *best,
                              double *est, int *rail) {
  int n, hier_rail = 0;
  const sc_algo_entry_t *c = sc_algo_candidates(a->coll, &n);
  sc_tune_scratch_t t = {0};
  *best = 0;
  /* The first pass leaves out what needs more connections than the job's
   * descriptors allow; the second, only when nothing else is left, takes
   * them back (the connections that then fail say which limit to raise). */
  for (int pass = 0; pass < 2 && (pass == 0 || est[*best] == INFINITY); pass++) {
    for (int i = 0; i < n; i++) {
      if (pass == 1 && !sc_tune_over_budget(m, &c[i], a->nranks)) continue;
      est[i] = INFINITY;
      if (pass == 0 && sc_tune_over_budget(m, &c[i], a->nranks)) {
        continue;
      } else if (c[i].hier &&
                 (!sc_hier_useful(a) || m->local_beta_s_per_b <= 0 || m->host_cores > 0)) {
        continue; /* without a hierarchy it is a slower flat algorithm: not a choice */
      } else if (c[i].hier && a->coll == SC_COLL_ALLREDUCE) {
        hier_rail = sc_tune_hier_rail(m, a, &est[i]);
      } else if (sc_tune_predict_scaled(m, c[i].gen, a, i, c[i].sym, &t, &est[i]) != SC_SUCCESS) {
        est[i] = INFINITY; /* a candidate that cannot build its schedule here */
      }
      if (est[i] < est[*best]) *best = i;
    }
  }
  sc_tune_scratch_free(&t);
  if (rail) *rail = c[*best].hier ? hier_rail : 0;
  if (est[*best] == INFINITY)
    return SC_ERR(SC_ERR_INTERNAL, "no %s algorithm can run on %d ranks for %zu elements",
                  sc_coll_name(a->coll), a->nranks, a->count);
  return SC_SUCCESS;
}

int sc_tune_a2av_hier_wins(const double *pairwise, const double *hier, int n, double *lo,
                           double *hi, int *worst) {
  *lo = INFINITY;
  *hi = n > 0 ? 0 : INFINITY;
  *worst = 0;
  for (int i = 0; i < n; i++) {
    const double r = isfinite(pairwise[i]) && isfinite(hier[i]) && pairwise[i] > 0
                         ? hier[i] / pairwise[i]
                         : INFINITY;
    if (r < *lo) *lo = r;
    if (r > *hi) {
      *hi = r;
      *worst = i;
    }
  }
  return *lo < 1 && *hi <= SC_TUNE_A2AV_HIER_SLACK;
}

sc_result_t sc_tune_best(const sc_link_model_t *m, const sc_coll_args_t *a, int *best,
                         double *est) {
  return sc_tune_best_rail(m, a, best, est, NULL);
}

int sc_tune_hier_rail(const sc_link_model_t *m, const sc_coll_args_t *a, double *est) {
  int n, best = 0;
  const sc_algo_entry_t *c = sc_algo_candidates(SC_COLL_ALLREDUCE, &n);
  const int hier = sc_algo_hier_index(SC_COLL_ALLREDUCE);
  double best_s = INFINITY;
  if (est) *est = INFINITY;
  if (!a->host_of) return 0;
  /* Each flat candidate on the rails, priced inside the whole hierarchy: the
   * rails of a host share its link and overlap the intra-host phases, so the
   * cheapest on one rank per host alone is not the cheapest there (alone,
   * Rabenseifner's fewer steps won; sharing a link, the ring's). */
  sc_tune_scratch_t t = {0};
  for (int j = 0; hier >= 0 && j < n; j++) {
    if (c[j].hier) continue;
    sc_coll_args_t ai = *a;
    ai.rail_algo = j;
    double s;
    /* With ring rails the whole schedule rotates by one host's ranks (other
     * rails are not shown to map onto each other inside the hierarchy). */
    const int sym = c[j].sym == SC_SYM_SHIFT ? SC_SYM_SHIFT : SC_SYM_NONE;
    if (sc_tune_predict_scaled(m, c[hier].gen, &ai, j, sym, &t, &s) == SC_SUCCESS && s < best_s) {
      best_s = s;
      best = j;
    }
  }
  sc_tune_scratch_free(&t);
  if (est) *est = best_s;
  return best;
}

const char *sc_tune_candidate_name(sc_coll_t coll, int index) {
  int n;
  const sc_algo_entry_t *c = sc_algo_candidates(coll, &n);
  return index >= 0 && index < n ? c[index].name : "?";
}

int sc_tune_best_sparse(const sc_link_model_t *m, const sc_coll_args_t *a,
                        double est[SC_SPARSE_ALGO_COUNT]) {
  int n, best = -1;
  const sc_sparse_algo_entry_t *c = sc_sparse_algos(&n);
  for (int i = 0; i < n; i++) est[c[i].algo] = INFINITY;
  for (int i = 0; i < n; i++) {
    /* A row without a schedule (hitopk) is priced by its caller, knowing n. */
    if (!c[i].pick || !c[i].gen || (c[i].hier && !sc_hier_useful(a))) continue;
    sc_link_model_t mi = *m;
    mi.beta_s_per_b *= sc_tune_net_factor(m, sc_algo_find(SC_COLL_ALLREDUCE, c[i].allreduce_twin));
    double e;
    if (sc_tune_predict(&mi, c[i].gen, a, &e) != SC_SUCCESS) e = INFINITY;
    est[c[i].algo] = e;
    /* The first candidate wins ties, and stands when none can be priced. */
    if (best < 0 || e < est[best]) best = (int)c[i].algo;
  }
  return best < 0 ? (int)SC_SPARSE_GTOPK : best;
}

double sc_tune_hitopk_seconds(const sc_link_model_t *m, int nhosts, int local_size, size_t n,
                              size_t k, size_t es) {
  if (nhosts < 1 || local_size < 1 || m->host_cores > 0) return INFINITY;
  const double L = local_size, H = nhosts;
  const double shard = (double)((n + (size_t)local_size - 1) / (size_t)local_size);
  const double kl = (double)((k + (size_t)local_size - 1) / (size_t)local_size);
  const double la = m->local_beta_s_per_b > 0 ? m->local_alpha_s : m->alpha_s;
  const double lb = m->local_beta_s_per_b > 0 ? m->local_beta_s_per_b : m->beta_s_per_b;
  /* Ring reduce-scatter and all-gather inside the host, each (L-1) steps of
   * a shard, the reduce-scatter adding what it receives. */
  double t = 2 * (L - 1) * (la + shard * (double)es * lb) +
             (L - 1) * shard * (double)es * m->gamma_s_per_b;
  /* The L rails' ring all-gathers among the hosts share each host's one
   * link: (H-1) steps of L records of 8 + kl (4 + es) bytes. */
  t += (H - 1) * (m->alpha_s + L * (8 + kl * (4 + (double)es)) * m->beta_s_per_b);
  return t;
}
