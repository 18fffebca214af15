#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Failure table rows "peer's socket closed" and "garbage on a data
# connection" (tcp): rank 1 shuts down, or writes 64 junk bytes or a forged
# header with a 2^62-byte length into, its data sockets while the others wait
# on it. Every rank fails with SC_ERR_REMOTE within 2 s (SC_TIMEOUT_MS is 30 s;
# 0.3 s of it is rank 1's pause before the damage), the message naming the
# operation, this rank and host, and the peer (fail_tcp checks); rank 2 names
# rank 1 and the damage. The failed ranks keep their communicators 4 s before
# destroying them: the others must not need that to learn of the failure.
. "$top_srcdir/test/failure/fail_lib.sh"
row() { # row MODE N [SC_HEARTBEAT_MS]
  SC_HEARTBEAT_MS=${3:-0} SC_TRANSPORT=tcp SC_ALGO=ring SC_NSOCKS=2 SC_TIMEOUT_MS=30000 \
    "$SC_RUN" -n "$2" --grace 60 --timeout 90 --label "$FAIL/fail_tcp" "$1" 2 4 \
    >"$tmpdir/run" 2>&1
  rc=$?
  grep -E 'RESULT|FAIL' "$tmpdir/run"
  [ $rc -eq 0 ] && every_rank "$2" "$tmpdir/run"
}
for mode in sockclose garbage hugehdr; do
  for n in 2 4; do
    check "$mode, n=$n" row "$mode" "$n"
  done
done
# Without the liveness watch, only a failed rank closing its connections
# tells the ranks beyond its neighbours.
check "garbage, n=4, no liveness watch" row garbage 4 -1
check "sockclose, n=4, no liveness watch" row sockclose 4 -1
finish
