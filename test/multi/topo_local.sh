#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sc_comm_local on one host (loopback: every rank on host 0) for 1..5 ranks
# against the hostnames; SC_ALGO=hier there has no hierarchy and must fall
# back to a flat all-reduce that is still right for every dtype and op (and
# SC_RS_ALGO=hier, SC_AG_ALGO=hier to a flat reduce-scatter and all-gather).
. "$top_srcdir/test/multi/lib.sh"
for n in 1 2 5; do
  check "sc_comm_local n=$n" env SC_ALGO=hier "$SC_RUN" -n "$n" --timeout 120 "$MR/mr_topo_local" --algo hier-if-hierarchy
done
check "SC_ALGO=hier on one host n=3 (flat fallback)" env SC_ALGO=hier "$SC_RUN" -n 3 --timeout 300 --label "$MR/mr_collectives" --allreduce-only
check "SC_RS_ALGO=hier SC_AG_ALGO=hier on one host n=3 (flat fallback)" \
  env SC_RS_ALGO=hier SC_AG_ALGO=hier "$SC_RUN" -n 3 --timeout 300 --label "$MR/mr_collectives" --rs-ag-only
finish
