#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Device buffers over SC_TRANSPORT=ucx, through the device stand-in
# (test/devfake/, SC_DEVRT_STANDIN): a pair's device_mem needs both ranks'
# UCX to report CUDA memory and the CUDA runtime, so here (Debian's UCX 1.13
# has no CUDA; the stand-in is not CUDA) every peer must be staged through
# pinned host memory, and every result must still match the host reference
# each rank computes (test/multi/mr_common.c). First the verdict itself, from
# the ranks' INFO log; then every dense collective, each all-reduce
# algorithm, small chunks, one device per rank, the sparse calls and fusion
# (against the same calls on host copies), the stream forms, a killed peer
# and an abort.
. "$top_srcdir/test/multi/lib.sh"
standin="$(cd "$top_builddir" && pwd)/test/devfake/.libs/libsc_devfake.so"
if [ ! -f "$standin" ]; then
  echo "skipped: no device stand-in at $standin"
  exit 77
fi
export SC_DEVRT_STANDIN="$standin"
export SC_TRANSPORT=ucx
unset SC_ALGO SC_BCAST_ALGO SC_STAGE_CHUNK_BYTES SC_STAGE_SLOTS
run() { # run NAME N "VAR=VALUE ..." ARGS...
  name=$1
  n=$2
  vars=$3
  shift 3
  # shellcheck disable=SC2086 # the settings split into words on purpose
  check "$name" env $vars "$SC_RUN" -n "$n" --timeout 300 --label "$MR/mr_device" "$@"
}
# Every rank logs that UCX takes no CUDA memory here and stages all of its
# peers (a transport claiming device_mem would log "N of N peers direct"
# and hand the stand-in's device pointers to UCX).
staged() { # staged N
  SC_DEBUG=INFO SC_DEBUG_SUBSYS=NET,COLL "$SC_RUN" -n "$1" --timeout 300 --label "$MR/mr_device" \
    --allreduce-only --quick >"$tmpdir/log" 2>&1 || { cat "$tmpdir/log"; return 1; }
  want=$(($1 - 1))
  nodev=$(grep -c 'ucx: CUDA memory not supported by UCX, device runtime devfake: device buffers are staged' "$tmpdir/log")
  stg=$(grep -c "device path on devfake device [0-9]*: 0 of $want peers direct" "$tmpdir/log")
  echo "ranks staging: $stg of $1, ranks whose UCX reports no CUDA: $nodev of $1"
  [ "$nodev" -eq "$1" ] && [ "$stg" -eq "$1" ]
}
check "every rank stages every peer over ucx, n=3" staged 3
for n in 1 2 3 4; do
  run "all collectives ucx n=$n" "$n" ""
done
run "all collectives ucx n=6 (sample)" 6 "" --quick
for algo in ring tree rd rabenseifner; do
  run "allreduce SC_ALGO=$algo ucx n=5" 5 "SC_ALGO=$algo" --allreduce-only --quick
done
run "SC_BCAST_ALGO=chain ucx n=4 (sample)" 4 "SC_BCAST_ALGO=chain" --quick
run "ucx n=3, 4099-byte chunks, 3 slots" 3 "SC_STAGE_CHUNK_BYTES=4099 SC_STAGE_SLOTS=3" --quick
run "ucx n=4, 1000-byte chunks, 1 slot" 4 "SC_STAGE_CHUNK_BYTES=1000 SC_STAGE_SLOTS=1" --quick
run "one device per rank ucx n=4 (sample)" 4 "SC_DEVFAKE_DEVICES=4" --quick --device-per-rank
check "device sparse ucx n=3" "$SC_RUN" -n 3 --timeout 300 --label "$MR/mr_dev_sparse"
check "device fusion ucx n=2" env SC_TIMEOUT_MS=60000 "$SC_RUN" -n 2 --timeout 300 --label \
  "$MR/mr_dev_fusion" --quick
check "stream forms ucx n=3" "$SC_RUN" -n 3 --timeout 120 "$MR/mr_stream" order
check "all-to-alls, gather, scatter, allgatherv in every form ucx n=3" "$SC_RUN" -n 3 \
  --timeout 300 --label "$MR/mr_coll_more" --device
survivors() { # survivors N: every rank but the killed one reports its error
  SC_TIMEOUT_MS=60000 "$SC_RUN" -n "$1" --grace 90 --timeout 120 --label "$MR/mr_device" \
    --peer-death >"$tmpdir/run" 2>&1
  cat "$tmpdir/run"
  [ "$(grep -c 'failed in' "$tmpdir/run")" -eq $(($1 - 1)) ] && [ "$(grep -c 'FAIL' "$tmpdir/run")" -eq 0 ]
}
check "peer killed mid-job, ucx n=3" survivors 3
run "abort wakes a blocked device call, ucx n=2" 2 "" --abort
finish
