#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The all-to-all, the uneven all-to-all, gather, scatter and the uneven
# all-gather (mr_coll_more) on 1, 2, 3, 4, 5 and 8 ranks (8: a sample), run
# once per transport (test/multi/<tp>-coll_more.sh): every dtype, count,
# placement, root and form against each rank's own reference; each
# all-to-all, gather/scatter and uneven all-gather algorithm forced, and
# sc_alltoall_algo naming the forced one, and the forced one running; an
# uneven all-to-all whose counts disagree on one pair and calls that differ
# in a count or the root, with and without SC_CHECK_MISMATCH; over tcp, the
# hierarchical all-to-all on two emulated hosts (sc-netbed, root only).
. "$top_srcdir/test/multi/lib.sh"
P="$MR/mr_coll_more"
run() { # run NAME N "VAR=VALUE ..." ARGS...
  name=$1
  n=$2
  vars=$3
  shift 3
  # shellcheck disable=SC2086 # the settings split into words on purpose
  check "$name" env $vars "$SC_RUN" -n "$n" --timeout 300 --label "$P" "$@"
}
# SC_TEST_SAMPLE=1 (the sanitizer runs): every dtype on 3 ranks only.
for n in 1 2 3 4 5; do
  if [ "${SC_TEST_SAMPLE:-0}" = 1 ] && [ "$n" != 3 ]; then
    run "every collective n=$n (sample)" "$n" "" --quick
  else
    run "every collective n=$n" "$n" ""
  fi
done
run "every collective n=8 (sample)" 8 "" --quick
# Each algorithm forced, on powers of two and not (Bruck's last step, the
# pairwise exchange's partner at P/2, a binomial tree's missing subtrees
# differ between them): every dtype and the multi-MiB calls on one rank
# count (4, or 3 for the rooted and uneven ones), a sample of dtypes on the
# others. One host: hier runs (and is reported as) a flat one, so twice is
# enough; the two-host rows below run it.
forced() { # forced VAR ALGO FLAG FULL_N N...
  var=$1 algo=$2 flag=$3 full=$4
  shift 4
  for n in "$@"; do
    if [ "$n" = "$full" ] && [ "${SC_TEST_SAMPLE:-0}" != 1 ]; then
      run "$var=$algo n=$n" "$n" "$var=$algo" "$flag"
    else
      run "$var=$algo n=$n (sample)" "$n" "$var=$algo" "$flag" --quick
    fi
  done
}
for algo in pairwise bruck; do
  forced SC_A2A_ALGO $algo --a2a-only 4 3 4 5 8
done
forced SC_A2A_ALGO hier --a2a-only 3 3 8
forced SC_A2A_ALGO auto --a2a-only 4 4
for algo in binomial linear; do
  forced SC_GATHER_ALGO $algo --gather-only 3 3 5 8
done
for algo in ring direct; do
  forced SC_AGV_ALGO $algo --agv-only 3 3 5 8
done
for algo in pairwise sparse; do
  forced SC_A2AV_ALGO $algo --a2av-only 3 3 5 8
done
# The hierarchical uneven all-to-all on emulated hosts (SC_RANKS_PER_HOST):
# 2 x 2, 3 x 2, 2 x 3 and 4 x 2 run it (its count exchange inside the
# host, then one message per other host); 2 + 2 + 1 runs the pairwise one.
for shape in "4 2" "6 2" "6 3" "8 2" "5 2"; do
  # shellcheck disable=SC2086 # "N PER_HOST" splits on purpose
  set -- $shape
  run "SC_A2AV_ALGO=hier n=$1, $2 per host" "$1" "SC_A2AV_ALGO=hier SC_RANKS_PER_HOST=$2" \
    --a2av-only
done
# The forced algorithm is the one each call runs (the TUNE trace names it),
# where the cost model would pick another on one host.
trace_says() { # trace_says ALGO COLL...: in $tmpdir/trace every call of each COLL ran ALGO
  algo=$1
  shift
  for coll in "$@"; do
    all=$(grep -c " $coll #[0-9]*: " "$tmpdir/trace")
    ran=$(grep -c " $coll #[0-9]*: $algo\$" "$tmpdir/trace")
    echo "$coll: $ran of $all calls ran $algo"
    [ "$all" -gt 0 ] && [ "$ran" -eq "$all" ] || return 1
  done
}
runs_forced() { # runs_forced VAR=ALGO COLL...: on 3 ranks
  env "$1" SC_DEBUG=TRACE SC_DEBUG_SUBSYS=TUNE "$SC_RUN" -n 3 --timeout 300 "$P" --quick \
    >"$tmpdir/trace" 2>&1 || {
    tail -n 20 "$tmpdir/trace"
    return 1
  }
  algo=${1#*=}
  shift
  trace_says "$algo" "$@"
}
check "SC_A2A_ALGO=bruck: every all-to-all runs Bruck's" runs_forced SC_A2A_ALGO=bruck alltoall
check "SC_GATHER_ALGO=linear: every gather and scatter runs linear" \
  runs_forced SC_GATHER_ALGO=linear gather scatter
check "SC_AGV_ALGO=ring: every uneven all-gather runs the ring" runs_forced SC_AGV_ALGO=ring allgatherv
check "SC_A2AV_ALGO=sparse: every uneven all-to-all runs the sparse form" \
  runs_forced SC_A2AV_ALGO=sparse alltoallv
hier_v_runs() { # on 2 emulated hosts x 2 every uneven all-to-all runs hier
  env SC_A2AV_ALGO=hier SC_RANKS_PER_HOST=2 SC_DEBUG=TRACE SC_DEBUG_SUBSYS=TUNE "$SC_RUN" -n 4 \
    --timeout 300 "$P" --a2av-only --quick >"$tmpdir/trace" 2>&1 || {
    tail -n 20 "$tmpdir/trace"
    return 1
  }
  trace_says hier alltoallv
}
check "SC_A2AV_ALGO=hier, 2 hosts x 2: every uneven all-to-all runs hier" hier_v_runs
# Unforced on emulated hosts of one machine, whose model prices no hier
# schedule: the decision names pairwise, and every call runs it.
auto_v_flat() {
  env SC_RANKS_PER_HOST=2 SC_DEBUG=TRACE SC_DEBUG_SUBSYS=TUNE "$SC_RUN" -n 4 --timeout 300 "$P" \
    --a2av-only --quick >"$tmpdir/trace" 2>&1 || {
    tail -n 20 "$tmpdir/trace"
    return 1
  }
  [ "$(grep -c "alltoallv on 2 hosts of 2 ranks: pairwise (the cost model prices no hier" \
    "$tmpdir/trace")" -eq 1 ] && trace_says pairwise alltoallv
}
check "auto, 2 emulated hosts x 2 on one machine: every uneven all-to-all runs pairwise" auto_v_flat
# Blocks of many pipeline chunks, the multi-MiB calls of thousands.
run "every collective n=3 SC_CHUNK_BYTES=4096" 3 "SC_CHUNK_BYTES=4096"
# One pair's counts disagree: rank 0 sends the last rank 2 elements more,
# or fewer, than it expects. The program checks each rank's result and
# prints it; the launcher's timeout catches a hang.
# Under SC_A2AV_ALGO=sparse (no message for an empty block) the count check
# finds it, none of 3 included, and every rank fails.
mismatch() { # mismatch N more|fewer|zero CHECK [VAR=VALUE]
  run "alltoallv counts disagree n=$1, $2, SC_CHECK_MISMATCH=$3${4:+ $4}" "$1" \
    "SC_CHECK_MISMATCH=$3 SC_TIMEOUT_MS=10000 $4" --mismatch "$2"
}
mismatch 3 more 1
mismatch 2 fewer 1
mismatch 3 more 0
mismatch 2 fewer 0
mismatch 3 zero 0
mismatch 4 more 0 SC_A2AV_ALGO=sparse
mismatch 3 zero 0 SC_A2AV_ALGO=sparse
mismatch 2 fewer 1 SC_A2AV_ALGO=sparse
mismatch 4 more 0 "SC_A2AV_ALGO=hier SC_RANKS_PER_HOST=2"
mismatch 4 zero 0 "SC_A2AV_ALGO=hier SC_RANKS_PER_HOST=2"
mismatch 6 fewer 1 "SC_A2AV_ALGO=hier SC_RANKS_PER_HOST=3"
# Calls that differ: an all-to-all's count on the last rank, the uneven
# all-gather's counts on rank 0, a gather's root on the last rank.
differ() { # differ N a2a|agv|root CHECK
  run "calls differ ($2) n=$1, SC_CHECK_MISMATCH=$3" "$1" \
    "SC_CHECK_MISMATCH=$3 SC_TIMEOUT_MS=10000" --mismatch "$2"
}
differ 3 a2a 1
differ 2 agv 1
differ 3 root 1
differ 2 a2a 0
differ 3 agv 0
differ 3 root 0
# Two emulated hosts over tcp (the other transports stay on one host).
NETBED="$top_builddir/sc-netbed"
if [ "${SC_TRANSPORT:-}" = tcp ] && [ "$(id -u)" = 0 ] && [ -x "$NETBED" ] &&
  "$NETBED" check >/dev/null 2>&1 && "$NETBED" --id "cm$$" up 2 1gbit >"$tmpdir/bed" 2>&1; then
  trap '"$NETBED" --id "cm$$" down >/dev/null 2>&1; rm -rf "$tmpdir"' EXIT
  bed() { # bed NAME N PER_HOST VAR=VALUE ARGS...
    name=$1 n=$2 m=$3 var=$4
    shift 4
    check "$name" "$SC_RUN" --netbed="scnb-cm$$" --ranks-per-host "$m" -n "$n" --timeout 300 \
      -x SC_TUNE=model -x "$var" --label "$P" "$@"
  }
  bed "2 hosts x 2: SC_A2A_ALGO=hier" 4 2 SC_A2A_ALGO=hier --a2a-only --quick
  bed_hier_runs() {
    "$SC_RUN" --netbed="scnb-cm$$" --ranks-per-host 2 -n 4 --timeout 300 -x SC_TUNE=model \
      -x SC_A2A_ALGO=hier -x SC_DEBUG=TRACE -x SC_DEBUG_SUBSYS=TUNE "$P" --a2a-only --quick \
      >"$tmpdir/trace" 2>&1 || {
      tail -n 20 "$tmpdir/trace"
      return 1
    }
    trace_says hier alltoall
  }
  check "2 hosts x 2: SC_A2A_ALGO=hier: every all-to-all runs hier" bed_hier_runs
  bed "2 hosts, 3 + 2: SC_A2A_ALGO=hier" 5 3 SC_A2A_ALGO=hier --a2a-only --quick
  bed "2 hosts x 2: SC_A2AV_ALGO=hier" 4 2 SC_A2AV_ALGO=hier --a2av-only --quick
  # Unforced, the cost model decides once (rank 0 logs it) and every uneven
  # all-to-all runs that; SC_TUNE=model's network defaults price hier within
  # the slack here, so the row covers the hier branch.
  bed_auto_v_runs() {
    "$SC_RUN" --netbed="scnb-cm$$" --ranks-per-host 2 -n 4 --timeout 300 -x SC_TUNE=model \
      -x SC_DEBUG=TRACE -x SC_DEBUG_SUBSYS=TUNE "$P" --a2av-only --quick >"$tmpdir/trace" 2>&1 || {
      tail -n 20 "$tmpdir/trace"
      return 1
    }
    said=$(grep -c "alltoallv on 2 hosts of 2 ranks: hier (" "$tmpdir/trace")
    echo "decided hier: $said line(s)"
    [ "$said" -eq 1 ] && trace_says hier alltoallv
  }
  check "2 hosts x 2, auto: the cost model picks hier and every uneven all-to-all runs it" \
    bed_auto_v_runs
  bed "2 hosts x 2: every collective" 4 2 SC_A2A_ALGO=auto
  bed "2 hosts, 3 + 2: every collective (sample)" 5 3 SC_A2A_ALGO=auto --quick
else
  echo "SKIP: the two-host rows (tcp only; sc-netbed needs root, namespaces, veth, bridge and tbf)"
fi
finish
