#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Each all-reduce algorithm forced through SC_ALGO on 1, 2, 3, 6 and 8
# ranks: every dtype, op, placement and count against the reference.
# The schedules' shapes come from P: test/sim (sim_rd_rabenseifner, sim_tree,
# sim_dense) runs every algorithm through the simulator on 1..64 ranks; what
# this adds is the executor and a transport under each shape. 1 is the
# trivial copy; 2 and 8 are powers of two with an odd number of exchanges
# (recursive doubling's in-place copy first); 3 folds a rank onto a group of
# 2 and 6 two onto a group of 4 (an even number of exchanges); the tree is
# shifted on 3 (odd P) and mirrored on 2, 6 and 8 (even P). 5 and 7 reached
# the same branches as 3 and 6 (a fold of one or three ranks onto 4, odd
# trees), at 12 of every algorithm's 32 ranks.
# SC_TEST_SAMPLE=1 (the sanitizer runs): 2, 5 and 8 ranks (a power of two, an
# odd count, the largest).
. "$top_srcdir/test/multi/lib.sh"
sizes="1 2 3 6 8"
[ "${SC_TEST_SAMPLE:-0}" = 1 ] && sizes="2 5 8"
for algo in ring tree rd rabenseifner; do
  for n in $sizes; do
    check "SC_ALGO=$algo n=$n" env SC_ALGO=$algo "$SC_RUN" -n "$n" --timeout 300 --label "$MR/mr_collectives" --allreduce-only
  done
done
check "SC_TUNE=measure n=4 (auto)" env SC_TUNE=measure "$SC_RUN" -n 4 --timeout 300 --label "$MR/mr_collectives" --allreduce-only
# SC_TUNE's default calibrates across hosts (netbed_test.sh checks that side)
# and over UCX or verbs: on one host over shm or tcp no rank calibrates, unless
# SC_TUNE=measure says so; over ucx and verbs both do, and model stops them.
calibrations() { # calibrations [SC_TUNE]: how many ranks of 2 logged a calibration (default auto)
  env SC_TUNE="${1:-auto}" SC_DEBUG=INFO SC_DEBUG_SUBSYS=TUNE "$SC_RUN" -n 2 --timeout 120 \
    "$top_builddir/sc_allreduce_perf" -b 8 -e 8 -n 1 -w 0 2>&1 | grep -c 'calibrated on 2 ranks'
}
case ${SC_TRANSPORT:-auto} in
ucx | verbs)
  unfitted() { [ "$(calibrations)" -eq 2 ] && [ "$(calibrations model)" -eq 0 ]; }
  check "SC_TUNE=auto (the default) on one host over $SC_TRANSPORT: both ranks calibrate (model: none)" unfitted
  ;;
*)
  one_host_default() { [ "$(calibrations)" -eq 0 ] && [ "$(calibrations measure)" -eq 2 ]; }
  check "SC_TUNE=auto (the default) on one host: no calibration (measure: both ranks)" one_host_default
  ;;
esac
finish
