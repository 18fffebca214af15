#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sparsecoll.Comm's symmetric collectives and sparsecoll.place_factors against
# numpy references on 1..4 ranks (sc-run); on 3 ranks also on torch tensors
# where torch is installed.
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python numpy
with_torch=
"$PYTHON" -c "import torch" >/dev/null 2>&1 && with_torch=--torch
for n in 1 2 3 4; do
  opt=
  [ "$n" -eq 3 ] && opt=$with_torch
  check "Comm symmetric collectives n=$n${opt:+ (and torch tensors)}" \
    "$SC_RUN" -n "$n" --timeout 120 --label "$PYTHON" "$PYT/comm_sym.py" $opt
done
finish
