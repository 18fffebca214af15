#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# SC_CHECK_MISMATCH=1 on 2 and 3 ranks over tcp and shm: a mismatched
# count (blocking and non-blocking), dtype, op, root, kind (all-reduce vs
# broadcast), a skipped call and a sparse k fail on EVERY rank with
# SC_ERR_MISMATCH within 5 s (the timeout is 60 s), naming both calls
# (fail_mismatch checks each rank's message); matched operations still give
# exact results with the check on (and on 1 rank, where it is a no-op); a
# rank that makes no call at all leaves the others with SC_ERR_TIMEOUT from
# the fingerprint exchange (SC_TIMEOUT_MS, here 1.5 s), naming it.
# Rank 1 is always the odd one out, and up to SC_FP_DIRECT_MAX (8) ranks the
# exchange is the same direct all-gather: 2 ranks reach the verdict without a
# majority, 3 the one with a majority (ranks 0 and 2 against 1), each rank
# either a cause or a victim. 4 ranks only added a second agreeing peer to
# the same branches (18 of the script's 59 runs); test/unit/test_fingerprint.c
# judges many more layouts of prints.
. "$top_srcdir/test/multi/lib.sh"
PROG="$top_builddir/test/failure/fail_mismatch"
every_rank() { # every_rank TP N SCENARIO: each rank prints one "mismatch in" line and exits 0
  SC_TRANSPORT=$1 SC_CHECK_MISMATCH=1 SC_TIMEOUT_MS=60000 \
    "$SC_RUN" -n "$2" --grace 30 --timeout 120 "$PROG" "$3" >"$tmpdir/run" 2>&1
  rc=$?
  cat "$tmpdir/run"
  [ "$rc" -eq 0 ] && [ "$(grep -c '^rank [0-9]*: mismatch in' "$tmpdir/run")" -eq "$2" ]
}
matched() { # matched TP N
  SC_TRANSPORT=$1 SC_CHECK_MISMATCH=1 SC_TIMEOUT_MS=60000 \
    "$SC_RUN" -n "$2" --timeout 120 "$PROG" match >"$tmpdir/run" 2>&1
  rc=$?
  cat "$tmpdir/run"
  [ "$rc" -eq 0 ] && [ "$(grep -c 'matched operations correct' "$tmpdir/run")" -eq "$2" ]
}
check "n=1: the check is a no-op, results exact" matched tcp 1
absent() { # absent TP N: rank 1 stops calling; the others time out in the exchange
  # Rank 1 stays alive until every rank has reported (MR_REPORT_DIR), at most
  # SC_TIMEOUT_MS + 1 s, so that the others time out and do not see it exit.
  rep=$(mktemp -d "$tmpdir/reported.XXXXXX")
  SC_TRANSPORT=$1 SC_CHECK_MISMATCH=1 SC_TIMEOUT_MS=1500 SC_BOOTSTRAP_TIMEOUT_MS=30000 \
    SC_DEBUG=NONE MR_REPORT_DIR=$rep \
    "$SC_RUN" -n "$2" --grace 30 --timeout 60 "$PROG" absent report >"$tmpdir/run" 2>&1
  rc=$?
  cat "$tmpdir/run"
  [ "$rc" -eq 0 ] && [ "$(grep -c '^rank 1: success in' "$tmpdir/run")" -eq 1 ] &&
    [ "$(grep '^rank [0-9]*: timed out in [0-2]\.[0-9]* s: .*fingerprint exchange (SC_CHECK_MISMATCH).*from rank 1' \
      "$tmpdir/run" | grep -vc '^rank 1:')" -eq $(($2 - 1)) ]
}
for tp in tcp shm; do
  for n in 2 3; do
    check "$tp n=$n: a rank that stops calling: SC_ERR_TIMEOUT in the exchange" absent "$tp" "$n"
  done
done
for tp in tcp shm; do
  for n in 2 3; do
    check "$tp n=$n: matched operations correct" matched "$tp" "$n"
    for s in count nonblocking dtype op root kind missing sparse; do
      check "$tp n=$n: $s mismatch fails every rank" every_rank "$tp" "$n" "$s"
    done
  done
done
finish
