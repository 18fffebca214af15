#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Usage: sh tools/show_failed.sh BUILDDIR [LINES]
# After a failed `make check` in BUILDDIR: names each test that failed (its
# .trs says FAIL or ERROR) and prints the last LINES (default 60) of its log,
# so that a CI log says which test failed and why, not only how many.
d=$1
n=${2:-60}
for trs in $(find "$d" -name '*.trs' 2>/dev/null); do
  if grep -qE '^:test-result: (FAIL|ERROR)' "$trs"; then
    log=${trs%.trs}.log
    echo "===== failed: ${log#"$d"/}"
    tail -n "$n" "$log" 2>/dev/null
  fi
done
