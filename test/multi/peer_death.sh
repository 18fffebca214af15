#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A rank that exits or is killed mid-job: every survivor fails with
# SC_ERR_REMOTE naming a peer (mr_peer_death checks), well before the timeout;
# and sc_comm_abort from another thread wakes a blocked call (mr_abort).
. "$top_srcdir/test/multi/lib.sh"
survivors() { # survivors N HOW: every rank but the victim reports its error
  n=$1
  SC_TIMEOUT_MS=60000 "$SC_RUN" -n "$n" --grace 90 --timeout 120 --label "$MR/mr_peer_death" "$2" >"$tmpdir/run" 2>&1
  cat "$tmpdir/run"
  got=$(grep -c 'failed in' "$tmpdir/run")
  bad=$(grep -c 'FAIL' "$tmpdir/run")
  [ "$got" -eq $((n - 1)) ] && [ "$bad" -eq 0 ]
}
check "peer exits, n=2" survivors 2 exit
check "peer exits, n=4" survivors 4 exit
check "peer killed, n=3" survivors 3 kill
check "peer killed, n=5" survivors 5 kill
check "abort from another thread, n=2" "$SC_RUN" -n 2 --timeout 60 --label "$MR/mr_abort"
finish
