#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# After a peer left or an abort, the ranks destroy the communicator, create a
# new one from a new unique id (shared through a file) and run a checked
# all-reduce; descriptors, threads and memfd or /dev/shm mappings equal those
# before the first communicator (fail_recover checks), over tcp and shm.
. "$top_srcdir/test/failure/fail_lib.sh"
row() { # row MODE TRANSPORT
  mkdir -p "$tmpdir/ids" && rm -f "$tmpdir/ids"/*
  SC_TRANSPORT=$2 SC_TIMEOUT_MS=30000 "$SC_RUN" -n 3 --grace 30 --timeout 60 --label \
    "$FAIL/fail_recover" "$tmpdir/ids" "$1" 5 >"$tmpdir/run" 2>&1
  rc=$?
  grep -E 'RESULT|FAIL|before' "$tmpdir/run"
  want=3
  [ "$1" = exit ] && want=2
  [ $rc -eq 0 ] && [ "$(grep -c 'before: ' "$tmpdir/run")" -eq $want ] && ! grep -q FAIL "$tmpdir/run"
}
for tp in tcp shm; do
  check "new communicator after a peer left, $tp" row exit $tp
  check "new communicator after an abort, $tp" row abort $tp
done
finish
