#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The dense collectives on device buffers through the device stand-in
# (test/devfake/, loaded with SC_DEVRT_STANDIN; on a GPU with
# SC_TEST_DEVICE=cuda): every collective, dtype and
# op on 1, 2, 3, 5 and 8 ranks over tcp, shm and auto (three dtypes above 4 ranks);
# the all-reduce with each algorithm forced on 3 (tcp) and 8 (shm) ranks; small prime
# staging chunks and a single slot; one device per rank; the all-to-alls,
# gather, scatter and the uneven all-gather in every form (mr_coll_more);
# point-to-point calls in every form (mr_p2p_device); a rank killed mid-job
# and an abort.
# A sample of the full matrix, to keep the run short on a loaded machine.
# SC_TEST_SAMPLE=1 (the sanitizer runs): shm on 3 and 8, point-to-point on 3
# ranks, the kernel path's modes and its per-rank-device verdict (not the
# shared-device verdicts, a decision of a few lines read from the same setup).
. "$top_srcdir/test/multi/lib.sh"
device_runtime "$(cd "$top_builddir" && pwd)/test/devfake/.libs/libsc_devfake.so" || exit 77
unset SC_ALGO SC_BCAST_ALGO SC_STAGE_CHUNK_BYTES SC_STAGE_SLOTS
run() { # run NAME N "VAR=VALUE ..." ARGS...
  name=$1
  n=$2
  vars=$3
  shift 3
  # shellcheck disable=SC2086 # the settings split into words on purpose
  check "$name" env $vars "$SC_RUN" -n "$n" --timeout 300 --label "$MR/mr_device" "$@"
}
# tcp stages every message through pinned memory; shm (and auto, on one
# host) moves device memory itself where the transport says device_mem.
# Staging and device copies are the same code whatever the rank count, and
# each algorithm's schedule keeps its odd and its power-of-two shape on 3 and
# 8 ranks; the host suites (collectives.sh, allreduce_algos.sh) sweep 1 to 8.
tcp_ranks="1 2 3 5 8" algo_ranks="3 8" shm_ranks="2 3 5 8" p2p_ranks="2 3"
sample=${SC_TEST_SAMPLE:-0}
if [ "$sample" = 1 ]; then
  shm_ranks="3 8" p2p_ranks=3
fi
for n in $tcp_ranks; do
  q=--quick
  [ "$n" -le 4 ] && q=
  run "all collectives tcp n=$n${q:+ (sample)}" "$n" "SC_TRANSPORT=tcp" $q
done
for n in $shm_ranks; do
  q=--quick
  [ "$n" -le 3 ] && q=
  run "all collectives shm n=$n${q:+ (sample)}" "$n" "SC_TRANSPORT=shm" $q
done
run "all collectives auto n=3" 3 "SC_TRANSPORT=auto"
[ "$sample" = 1 ] || run "all collectives auto n=7 (sample)" 7 "SC_TRANSPORT=auto" --quick
for algo in ring tree rd rabenseifner hier; do
  for n in $algo_ranks; do
    tp=tcp
    case $n in 4 | 8) tp=shm ;; esac
    run "allreduce SC_ALGO=$algo $tp n=$n" "$n" "SC_TRANSPORT=$tp SC_ALGO=$algo" --allreduce-only --quick
  done
done
run "allreduce SC_ALGO=rabenseifner tcp n=5" 5 "SC_TRANSPORT=tcp SC_ALGO=rabenseifner" --allreduce-only
run "SC_BCAST_ALGO=chain tcp n=4 (sample)" 4 "SC_TRANSPORT=tcp SC_BCAST_ALGO=chain" --quick
run "SC_BCAST_ALGO=binomial shm n=5 (sample)" 5 "SC_TRANSPORT=shm SC_BCAST_ALGO=binomial" --quick
# One device per rank (four stand-in devices, rank mod 4), as on a node of
# GPUs; the runs above share one device among all ranks.
run "one device per rank shm n=4 (sample)" 4 "SC_TRANSPORT=shm SC_DEVFAKE_DEVICES=4" --quick \
  --device-per-rank
run "one device per rank tcp n=3 (sample)" 3 "SC_TRANSPORT=tcp SC_DEVFAKE_DEVICES=4" --quick \
  --device-per-rank
run "tcp n=3, 4099-byte chunks, 3 slots" 3 "SC_TRANSPORT=tcp SC_STAGE_CHUNK_BYTES=4099 SC_STAGE_SLOTS=3" --quick
run "tcp n=5, 1000-byte chunks, 1 slot" 5 "SC_TRANSPORT=tcp SC_STAGE_CHUNK_BYTES=1000 SC_STAGE_SLOTS=1" --quick
# The all-reduce's kernel path (SC_DEVICE_ALLREDUCE=auto: every shm row above
# takes it, the forced algorithms and tcp do not): the schedule when turned
# off; on the stand-in, many rounds of small halves in each mode alone and the
# setup's verdict, each row requiring every rank to log the path it expects:
# a shared device takes it only under MPS (the stand-in's SC_DEVFAKE_MPS), a
# device per rank always.
run "kernel path off: SC_DEVICE_ALLREDUCE=host shm n=3 (sample)" 3 \
  "SC_TRANSPORT=shm SC_DEVICE_ALLREDUCE=host" --allreduce-only --quick
path_is() { # path_is WANT N "VAR=VALUE ..." ARGS...: every rank's setup chose WANT
  want=$1 n=$2 vars=$3
  shift 3
  # shellcheck disable=SC2086 # the settings split into words on purpose
  env SC_DEBUG=INFO $vars "$SC_RUN" -n "$n" --timeout 300 "$MR/mr_device" --allreduce-only "$@" \
    >"$tmpdir/path" 2>&1
  st=$?
  got=$(grep -c "device all-reduce: the $want path" "$tmpdir/path")
  grep "device all-reduce:" "$tmpdir/path" | head -n 2
  tail -n "$n" "$tmpdir/path"
  [ "$st" -eq 0 ] && [ "$got" -eq "$n" ]
}
if [ "${SC_TEST_DEVICE:-}" != cuda ]; then
  check "kernel path shm n=3, 4 KiB halves, two-shot only" path_is kernel 3 \
    "SC_TRANSPORT=shm SC_DEVICE_ALLREDUCE_HALF_BYTES=4096 SC_DEVICE_ALLREDUCE_ONESHOT_BYTES=0"
  check "kernel path shm n=6, 1 KiB halves, one-shot only (sample)" path_is kernel 6 \
    "SC_TRANSPORT=shm SC_DEVICE_ALLREDUCE_HALF_BYTES=1000 SC_DEVICE_ALLREDUCE_ONESHOT_BYTES=1073741824" \
    --quick
  if [ "$sample" != 1 ]; then
    check "one shared device under MPS: the kernel path, n=3 (sample)" path_is kernel 3 \
      "SC_TRANSPORT=shm" --quick
    check "one shared device without MPS: the host path, n=3 (sample)" path_is host 3 \
      "SC_TRANSPORT=shm SC_DEVFAKE_MPS=0" --quick
  fi
  check "a device per rank without MPS: the kernel path, n=4 (sample)" path_is kernel 4 \
    "SC_TRANSPORT=shm SC_DEVFAKE_MPS=0 SC_DEVFAKE_DEVICES=4" --quick --device-per-rank
  # The first call, which sets the path up, runs under the same limit: 8 s
  # leaves room for a rank slowed by a loaded machine and the sanitizers.
  run "kernel path: a rank later than SC_TIMEOUT_MS, n=3" 3 \
    "SC_TRANSPORT=shm SC_TIMEOUT_MS=8000 SC_BOOTSTRAP_TIMEOUT_MS=30000 SC_HEARTBEAT_MS=-1" --late
fi
# The all-to-alls, gather, scatter and the uneven all-gather (mr_coll_more) in
# every form, the stream forms included: staged over tcp, direct over shm.
coll_more() { # coll_more NAME N "VAR=VALUE ..." ARGS...
  name=$1 n=$2 vars=$3
  shift 3
  # shellcheck disable=SC2086 # the settings split into words on purpose
  check "$name" env $vars "$SC_RUN" -n "$n" --timeout 300 --label "$MR/mr_coll_more" --device "$@"
}
coll_more "all-to-alls, gather, scatter, allgatherv tcp n=3" 3 "SC_TRANSPORT=tcp"
coll_more "all-to-alls, gather, scatter, allgatherv shm n=4" 4 "SC_TRANSPORT=shm"
[ "$sample" = 1 ] || coll_more "all-to-alls, gather, scatter, allgatherv tcp n=5, 4099-byte chunks (sample)" 5 \
  "SC_TRANSPORT=tcp SC_STAGE_CHUNK_BYTES=4099" --quick
# The hierarchical uneven all-to-all (its count exchange, then schedules whose
# scratch the stream forms' reservation did not size) on 2 emulated hosts x 2.
for tp in tcp shm; do
  coll_more "uneven all-to-all hier, 2 hosts x 2, $tp n=4" 4 \
    "SC_TRANSPORT=$tp SC_A2AV_ALGO=hier SC_RANKS_PER_HOST=2" --a2av-only
done
# Point-to-point calls on device buffers: blocking in a group, non-blocking,
# a self-send, the stream forms; eager and rendezvous sizes, two dtypes.
for tp in tcp shm; do
  for n in $p2p_ranks; do
    check "point-to-point on device buffers $tp n=$n" env SC_TRANSPORT=$tp "$SC_RUN" -n "$n" \
      --timeout 300 --label "$MR/mr_p2p_device"
  done
done
survivors() { # survivors N TRANSPORT: every rank but the killed one reports its error
  SC_TIMEOUT_MS=60000 SC_TRANSPORT=$2 "$SC_RUN" -n "$1" --grace 90 --timeout 120 --label "$MR/mr_device" --peer-death >"$tmpdir/run" 2>&1
  cat "$tmpdir/run"
  [ "$(grep -c 'failed in' "$tmpdir/run")" -eq $(($1 - 1)) ] && [ "$(grep -c 'FAIL' "$tmpdir/run")" -eq 0 ]
}
check "peer killed mid-job, tcp n=3" survivors 3 tcp
check "peer killed mid-job, shm n=4" survivors 4 shm
run "abort wakes a blocked device call, tcp n=2" 2 "SC_TRANSPORT=tcp" --abort
run "abort wakes a blocked device call, shm n=2" 2 "SC_TRANSPORT=shm" --abort
# Two emulated hosts (sc-netbed, root only): auto gives each rank a direct
# (shm) peer and staged (tcp) peers within one operation.
NETBED="$top_builddir/sc-netbed"
if [ "$(id -u)" = 0 ] && [ -x "$NETBED" ] && "$NETBED" check >/dev/null 2>&1 &&
  "$NETBED" --id "dv$$" up 2 1gbit >"$tmpdir/bed" 2>&1; then
  trap '"$NETBED" --id "dv$$" down >/dev/null 2>&1; rm -rf "$tmpdir"' EXIT
  bed() { # bed NAME N PER_HOST VAR=VALUE ARGS...
    name=$1 n=$2 m=$3 var=$4
    shift 4
    check "$name" "$SC_RUN" --netbed="scnb-dv$$" --ranks-per-host "$m" -n "$n" --timeout 300 \
      -x SC_DEVRT_STANDIN="$SC_DEVRT_STANDIN" -x "$var" "$MR/mr_device" "$@"
  }
  bed "2 hosts x 2: all collectives, 4099-byte chunks" 4 2 SC_STAGE_CHUNK_BYTES=4099
  bed "2 hosts, 3 + 2: SC_ALGO=hier" 5 3 SC_ALGO=hier --allreduce-only
  bed "2 hosts x 3: SC_ALGO=ring (sample)" 6 3 SC_ALGO=ring --allreduce-only --quick
else
  echo "SKIP: the two-host rows (sc-netbed needs root, namespaces, veth, bridge and tbf)"
fi
finish
