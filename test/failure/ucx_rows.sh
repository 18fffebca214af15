#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The failure table over SC_TRANSPORT=ucx (docs/UCX.md): abort with the peer
# alive and dead, a new communicator after a peer left or aborted, and the
# mismatch check (every scenario, and a rank that stops calling). Kill, stop
# and clean destroy are test/failure/ucx-watch.sh; exit and kill mid-job are
# test/multi/ucx-peer_death.sh. The same programs and assertions as the tcp and
# shm rows (fail_abort_rows.sh, fail_recover_rows.sh, mismatch_check.sh).
. "$top_srcdir/test/failure/fail_lib.sh"
export SC_TRANSPORT=ucx
abort_row() { # abort_row MODE
  SC_TIMEOUT_MS=30000 "$SC_RUN" -n 2 --grace 30 --timeout 60 --label \
    "$FAIL/fail_abort" "$1" 2 >"$tmpdir/run" 2>&1
  rc=$?
  grep -E 'RESULT|FAIL|abort thread|failures' "$tmpdir/run"
  [ $rc -eq 0 ] && grep -q "fail_abort $1: 0 failures" "$tmpdir/run"
}
recover_row() { # recover_row MODE
  mkdir -p "$tmpdir/ids" && rm -f "$tmpdir/ids"/*
  SC_TIMEOUT_MS=30000 "$SC_RUN" -n 3 --grace 30 --timeout 60 --label \
    "$FAIL/fail_recover" "$tmpdir/ids" "$1" 5 >"$tmpdir/run" 2>&1
  rc=$?
  grep -E 'RESULT|FAIL|before' "$tmpdir/run"
  want=3
  [ "$1" = exit ] && want=2
  [ $rc -eq 0 ] && [ "$(grep -c 'before: ' "$tmpdir/run")" -eq $want ] && ! grep -q FAIL "$tmpdir/run"
}
check "abort, peer alive, ucx" abort_row alive
check "abort, peer dead, ucx" abort_row dead
check "new communicator after a peer left, ucx" recover_row exit
check "new communicator after an abort, ucx" recover_row abort

PROG="$top_builddir/test/failure/fail_mismatch"
every_rank_mm() { # every_rank_mm N SCENARIO: each rank prints one "mismatch in" line
  SC_CHECK_MISMATCH=1 SC_TIMEOUT_MS=60000 \
    "$SC_RUN" -n "$1" --grace 30 --timeout 120 "$PROG" "$2" >"$tmpdir/run" 2>&1
  rc=$?
  cat "$tmpdir/run"
  [ "$rc" -eq 0 ] && [ "$(grep -c '^rank [0-9]*: mismatch in' "$tmpdir/run")" -eq "$1" ]
}
matched() { # matched N
  SC_CHECK_MISMATCH=1 SC_TIMEOUT_MS=60000 \
    "$SC_RUN" -n "$1" --timeout 120 "$PROG" match >"$tmpdir/run" 2>&1
  rc=$?
  cat "$tmpdir/run"
  [ "$rc" -eq 0 ] && [ "$(grep -c 'matched operations correct' "$tmpdir/run")" -eq "$1" ]
}
absent() { # absent N: rank 1 stops calling; the others time out in the exchange
  # Under ASan: UCX 1.13's own leaks after a forced close (test/failure/ucx_lsan.supp).
  LSAN_OPTIONS="suppressions=$top_srcdir/test/failure/ucx_lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}" \
    SC_CHECK_MISMATCH=1 SC_TIMEOUT_MS=1500 SC_BOOTSTRAP_TIMEOUT_MS=30000 SC_DEBUG=NONE \
    "$SC_RUN" -n "$1" --grace 30 --timeout 60 "$PROG" absent report >"$tmpdir/run" 2>&1
  rc=$?
  cat "$tmpdir/run"
  [ "$rc" -eq 0 ] && [ "$(grep -c '^rank 1: success in' "$tmpdir/run")" -eq 1 ] &&
    [ "$(grep '^rank [0-9]*: timed out in [0-2]\.[0-9]* s: .*fingerprint exchange (SC_CHECK_MISMATCH).*from rank 1' \
      "$tmpdir/run" | grep -vc '^rank 1:')" -eq $(($1 - 1)) ]
}
for n in 2 3; do
  check "ucx n=$n: a rank that stops calling: SC_ERR_TIMEOUT in the exchange" absent "$n"
done
for n in 2 3 4; do
  check "ucx n=$n: matched operations correct" matched "$n"
  for s in count nonblocking dtype op root kind missing sparse; do
    check "ucx n=$n: $s mismatch fails every rank" every_rank_mm "$n" "$s"
  done
done
# Rows that cannot apply: fail_tcp_rows.sh shuts down, or writes junk bytes
# and a forged header into, the tcp transport's own data sockets. Under UCX the
# sockets (or shared memory) belong to UCX, which frames and checks its own
# wire format; the closest row that does apply, a peer that closes while
# others wait on it, is ucx-peer_death.sh's "peer exits".
echo "SKIP: sockclose/garbage/hugehdr rows (fail_tcp_rows.sh): they damage tcp's own sockets; UCX owns its connections"
finish
