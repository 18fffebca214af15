#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Every collective, dtype, op and placement on 1, 2, 3, 4, 5 and 8 ranks over
# loopback TCP, plus both broadcast/reduce algorithms forced, the reduce-scatter's and
# all-gather's non-ring ones forced, and a tiny chunk.
# SC_TEST_SAMPLE=1 (the sanitizer runs): 1, 3, 4 and 8 ranks; the rows below
# keep 5 ranks (an odd count past a power of two) under other settings.
. "$top_srcdir/test/multi/lib.sh"
ranks="1 2 3 4 5 8"
[ "${SC_TEST_SAMPLE:-0}" = 1 ] && ranks="1 3 4 8"
for n in $ranks; do
  check "collectives n=$n" "$SC_RUN" -n "$n" --timeout 400 --label "$MR/mr_collectives"
done
check "collectives n=4 SC_BCAST_ALGO=chain" env SC_BCAST_ALGO=chain "$SC_RUN" -n 4 --timeout 300 --label "$MR/mr_collectives"
check "collectives n=3 SC_BCAST_ALGO=binomial" env SC_BCAST_ALGO=binomial "$SC_RUN" -n 3 --timeout 300 --label "$MR/mr_collectives"
check "collectives n=5 SC_CHUNK_BYTES=4096" env SC_CHUNK_BYTES=4096 "$SC_RUN" -n 5 --timeout 300 --label "$MR/mr_collectives"
check "collectives n=4 SC_ALGO=ring" env SC_ALGO=ring "$SC_RUN" -n 4 --timeout 300 --label "$MR/mr_collectives"
check "collectives n=5 SC_RS_ALGO=recursive-halving SC_AG_ALGO=recursive-doubling" \
  env SC_RS_ALGO=recursive-halving SC_AG_ALGO=recursive-doubling "$SC_RUN" -n 5 --timeout 300 --label "$MR/mr_collectives" --rs-ag-only
finish
