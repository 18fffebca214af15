#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The low-rank and 1-bit DDP hooks (powersgd_hook against torch's own
# powerSGD_hook, acpsgd_hook against dense DDP, onebit_hook and
# majority_vote_hook) on 2 ranks (torchrun's variables), 300 steps.
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python numpy
if "$PYTHON" -c "import torch" >/dev/null 2>&1; then
  check "DDP low-rank and 1-bit hooks, 2 ranks" torchrun_like 2 "$PYTHON" "$PYT/ddp_compress.py"
  grep "held-out" "$tmpdir/out"
else
  echo "SKIP: DDP hooks (no torch)"
fi
finish
