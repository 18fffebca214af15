#!/bin/sh
# Test driver wrapper: runs one test under a watchdog so that nothing in
# `make check` can hang. TEST_TIMEOUT seconds (default 600).
t=${TEST_TIMEOUT:-600}
exec timeout --signal=TERM --kill-after=10 "$t" "$@"
