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
echo "run_with_timeout: $(($(date +%s) - start)) s, exit $rc" >&2
exit $rc
