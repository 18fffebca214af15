#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Comm.allreduce_compressed against numpy references on 1..3 ranks (sc-run; on
# 3 ranks also on torch tensors where torch is installed), and the fp16/bf16
# DDP hooks against dense DDP on 2 ranks (torchrun's variables, with torch).
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python numpy
with_torch=
"$PYTHON" -c "import torch" >/dev/null 2>&1 && with_torch=--torch
for n in 1 2 3; do
  opt=
  [ "$n" -eq 3 ] && opt=$with_torch
  check "Comm.allreduce_compressed n=$n${opt:+ (and torch tensors)}" \
    "$SC_RUN" -n "$n" --timeout 120 --label "$PYTHON" "$PYT/comm_halfwire.py" $opt
done
if [ -n "$with_torch" ]; then
  check "DDP fp16_hook and bf16_hook vs dense DDP, 2 ranks" \
    torchrun_like 2 "$PYTHON" "$PYT/ddp_halfwire.py"
  grep "_hook:" "$tmpdir/out"
else
  echo "SKIP: DDP hooks (no torch)"
fi
finish
