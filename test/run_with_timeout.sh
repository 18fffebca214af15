#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Test driver wrapper: runs one test under a watchdog so that nothing in
# `make check` can hang. TEST_TIMEOUT seconds (default 600). The test's
# wall time ends its log, so that tools/slowest_tests.sh can say where a
# stage's minutes go.
t=${TEST_TIMEOUT:-600}
start=$(date +%s)
timeout --signal=TERM --kill-after=10 "$t" "$@"
rc=$?
# times' second line: the user and system time of the waited-for children
# (through a file: in a pipe or $(...) it would run in a subshell, which has
# no children).
cpu=
if tf=$(mktemp "${TMPDIR:-/tmp}/sc-times.XXXXXX" 2>/dev/null); then
  times >"$tf"
  cpu=$(sed -n 2p "$tf" | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); n += a[1] * 60 + a[2] } printf "%.0f", n }')
  rm -f "$tf"
fi
echo "run_with_timeout: $(($(date +%s) - start)) s, exit $rc, cpu ${cpu:-?} s" >&2
exit $rc
