#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# examples/pipeline_1f1b.py at a small size on 4 ranks (torchrun's
# variables): a 4-stage MLP trained with a 1F1B schedule over send/recv and
# isend on the "sparsecoll" backend, against the same model trained in one
# process.
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python torch
check "examples/pipeline_1f1b.py, 4 stages, 5 micro-batches, 3 iterations" \
  torchrun_like 4 "$PYTHON" "$top_srcdir/examples/pipeline_1f1b.py" --micro-batches 5 --micro-batch-size 4 \
  --dim 8 --hidden 16 --iters 3
grep "max abs difference" "$tmpdir/out"
finish
