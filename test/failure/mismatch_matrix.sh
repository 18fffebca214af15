#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Mismatched calls with the default settings (no SC_CHECK_MISMATCH): ranks
# that call different (collective, count) pairs all fail with
# SC_ERR_MISMATCH within the bound (2 s), naming both calls, and the
# communicator reports it afterwards (sc_comm_get_async_error, and the next
# call fails at once). test/failure/mismatch_matrix.c asserts each rank's
# result; a rank whose result needs no byte of the other call's ranks (a
# reduce's ranks but the root, a broadcast's ranks that made rank 0's call)
# may complete, with a right result, and must then be told within the
# bound. A call still running 3 s past the bound is ended by sc_comm_abort,
# so nothing hangs and the other cases still run. SC_TRANSPORT comes from
# the tcp-, shm-, ucx- or verbs- wrapper; verbs runs over the stand-in
# libibverbs (test/multi/verbs_fake_ibverbs.c), as test/multi/verbs_fake.sh
# does.
#
# The calls: allreduce, reduce_scatter, allgather, broadcast and reduce
# (root 0) of 4 float32 (the board's size: the shared-memory board compares
# the calls), 16384 (64 KiB, one chunk) and 1048576 (4 MiB, many chunks),
# and the barrier: 16 calls, 120 pairs. Which mechanism must catch a pair
# depends on it: the board, the print in a message's header, or the watch's
# hub where no message flows between the mismatched ranks (a rank on the
# board while its peer runs a schedule, or ranks that all wait to receive).
# The cross product (120 pairs x 4 rank counts x 4 transports, up to 2 s a
# case) would take hours, not the minute or two make check has for it, so:
#  - tcp, shm: every pair on 2 ranks (rank 1 on the pair's second call for
#    even pairs, rank 0, the hub, for odd ones: both sides of every
#    mechanism), with SC_HEARTBEAT_MS=100 so that the cases the hub decides
#    take a fraction of a second, not up to the default 1 s heartbeat;
#  - tcp, shm: eight representative pairs (one of each mechanism and shape:
#    REP below) on 3, 4 and 5 ranks, the odd ones one rank, half the ranks,
#    or a subset holding the hub: what more ranks add is who relays to whom;
#  - ucx, verbs: the representative pairs on 2 and 3 ranks (what differs
#    there is how the transport carries the print, not the pair; the verbs
#    stand-in is slow);
#  - every transport: the three rows of the mismatch table (all-reduce
#    counts 100 / 50, 1000000 / 999999, 4 / 4000000) and barrier against a
#    64 KiB all-reduce, with the default SC_HEARTBEAT_MS and SC_TIMEOUT_MS,
#    on 2 ranks and on 4 (two against two), against the same bound: what a
#    user gets with no setting changed.
# MISMATCH_BOUND_S (default 2) sets the bound: a machine busy with other
# work may need more to check the codes and texts alone.
# Matched calls never tripping the check is the rest of the suite's part:
# every message carries its print in every test.
. "$top_srcdir/test/multi/lib.sh"
PROG="$top_builddir/test/failure/mismatch_matrix"
# Every rank's line of every case goes to the log (check keeps only a tail).
exec 3>&1
case "${SC_TRANSPORT:-}" in
verbs)
  lib="$top_builddir/test/multi/.libs/libverbs_fake_ibverbs.so"
  if [ ! -f "$lib" ]; then
    echo "skipped: $lib not built"
    exit 77
  fi
  mkdir "$tmpdir/fakeib"
  ln -s "$(cd "$(dirname "$lib")" && pwd)/libverbs_fake_ibverbs.so" \
    "$tmpdir/fakeib/libibverbs.so.1"
  LD_LIBRARY_PATH="$tmpdir/fakeib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # The stand-in's costs are no HCA's: no calibration (as verbs_fake.sh).
  SC_TUNE=model
  export LD_LIBRARY_PATH SC_TUNE
  ;;
esac
bound=${MISMATCH_BOUND_S:-2}
# UCX's tag holds a 16-bit hash of the print, not the print: a rank that
# meets another call's message there can name its own call only, and says
# the peer "called another operation" (the hub and the board name both).
unnamed=
[ "${SC_TRANSPORT:-}" = ucx ] && unnamed=--peer-unnamed
echo "transport: ${SC_TRANSPORT:-auto}, bound: $bound s"
# One of each: board against board (counts, collectives), messages of two
# counts or two collectives, the board against a schedule, a root that sends
# against a root that receives, the barrier against both.
REP="allreduce:board/allreduce:many allreduce:chunk/allreduce:many barrier/allreduce:chunk
reduce_scatter:chunk/allgather:chunk broadcast:many/reduce:many allgather:board/reduce:board
broadcast:chunk/barrier reduce:many/allreduce:board"
ROWS="allreduce:100/allreduce:50 allreduce:1000000/allreduce:999999
allreduce:4/allreduce:4000000 barrier/allreduce:chunk"
# with_odd SET CASES: the cases with SET (R+R...) calling the second call.
with_odd() {
  # shellcheck disable=SC2086 # CASES is a list of words
  for c in $2; do printf '%s@%s ' "$c" "$1"; done
}
# matrix N CASES [ENV...]: one launch of N ranks; every rank passes every case.
matrix() {
  n=$1 cases=$2
  shift 2
  ncases=0
  # shellcheck disable=SC2086 # CASES is a list of words
  for c in $cases; do
    if [ "$c" = all ]; then ncases=$((ncases + 120)); else ncases=$((ncases + 1)); fi
  done
  # A case takes at most the bound + 3 s (then the watchdog aborts it), plus
  # its split and warm-up.
  limit=$(awk -v n="$ncases" -v b="$bound" 'BEGIN { printf "%d", 60 + n * (b + 6) }')
  # The default settings but for ENV: none of the caller's may weaken the
  # check (SC_CHECK_MISMATCH) or move the bound (the timeout, the heartbeat).
  # shellcheck disable=SC2086
  env -u SC_TIMEOUT_MS -u SC_HEARTBEAT_MS -u SC_CHECK_MISMATCH -u SC_BOARD_BYTES -u SC_ALGO \
    SC_DEBUG=NONE "$@" "$SC_RUN" -n "$n" --grace 30 --timeout "$limit" "$PROG" \
    --bound "$bound" $unnamed $cases >"$tmpdir/run" 2>&1
  rc=$?
  cat "$tmpdir/run" >&3
  ok=$(grep -c '^case [0-9]* (.*) rank [0-9]*: OK mismatch in' "$tmpdir/run")
  echo "$ok of $((n * ncases)) rank results hold (sc-run exit $rc)" >&3
  echo "$ok of $((n * ncases)) rank results hold (sc-run exit $rc)"
  grep -E ': FAIL |^sc-run' "$tmpdir/run"
  [ "$rc" -eq 0 ] && [ "$ok" -eq $((n * ncases)) ] && ! grep -q ': FAIL ' "$tmpdir/run"
}
case "${SC_TRANSPORT:-}" in
ucx | verbs)
  check "2 ranks: representative pairs" matrix 2 "$REP" SC_HEARTBEAT_MS=100
  check "3 ranks, rank 2 odd: representative pairs" matrix 3 "$(with_odd 2 "$REP")" \
    SC_HEARTBEAT_MS=100
  ;;
*)
  check "2 ranks: every pair" matrix 2 all SC_HEARTBEAT_MS=100
  check "3 ranks, rank 1 odd: representative pairs" matrix 3 "$REP" SC_HEARTBEAT_MS=100
  check "4 ranks, ranks 2 and 3 odd: representative pairs" matrix 4 "$(with_odd 2+3 "$REP")" \
    SC_HEARTBEAT_MS=100
  check "5 ranks, ranks 0 and 4 odd: representative pairs" matrix 5 "$(with_odd 0+4 "$REP")" \
    SC_HEARTBEAT_MS=100
  ;;
esac
check "2 ranks, default settings: the table's rows" matrix 2 "$ROWS"
check "4 ranks, default settings: the table's rows, two against two" matrix 4 \
  "$(with_odd 1+3 "$ROWS")"
finish
