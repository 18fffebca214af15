#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sparsecoll.torch.OneBitAdam against torch.optim.Adam on densely averaged
# gradients, 2 ranks (torchrun's variables), 300 steps.
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python numpy
if "$PYTHON" -c "import torch" >/dev/null 2>&1; then
  check "OneBitAdam vs dense Adam, 2 ranks" torchrun_like 2 "$PYTHON" "$PYT/onebit_adam.py"
  grep "held-out" "$tmpdir/out"
else
  echo "SKIP: OneBitAdam (no torch)"
fi
finish
