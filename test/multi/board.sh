#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The board (lib/core/board.c): every collective small enough for it, on 1-8
# ranks over shm and over auto (the mux lends it shared memory's), the
# boundary of SC_BOARD_BYTES, back-to-back calls, and what fails there: a
# mismatched call, a rank that exits instead of posting, a rank too late.
# Where the board is off (SC_BOARD_BYTES=0, tcp) the same calls give the same
# results and no board is announced. An abort ends a board wait at once.
. "$top_srcdir/test/multi/lib.sh"
unset SC_BOARD_BYTES SC_ALGO SC_BCAST_ALGO SC_RS_ALGO SC_AG_ALGO SC_CHECK_MISMATCH
# announced TRANSPORT N WANT [VAR=VALUE...]: mr_board stress on N ranks; WANT
# ranks log the board at INFO (0: none does)
announced() {
  at=$1 an=$2 want=$3
  shift 3
  env SC_TRANSPORT="$at" SC_DEBUG=INFO SC_DEBUG_SUBSYS=COLL "$@" "$SC_RUN" -n "$an" --timeout 300 \
    "$MR/mr_board" stress >"$tmpdir/run" 2>&1 || { cat "$tmpdir/run"; return 1; }
  got=$(grep -c "board: collectives of up to 1024 bytes per rank.*all $an ranks on this host" \
    "$tmpdir/run")
  [ "$want" -eq 0 ] && got=$(grep -c "board:" "$tmpdir/run")
  [ "$got" -eq "$want" ] || { echo "board announced by $got ranks, want $want"; return 1; }
}
for n in 1 2 3 4 5 8; do
  check "data n=$n shm" env SC_TRANSPORT=shm "$SC_RUN" -n "$n" --timeout 300 --label \
    "$MR/mr_board" data
done
check "data n=3 auto" env SC_TRANSPORT=auto "$SC_RUN" -n 3 --timeout 300 "$MR/mr_board" data
check "data n=3 SC_BOARD_BYTES=0" env SC_TRANSPORT=shm SC_BOARD_BYTES=0 "$SC_RUN" -n 3 \
  --timeout 300 "$MR/mr_board" data
check "stress n=2 shm, announced" announced shm 2 2
check "stress n=8 auto, announced" announced auto 8 8
check "stress n=3 SC_BOARD_BYTES=0: none" announced shm 3 0 SC_BOARD_BYTES=0
check "stress n=3 tcp: none" announced tcp 3 0
check "mismatch n=2" env SC_TRANSPORT=shm "$SC_RUN" -n 2 --timeout 120 "$MR/mr_board" mismatch
check "mismatch n=4 auto" env SC_TRANSPORT=auto "$SC_RUN" -n 4 --timeout 120 "$MR/mr_board" mismatch
check "death n=3" env SC_TRANSPORT=shm "$SC_RUN" -n 3 --timeout 120 "$MR/mr_board" death
check "death n=2 no watch" env SC_TRANSPORT=shm SC_HEARTBEAT_MS=-1 "$SC_RUN" -n 2 --timeout 120 \
  "$MR/mr_board" death
check "late n=2" env SC_TRANSPORT=shm SC_TIMEOUT_MS=500 SC_BOOTSTRAP_TIMEOUT_MS=30000 "$SC_RUN" -n 2 --timeout 120 \
  "$MR/mr_board" late
check "abort n=2" env SC_TRANSPORT=shm "$SC_RUN" -n 2 --timeout 120 "$MR/mr_board" abort
finish
