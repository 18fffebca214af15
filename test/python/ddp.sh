#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# DDP on the "sparsecoll" backend against DDP on gloo, the gTop-k comm hook
# against dense DDP, and DistributedOptimizer under every fusion policy against
# DDP on gloo; 4 ranks each (torchrun's variables).
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python numpy torch
check "DDP sparsecoll vs gloo, 4 ranks, 20 steps, unused parameters" \
  torchrun_like 4 "$PYTHON" "$PYT/ddp_compare.py"
grep -m1 "max |sparsecoll - gloo|" "$tmpdir/out"
check "DDP gTop-k hook, 4 ranks, 150 steps: ranks identical, error feedback vs none vs dense" \
  torchrun_like 4 "$PYTHON" "$PYT/gtopk_hook.py"
grep "loss after" "$tmpdir/out"
check "DistributedOptimizer, every fusion policy vs DDP/gloo, 4 ranks" \
  torchrun_like 4 "$PYTHON" "$PYT/dopt_compare.py"
grep "policy" "$tmpdir/out"
finish
