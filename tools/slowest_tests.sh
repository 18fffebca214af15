#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Usage: sh tools/slowest_tests.sh BUILDDIR [N]
# The N (default 10) tests of BUILDDIR's last make check that took longest,
# from the wall time test/run_with_timeout.sh writes at the end of each log.
d=$1
n=${2:-10}
find "$d" -name '*.log' ! -name config.log ! -name test-suite.log ! -path '*/memcheck/*' \
  -exec grep -H '^run_with_timeout: [0-9]* s' {} + 2>/dev/null |
  sed "s|^$d/||; s|\.log:run_with_timeout: \([0-9]*\) s.*| \1|" |
  sort -k2 -n -r | head -n "$n" | awk '{printf "  %5d s  %s\n", $2, $1}'
