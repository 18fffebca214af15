#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sparsecoll.OneBit (the 1-bit compressed all-reduce) against numpy
# references on 1, 2 and 3 ranks (sc-run).
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python numpy
for n in 1 2 3; do
  check "OneBit n=$n" "$SC_RUN" -n "$n" --timeout 120 --label "$PYTHON" "$PYT/comm_onebit.py"
done
finish
