/* SPDX-License-Identifier: BSD-3-Clause */
/* `sc_gtopk_perf --select`: times exact against Gaussian and MSTopK top-k
 * selection on normally distributed data and reports count/k and MSTopK's
 * overlap with the exact top k. Called by sc_gtopk_perf's
 * main when its arguments contain --select; returns the process exit code. */
#ifndef SC_PERF_GTOPK_SELECT_H
#define SC_PERF_GTOPK_SELECT_H

int sc_gtopk_select_main(int argc, char **argv);

#endif
