#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# What a mismatch does WITHOUT SC_CHECK_MISMATCH (the default), on 2 and 3
# ranks over tcp and shm, with SC_TIMEOUT_MS=1500 (so that a regression to a
# timeout shows quickly). Asserted:
#  - count, dtype, op (sum vs max), kind, a skipped call, sparse k: every rank
#    returns SC_ERR_MISMATCH within 2 s, its message naming both calls: a
#    message that meets another call's print, the board's posts, or rank 0's
#    liveness watch comparing the calls the ranks execute, which it relays to
#    every rank; sc_comm_get_async_error reports it afterwards;
#  - root (broadcast from 0 vs from 1): the two roots only send, so no
#    message meets another print and the calls may end before a heartbeat
#    reports them: each rank returns SC_SUCCESS (the result is silently
#    wrong, and the roots' messages linger for the next call) or
#    SC_ERR_MISMATCH, never another error, within 2 s.
# Each rank lingers before it exits, so that its peers report the mismatch
# and not its exit: until every rank has reported (MR_REPORT_DIR), at most
# SC_TIMEOUT_MS + 1 s.
. "$top_srcdir/test/multi/lib.sh"
PROG="$top_builddir/test/failure/fail_mismatch"
# The bound in seconds (MISMATCH_BOUND_S, default 2): a machine busy with
# other work may need more, without changing what is asserted otherwise.
BOUND=${MISMATCH_BOUND_S:-2}
# SC_TIMEOUT_MS (MISMATCH_TIMEOUT_MS, default 4000): longer than the bound, so
# that a regression to a timeout fails the bound, and long enough for init
# under a sanitizer on a loaded machine.
TMO=${MISMATCH_TIMEOUT_MS:-4000}
outcome() { # outcome TP N SCENARIO mismatch|either WORD1 WORD2
  rep=$(mktemp -d "$tmpdir/reported.XXXXXX")
  SC_TRANSPORT=$1 SC_TIMEOUT_MS=$TMO SC_BOOTSTRAP_TIMEOUT_MS=30000 SC_DEBUG=NONE MR_REPORT_DIR=$rep \
    "$SC_RUN" -n "$2" --grace 30 --timeout 60 "$PROG" "$3" report >"$tmpdir/run" 2>&1
  rc=$?
  cat "$tmpdir/run"
  [ "$rc" -eq 0 ] || return 1
  [ "$(grep -c '^rank [0-9]*: ' "$tmpdir/run")" -eq "$2" ] || return 1
  # "rank R: RESULT in T s: ..." -> every rank within BOUND s.
  awk -v b="$BOUND" '/^rank [0-9]+: / { t = $0; sub(/.* in /, "", t); sub(/ s:.*/, "", t);
                          if (t + 0 > b + 0) { print "over " b " s: " $0; bad = 1 } }
       END { exit bad }' "$tmpdir/run" || return 1
  ok=$(grep -c '^rank [0-9]*: success in' "$tmpdir/run")
  mm=$(grep -c '^rank [0-9]*: ranks called mismatched collectives in' "$tmpdir/run")
  echo "$1 n=$2 $3: success $ok, SC_ERR_MISMATCH $mm of $2 ranks" | tee -a "$tmpdir/summary"
  if [ "$4" = either ]; then
    [ $((ok + mm)) -eq "$2" ]
    return
  fi
  [ "$mm" -eq "$2" ] || return 1
  named=$(grep '^rank [0-9]*: ranks called' "$tmpdir/run" | grep -F "$5" | grep -cF "$6")
  [ "$named" -eq "$2" ] || { echo "$((${2} - named)) messages lack \"$5\" or \"$6\""; return 1; }
  [ "$(grep -c '^rank [0-9]* async: ranks called mismatched collectives' "$tmpdir/run")" -eq "$2" ]
}
for tp in tcp shm; do
  for n in 2 3; do
    check "$tp n=$n: root mismatch: success (wrong data) or SC_ERR_MISMATCH, bounded" \
      outcome "$tp" "$n" root either
    check "$tp n=$n: count mismatch: SC_ERR_MISMATCH on every rank" \
      outcome "$tp" "$n" count mismatch "count 1000," "count 999,"
    check "$tp n=$n: dtype mismatch: SC_ERR_MISMATCH on every rank" \
      outcome "$tp" "$n" dtype mismatch "float32" "float64"
    check "$tp n=$n: op mismatch: SC_ERR_MISMATCH on every rank" \
      outcome "$tp" "$n" op mismatch "float32, sum" "float32, max"
    check "$tp n=$n: kind mismatch: SC_ERR_MISMATCH on every rank" \
      outcome "$tp" "$n" kind mismatch "allreduce" "broadcast"
    check "$tp n=$n: a skipped call: SC_ERR_MISMATCH on every rank" \
      outcome "$tp" "$n" missing mismatch "barrier" "allreduce"
    check "$tp n=$n: sparse k mismatch: SC_ERR_MISMATCH on every rank" \
      outcome "$tp" "$n" sparse mismatch "k 8" "k 9"
  done
done
echo "# what each mismatch did:"
cat "$tmpdir/summary"
finish
