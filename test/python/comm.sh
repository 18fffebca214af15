#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sparsecoll.Comm: every call against numpy references on 1..4 ranks (sc-run),
# and the errors it raises.
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python numpy
for n in 1 2 3 4; do
  check "Comm calls n=$n" "$SC_RUN" -n "$n" --timeout 120 --label "$PYTHON" "$PYT/comm_numpy.py"
done
finish
