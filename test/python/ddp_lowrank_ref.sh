#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# powersgd_hook and acpsgd_hook under DDP, every gradient of 9 backward passes
# against a numpy reference of the algorithms, on 3 ranks (torchrun's
# variables); lowrank_steps.sh covers the rank counts.
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python numpy torch
for n in 3; do
  check "DDP low-rank hooks against the reference, $n ranks" torchrun_like "$n" "$PYTHON" \
    "$PYT/ddp_lowrank_ref.py"
done
finish
