/* SPDX-License-Identifier: BSD-3-Clause */
/* One notion of locality for the cost model: the transport describes the
 * link of every pair of ranks (its props op, the same answer on every
 * rank), these functions fold the pairs into the plain parameters lib/tune/
 * takes (a kind, the single-copy threshold, whether receivers spin). Pure,
 * so that test/unit/test_tune.c checks the decision on hand-built pairs. */
#ifndef SC_LINKS_H
#define SC_LINKS_H

#include <stddef.h>

#include "lib/tune/tune.h"
#include "transport/transport.h"

typedef struct sc_links {
  int npairs;
  int other_host;         /* pairs on different hosts */
  int host_net;           /* pairs of one host through a network stack */
  int host_mem;           /* pairs of one host through memory */
  int all_spin;           /* every receiver polls before it sleeps */
  int copy_never;         /* some memory pair never reads by single copy */
  size_t single_copy_min; /* the largest threshold of the memory pairs */
  int lat_unknown, bw_unknown;
  int unfitted;         /* pairs of one host the one-host defaults were not fitted to */
  double latency_s;     /* the largest nominal latency */
  double bandwidth_bps; /* the smallest nominal bandwidth */
} sc_links_t;

void sc_links_init(sc_links_t *l);
/* One ordered pair (a, b): a sends, b receives. */
void sc_links_add(sc_links_t *l, const sc_tp_props_t *p);
/* Nothing another pair could add changes the model any more. */
int sc_links_settled(const sc_links_t *l);
/* Any pair on another host: the network model; else one host, over TCP if
 * any pair of it goes through a network stack (its wake-ups and slower
 * copies are what the job waits for), else through memory. */
sc_tune_kind_t sc_links_kind(const sc_links_t *l);
/* The default model of the links: host_cores are the cores of the one
 * host (ignored for the network model), spin_us SC_SPIN_US. Nominal
 * latency and bandwidth, when every pair of a network states them, replace
 * the network defaults. */
void sc_links_model(const sc_links_t *l, int host_cores, int spin_us, sc_link_model_t *m);
/* The network model m of a job whose hosts hold several ranks: the link of
 * two ranks of one host (p, the props of such a pair) gets the one-host
 * defaults of its kind, so that the cost model prices messages inside a
 * host apart from those between hosts (tune.h: local_alpha_s). */
void sc_links_local(const sc_tp_props_t *p, int host_cores, sc_link_model_t *m);

#endif
