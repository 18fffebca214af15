#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The liveness watch's tree (lib/control/watch_tree.c) at depth 3: 11 ranks
# with SC_WATCH_FANOUT=2, so rank 1's children are 3 and 4, rank 4's 9 and
# 10, and rank 0 sees only ranks 1 and 2 directly. An interior rank killed
# (its children fall back to rank 0), a leaf three links below rank 0
# killed, an interior rank below rank 1 stopped (named through its parent's
# report of its quiet) and a mismatch whose odd rank reports through two
# parents must each reach every survivor, naming the cause, within the bounds
# of watch.sh's rows. Then kill, stop and abort on 64 ranks at the default
# fanout.
. "$top_srcdir/test/multi/lib.sh"
W="$top_builddir/test/failure/fail_watch"
M="$top_builddir/test/failure/fail_mismatch"
N=11 FANOUT=2
run() { # run MODE VICTIM BOUND WANT_OK [ENV...]: WANT_OK ranks print OK, none FAIL
  mode=$1 victim=$2 bound=$3 want=$4
  shift 4
  # The short SC_TIMEOUT_MS of some rows is for the watch, not the bootstrap
  # (ranks of a loaded machine start seconds apart).
  env SC_TRANSPORT=tcp SC_WATCH_FANOUT=$FANOUT SC_BOOTSTRAP_TIMEOUT_MS=60000 "$@" \
    "$SC_RUN" -n $N --grace 30 --timeout 90 \
    --label "$W" "$mode" "$victim" "$bound" "$tmpdir/pid" >"$tmpdir/run" 2>&1
  cat "$tmpdir/run"
  ok=$(grep -c ': OK ' "$tmpdir/run")
  bad=$(grep -c 'FAIL' "$tmpdir/run")
  [ "$ok" -eq "$want" ] && [ "$bad" -eq 0 ]
}
check "killed interior rank 1 (children 3, 4), survivors in a call" \
  run kill 1 5 10 SC_TIMEOUT_MS=60000 SC_ALGO=ring
check "killed leaf rank 9 (parents 4, 1), survivors idle" run idle 9 5 10 SC_TIMEOUT_MS=60000
# Rank 4 heartbeats for a third of the timeout after the others began to
# wait on it: their calls time out about a second before its silence does,
# and rank 0 names it only from rank 1's report that it has been quiet.
check "stopped interior rank 4 (parent 1, children 9, 10), named everywhere" \
  run stopname 4 6 11 SC_TIMEOUT_MS=3000 SC_ALGO=ring FAIL_WATCH_DELAY_MS=1000
# Counts 4 and 4,000,000 on one host: the board against a schedule, no
# message between the odd rank 9 and the others; only rank 0's comparison
# of the calls the heartbeats report (rank 9's through ranks 4 and 1) sees it.
mismatch() {
  rep=$(mktemp -d "$tmpdir/reported.XXXXXX")
  env -u SC_TIMEOUT_MS -u SC_HEARTBEAT_MS -u SC_CHECK_MISMATCH -u SC_BOARD_BYTES -u SC_ALGO \
    SC_TRANSPORT=shm SC_WATCH_FANOUT=2 SC_DEBUG=NONE MR_ODD_RANK=9 MR_REPORT_DIR="$rep" \
    "$SC_RUN" -n 11 --grace 30 --timeout 60 "$M" counts:4:4000000 report >"$tmpdir/run" 2>&1
  rc=$?
  cat "$tmpdir/run"
  [ "$rc" -eq 0 ] || return 1
  got=$(grep '^rank [0-9]*: ranks called mismatched collectives in ' "$tmpdir/run" |
    grep -F "count 4," | grep -F "count 4000000," | grep -c "rank 9 ")
  [ "$got" -eq 11 ] || { echo "$got of 11 ranks got SC_ERR_MISMATCH naming rank 9 and both counts"; return 1; }
  awk '/^rank [0-9]+: / { t = $0; sub(/.* in /, "", t); sub(/ s:.*/, "", t);
                          if (t + 0 > 3) { print "over 3 s: " $0; bad = 1 } }
       END { exit bad }' "$tmpdir/run"
}
check "rank 9 of 11 calls another count, no message between them: SC_ERR_MISMATCH in 3 s" mismatch
# The failure table's rows at 64 ranks with the default fanout (8): rank 0
# holds 8 watch connections; rank 1's children are 9-16, rank 10 is a leaf
# below it. A longer timeout than above: 64 ranks share the machine's cores.
# Not in the sanitizer runs (SC_TEST_SAMPLE=1): the rows above reach the
# same code at depth 3.
if [ "${SC_TEST_SAMPLE:-0}" != 1 ]; then
  N=64 FANOUT=8
  check "64 ranks: killed interior rank 1 (children 9-16), survivors in a call" \
    run kill 1 10 63 SC_TIMEOUT_MS=60000 SC_ALGO=ring
  check "64 ranks: stopped leaf rank 10 (parent 1): SC_ERR_TIMEOUT everywhere" \
    run stop 10 20 64 SC_TIMEOUT_MS=10000 SC_ALGO=ring
  check "64 ranks: every rank aborts, descriptors and threads back" run abort -1 10 64
fi
finish
