#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Liveness watch: a peer killed or stopped is noticed by every rank,
# including ranks that never exchange data with it; a clean destroy is not a
# death; nothing leaks. SC_TRANSPORT comes from the tcp-/shm- wrapper.
. "$top_srcdir/test/multi/lib.sh"
W="$top_builddir/test/failure/fail_watch"
run() { # run N MODE VICTIM BOUND WANT_OK [ENV...]: WANT_OK ranks print OK, none FAIL
  n=$1 mode=$2 victim=$3 bound=$4 want=$5
  shift 5
  # The short SC_TIMEOUT_MS of some rows is for the watch, not the bootstrap.
  env SC_BOOTSTRAP_TIMEOUT_MS=60000 "$@" "$SC_RUN" -n "$n" --grace 30 --timeout 60 --label "$W" \
    "$mode" "$victim" "$bound" \
    "$tmpdir/pid" >"$tmpdir/run" 2>&1
  cat "$tmpdir/run"
  ok=$(grep -c ': OK ' "$tmpdir/run")
  bad=$(grep -c 'FAIL' "$tmpdir/run")
  [ "$ok" -eq "$want" ] && [ "$bad" -eq 0 ]
}
quiet() { # the run above logged no death
  ! grep -E 'died|stopped responding|called sc_comm_abort' "$tmpdir/run"
}
# A 60 s timeout: only the watch can make the bound of 5 s.
check "killed rank 3 of 5, ring, survivors in a call" \
  run 5 kill 3 5 4 SC_TIMEOUT_MS=60000 SC_ALGO=ring
check "killed rank 2 of 5, survivors idle" run 5 idle 2 5 4 SC_TIMEOUT_MS=60000
check "killed rank 0 of 4 (the hub)" run 4 kill 0 5 3 SC_TIMEOUT_MS=60000 SC_ALGO=ring
# Stopped: nobody can tell a stopped rank from a slow one before the timeout.
check "stopped rank 2 of 4, SC_TIMEOUT_MS=3000" run 4 stop 2 6 4 SC_TIMEOUT_MS=3000 SC_ALGO=ring
check "stopped rank 0 of 3, SC_TIMEOUT_MS=3000" run 3 stop 0 6 3 SC_TIMEOUT_MS=3000 SC_ALGO=ring
clean() { run 4 "$1" -1 5 4 SC_HEARTBEAT_MS=50 && quiet; }
check "clean destroys (split too) are no death, nothing leaks" clean clean
check "abort on every rank, nothing leaks" run 4 abort -1 5 4
finish
