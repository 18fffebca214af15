#!/bin/sh
# Each all-reduce algorithm forced through SC_ALGO on 1, 2, 3, 5, 6, 7 and 8
# ranks: every dtype, op, placement and count against the reference.
. "$top_srcdir/test/multi/lib.sh"
for algo in ring tree rd rabenseifner; do
  for n in 1 2 3 5 6 7 8; do
    check "SC_ALGO=$algo n=$n" env SC_ALGO=$algo "$SC_RUN" -n "$n" --timeout 300 --label "$MR/mr_collectives" --allreduce-only
  done
done
check "SC_TUNE=measure n=4 (auto)" env SC_TUNE=measure "$SC_RUN" -n 4 --timeout 300 --label "$MR/mr_collectives" --allreduce-only
finish
