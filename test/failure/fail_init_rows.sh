#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Failure table rows "wrong auth secret" and "wrong nranks at init", ranks
# started by hand (fail_init forks them and checks each one's code, time and
# message; SC_TIMEOUT_MS=4000 keeps the rows that end at the timeout short),
# and a rank that starts later than SC_TIMEOUT_MS but within
# SC_BOOTSTRAP_TIMEOUT_MS (fail_init sets both).
. "$top_srcdir/test/failure/fail_lib.sh"
row() {
  SC_TIMEOUT_MS=4000 "$FAIL/fail_init" "$1" >"$tmpdir/run" 2>&1
  rc=$?
  grep -E 'RESULT|FAIL|expected' "$tmpdir/run"
  [ $rc -eq 0 ] && every_rank 3 "$tmpdir/run"
}
for mode in auth auth-root nranks nranks-root; do
  check "$mode" row "$mode"
done
late_row() {
  "$FAIL/fail_init" late >"$tmpdir/run" 2>&1
  rc=$?
  grep -E 'RESULT|FAIL|expected' "$tmpdir/run"
  [ $rc -eq 0 ] && [ "$(grep -c 'RESULT late: init in .* sum correct' "$tmpdir/run")" -eq 3 ]
}
check "a rank 2.5 s late: SC_BOOTSTRAP_TIMEOUT_MS=8000 over SC_TIMEOUT_MS=1000" late_row
finish
