#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sc_onebit_perf on tiny vectors: every row (dense, all-gather of signs, 1-bit
# scaled and majority) checked against the tool's reference (it exits 1 on a
# wrong element), on 1, 2 and 3 ranks, n not a multiple of 8P; its JSON has
# every row with wrong = 0; --help and a bad option.
. "$top_srcdir/test/multi/lib.sh"
P="$top_builddir/sc_onebit_perf"
for n in 1 2 3; do
  check "all rows n=$n" "$SC_RUN" -n "$n" --timeout 60 "$P" -n 1001 -a all -w 1 -i 2
done
check "json n=3" sh -c "'$SC_RUN' -n 3 --timeout 60 '$P' -n 77 -a all -i 1 -J '$tmpdir/o.json' &&
  [ \"\$(grep -c '\"wrong\": 0}' '$tmpdir/o.json')\" -eq 4 ]"
check "help" "$P" --help
check "bad option refused" sh -c "! '$P' -a nosuch"
finish
