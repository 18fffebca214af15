#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sparsecoll.LowRank (PowerSGD and ACP-SGD) against numpy references on 1..3
# ranks (sc-run); on 2 ranks also on a torch tensor where torch is installed.
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python numpy
with_torch=
"$PYTHON" -c "import torch" >/dev/null 2>&1 && with_torch=--torch
for n in 1 2 3; do
  opt=
  [ "$n" -eq 2 ] && opt=$with_torch
  check "LowRank n=$n${opt:+ (and torch tensors)}" \
    "$SC_RUN" -n "$n" --timeout 120 --label "$PYTHON" "$PYT/lowrank.py" $opt
done
finish
