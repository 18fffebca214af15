#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Usage: sh tools/slowest_tests.sh BUILDDIR [N] [wall|cpu]
# The N (default 10) tests of BUILDDIR's last make check that took longest,
# by wall time (default) or by CPU time, from the line
# test/run_with_timeout.sh writes at the end of each log. Both are printed:
# wall s, cpu s (of the test and every process it waited for), name.
d=$1
n=${2:-10}
key=2
[ "${3:-wall}" = cpu ] && key=3
find "$d" -name '*.log' ! -name config.log ! -name test-suite.log ! -path '*/memcheck/*' \
  -exec grep -H '^run_with_timeout: [0-9]* s' {} + 2>/dev/null |
  sed -n "s|^$d/||; s|\.log:run_with_timeout: \([0-9]*\) s, exit [0-9]*, cpu \([0-9?]*\) s.*| \1 \2|p;
    s|\.log:run_with_timeout: \([0-9]*\) s, exit [0-9]*\$| \1 ?|p" |
  sort -k$key -n -r | head -n "$n" | awk '{printf "  %5s s  %5s s cpu  %s\n", $2, $3, $1}'
