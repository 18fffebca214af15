#!/bin/sh
# Sparse all-reduce (every algorithm and float dtype) on 1, 2, 3, 4, 5 and 8
# ranks against the test's own reference, and the error-feedback invariant
# on 3, 4 and 5 ranks (3 and 5 fold).
. "$top_srcdir/test/multi/lib.sh"
for n in 1 2 3 4 5 8; do
  check "sparse n=$n" "$SC_RUN" -n "$n" --timeout 300 --label "$MR/mr_sparse"
done
check "sparse n=4 SC_TRANSPORT=shm" env SC_TRANSPORT=shm "$SC_RUN" -n 4 --timeout 300 --label "$MR/mr_sparse"
for n in 3 4 5; do
  check "error feedback n=$n" "$SC_RUN" -n "$n" --timeout 300 --label "$MR/mr_sparse" --ef
done
finish
