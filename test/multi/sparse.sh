#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Sparse all-reduce (every algorithm and float dtype) on 1, 2, 3, 4, 5 and 8
# ranks against the test's own reference, and the error-feedback invariant
# on 3, 4 and 5 ranks (3 and 5 fold; exact and MSTopK selection), with the tree and hier
# forced too.
. "$top_srcdir/test/multi/lib.sh"
for n in 1 2 3 4 5 8; do
  check "sparse n=$n" "$SC_RUN" -n "$n" --timeout 300 --label "$MR/mr_sparse"
done
check "sparse n=4 SC_TRANSPORT=shm" env SC_TRANSPORT=shm "$SC_RUN" -n 4 --timeout 300 --label "$MR/mr_sparse"
for n in 3 4 5; do
  check "error feedback n=$n" "$SC_RUN" -n "$n" --timeout 300 --label "$MR/mr_sparse" --ef
done
# The tree's survival masks (SC_GTOPK_ALGO; hier on one host is the tree):
# nothing is lost where a parent drops a child's entries.
for n in 3 5 8; do
  check "error feedback n=$n SC_GTOPK_ALGO=tree" env SC_GTOPK_ALGO=tree "$SC_RUN" -n "$n" \
    --timeout 300 --label "$MR/mr_sparse" --ef
done
check "error feedback n=6 SC_GTOPK_ALGO=hier" env SC_GTOPK_ALGO=hier "$SC_RUN" -n 6 \
  --timeout 300 --label "$MR/mr_sparse" --ef
# sc_gtopk_perf -a auto runs what sc_gtopk_allreduce would (one host: the butterfly;
# SC_GTOPK_ALGO forces), its result checked against the tool's reference.
auto_runs() { # auto_runs ALGO-SHOWN [SC_GTOPK_ALGO]
  out=$(env ${2:+SC_GTOPK_ALGO=$2} "$SC_RUN" -n 4 --timeout 200 "$top_builddir/sc_gtopk_perf" \
    -a auto -n 65536 -k 100 -w 1 -i 2 -c 1 2>&1) || return 1
  echo "$out" | grep -q "^# -a auto: $1 " &&
    echo "$out" | awk -v a="$1" '$1 == a && $NF == 0 {ok = 1} END {exit !ok}'
}
check "sc_gtopk_perf -a auto on one host: the butterfly" auto_runs gtopk
check "sc_gtopk_perf -a auto, SC_GTOPK_ALGO=hier" auto_runs hier hier
check "SC_GTOPK_ALGO=bogus is refused, naming the variable" sh -c \
  'out=$(SC_GTOPK_ALGO=bogus "$0" -n 2 --timeout 60 "$1" --ef 2>&1) && exit 1
   echo "$out" | grep -q "SC_GTOPK_ALGO: .bogus. is not one of"' "$SC_RUN" "$MR/mr_sparse"

finish
