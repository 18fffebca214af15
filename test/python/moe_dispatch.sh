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
# The same with the hierarchical all-to-allv on 2 emulated hosts x 2: every
# all_to_all_single of the run takes it (the TUNE trace names each call's).
moe_hier() (
  export SC_A2AV_ALGO=hier SC_RANKS_PER_HOST=2 SC_DEBUG=TRACE SC_DEBUG_SUBSYS=TUNE
  torchrun_like 4 "$PYTHON" "$top_srcdir/examples/moe_dispatch.py" --tokens 48 --dim 16 \
    --hidden 32 >/dev/null || return 1
  grep "max abs difference" "$tmpdir/launch"
  all=$(grep -c " alltoallv #[0-9]*: " "$tmpdir/launch")
  hier=$(grep -c " alltoallv #[0-9]*: hier\$" "$tmpdir/launch")
  echo "alltoallv: $hier of $all calls ran hier"
  [ "$all" -gt 0 ] && [ "$hier" -eq "$all" ]
)
check "examples/moe_dispatch.py, 2 hosts x 2, SC_A2AV_ALGO=hier" moe_hier
finish
