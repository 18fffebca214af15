#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sparsecoll.Comm's all-to-all, uneven all-to-all, gather, scatter and uneven
# all-gather against numpy references on 1..4 ranks (sc-run), on torch tensors
# (direct and staged) where torch is installed, and the errors they raise.
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python numpy
for n in 1 2 3 4; do
  check "Comm all-to-all, gather, scatter, uneven all-gather n=$n" \
    "$SC_RUN" -n "$n" --timeout 120 --label "$PYTHON" "$PYT/comm_alltoall.py"
done
finish
