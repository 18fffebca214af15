#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# all_to_all_single, all_to_all, gather, scatter, the object collectives,
# all_gather_coalesced, all_reduce_coalesced and the uneven all_gather on the
# "sparsecoll" backend against gloo on the same inputs, and bad arguments
# raising on both: groups of 1, 2, 3 and 4 ranks in one 4-rank launch
# (torchrun's variables; the default group is the 4-rank one).
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python numpy torch
check "torch backend: all-to-all, gather, scatter, objects, coalesced vs gloo, groups of 1..4 ranks" \
  torchrun_like 4 "$PYTHON" "$PYT/torch_coll_more.py"
finish
