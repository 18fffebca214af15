#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Failure table row "local abort from another thread": two threads abort at
# once, twice each, during a blocking call with a request queued behind it,
# during a polled non-blocking request, and idle with the peer alive or dead
# (fail_abort checks codes, bounds and messages), over tcp and shm.
. "$top_srcdir/test/failure/fail_lib.sh"
row() { # row MODE TRANSPORT
  SC_TRANSPORT=$2 SC_TIMEOUT_MS=30000 "$SC_RUN" -n 2 --grace 30 --timeout 60 --label \
    "$FAIL/fail_abort" "$1" 2 >"$tmpdir/run" 2>&1
  rc=$?
  grep -E 'RESULT|FAIL|abort thread|failures' "$tmpdir/run"
  [ $rc -eq 0 ] && grep -q "fail_abort $1: 0 failures" "$tmpdir/run"
}
for tp in tcp shm; do
  check "abort, peer alive, $tp" row alive $tp
  check "abort, peer dead, $tp" row dead $tp
done
finish
