#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# DistributedOptimizer(compression=...) in every mode against its dense mode,
# 2 ranks (torchrun's variables), 300 steps each.
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python numpy
if "$PYTHON" -c "import torch" >/dev/null 2>&1; then
  check "DistributedOptimizer compression modes vs dense, 2 ranks" \
    torchrun_like 2 "$PYTHON" "$PYT/dopt_compression.py"
  grep "held-out\|topk at" "$tmpdir/out"
else
  echo "SKIP: DistributedOptimizer compression (no torch)"
fi
finish
