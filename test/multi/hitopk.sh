#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sc_gtopk_allreduce with SC_GTOPK_ALGO=hitopk (mr_hitopk) on emulated host
# layouts (SC_RANKS_PER_HOST), hosts x ranks per host: 2x2, 2x3, 3x2, 1x4,
# 4x1 and 1x1 over tcp and shm, against the test's reference; then hosts of
# unequal size (2 + 1); then device gradients through the stand-in on 2x2
# and 3x2, each step bit for bit against the host step on the same data
# (and the stream form refused with SC_ERR_UNSUPPORTED).
# SC_TEST_SAMPLE=1 (the sanitizer runs): 2x2 over tcp, 3x2 over shm, 2 + 1.
. "$top_srcdir/test/multi/lib.sh"
run() { # run NAME N RANKS-PER-HOST TRANSPORT ARGS...
  name=$1 n=$2 m=$3 tp=$4
  shift 4
  check "$name" env SC_GTOPK_ALGO=hitopk SC_RANKS_PER_HOST="$m" SC_TRANSPORT="$tp" \
    "$SC_RUN" -n "$n" --timeout 300 "$MR/mr_hitopk" "$@"
}
layouts="2x2:tcp 2x3:shm 3x2:tcp 1x4:shm 4x1:tcp 1x1:tcp"
[ "${SC_TEST_SAMPLE:-0}" = 1 ] && layouts="2x2:tcp 3x2:shm"
for l in $layouts; do
  hl=${l%:*} tp=${l#*:}
  h=${hl%x*} m=${hl#*x}
  run "hitopk $h hosts x $m ranks over $tp" $((h * m)) "$m" "$tp"
done
run "hitopk on hosts of 2 and 1 ranks: SC_ERR_UNSUPPORTED" 3 2 tcp --expect-unsupported
if device_runtime "$(cd "$top_builddir" && pwd)/test/devfake/.libs/libsc_devfake.so"; then
  run "hitopk 2 hosts x 2 ranks, device gradients, over shm" 4 2 shm --device
  run "hitopk 3 hosts x 2 ranks, device gradients, over tcp" 6 2 tcp --device
else
  echo "SKIP: device row (no device stand-in)"
fi
finish
