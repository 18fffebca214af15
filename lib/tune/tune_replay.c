/* SPDX-License-Identifier: BSD-3-Clause */
/* The schedules a timing simulation replays, kept compact (sc_tune_replay_t):
 * of each step what the simulations read, and the one-host model's cache
 * term worked out from the whole step before it is dropped. */
#include <stdlib.h>
#include <string.h>

#include "lib/base/error.h"
#include "lib/tune/tune.h"

void sc_tune_replay_reset(sc_tune_replay_t *r, int with_cold) {
  r->nsteps = 0;
  r->w = 0;
  r->with_cold = with_cold;
}

/* Room for n more steps, and their cold terms when the replay keeps them. */
static sc_result_t sc_replay_grow(sc_tune_replay_t *r, size_t n) {
  const size_t need = r->nsteps + n;
  if (need > r->cap) {
    size_t cap = r->cap ? r->cap : 1024;
    while (cap < need) cap *= 2;
    sc_tune_step_t *steps = realloc(r->steps, cap * sizeof(*steps));
    if (!steps) return SC_ERR(SC_ERR_NOMEM, "cost model schedules of %zu steps", cap);
    r->steps = steps;
    r->cap = cap;
  }
  if (r->with_cold && need > r->cold_cap) {
    double *cold = realloc(r->cold, r->cap * sizeof(*cold));
    if (!cold) return SC_ERR(SC_ERR_NOMEM, "cost model cache terms of %zu steps", r->cap);
    r->cold = cold;
    r->cold_cap = r->cap;
  }
  return SC_SUCCESS;
}

sc_result_t sc_tune_replay_add(sc_tune_replay_t *r, const sc_link_model_t *m, size_t es,
                               const sc_sched_t *s) {
  if (r->w + 2 > r->first_cap) {
    int cap = r->first_cap ? 2 * r->first_cap : 64;
    while (cap < r->w + 2) cap *= 2;
    size_t *first = realloc(r->first, (size_t)cap * sizeof(*first));
    if (!first) return SC_ERR(SC_ERR_NOMEM, "cost model schedules of %d ranks", r->w + 1);
    r->first = first;
    r->first_cap = cap;
  }
  r->first[r->w] = r->nsteps;
  SC_CHECK(sc_replay_grow(r, s->nsteps));
  for (size_t k = 0; k < s->nsteps; k++) {
    const sc_step_t *st = &s->steps[k];
    r->steps[r->nsteps + k] = (sc_tune_step_t){
        .count = st->count, .peer = st->peer, .kind = st->kind, .flags = st->flags};
  }
  if (r->with_cold && s->nsteps) {
    /* The rank's table of regions: 4 slots per step at least. */
    size_t cap = 16;
    while (cap < 4 * s->nsteps) cap *= 2;
    if (cap > r->key_cap) {
      uint64_t *key = realloc(r->key, cap * sizeof(*key));
      if (key) r->key = key;
      double *last = key ? realloc(r->last, cap * sizeof(*last)) : NULL;
      if (last) r->last = last;
      if (!key || !last)
        return SC_ERR(SC_ERR_NOMEM, "host cost model cache state for %zu steps", s->nsteps);
      r->key_cap = cap;
    }
    sc_tune_host_cold(m, es, s->steps, s->nsteps, r->key, r->last, cap, r->cold + r->nsteps);
  }
  r->nsteps += s->nsteps;
  r->first[++r->w] = r->nsteps;
  return SC_SUCCESS;
}

void sc_tune_replay_free(sc_tune_replay_t *r) {
  free(r->steps);
  free(r->cold);
  free(r->first);
  free(r->key);
  free(r->last);
  *r = (sc_tune_replay_t){0};
}
