#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# examples/moe_dispatch.py at a small size on 4 ranks (torchrun's variables):
# mixture-of-experts dispatch through all_to_all_single with uneven counts on
# the "sparsecoll" backend, against the same computation in one process.
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python torch
check "examples/moe_dispatch.py, 4 ranks, 48 tokens per rank" \
  torchrun_like 4 "$PYTHON" "$top_srcdir/examples/moe_dispatch.py" --tokens 48 --dim 16 --hidden 32
grep "max abs difference" "$tmpdir/out"
finish
