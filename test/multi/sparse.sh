#!/bin/sh
# Sparse all-reduce (every algorithm and float dtype) on 1, 2, 3, 4, 5 and 8
# ranks against the test's own reference, and the error-feedback invariant
# on 3, 4 and 5 ranks (3 and 5 fold), with the tree and hier forced too.
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
check "SC_GTOPK_ALGO=bogus is refused, naming the variable" sh -c \
  'out=$(SC_GTOPK_ALGO=bogus "$0" -n 2 --timeout 60 "$1" --ef 2>&1) && exit 1
   echo "$out" | grep -q "SC_GTOPK_ALGO: .bogus. is not one of"' "$SC_RUN" "$MR/mr_sparse"

finish
