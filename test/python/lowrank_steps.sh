#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sparsecoll.LowRank (PowerSGD and ACP-SGD) over 7 calls against an
# independent numpy reference of the algorithms, on 1, 2, 3, 5 and 8 ranks
# (sc-run).
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python numpy
for n in 1 2 3 5 8; do
  check "LowRank against the reference, n=$n" \
    "$SC_RUN" -n "$n" --timeout 120 --label "$PYTHON" "$PYT/lowrank_steps.py"
done
finish
