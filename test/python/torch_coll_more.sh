#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# all_to_all_single, all_to_all, gather, scatter, the object collectives,
# all_gather_coalesced, all_reduce_coalesced and the uneven all_gather on the
# "sparsecoll" backend against gloo on the same inputs, and bad arguments
# raising on both; 1..4 ranks under torchrun's variables.
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python numpy torch
for n in 1 2 3 4; do
  check "torch backend: all-to-all, gather, scatter, objects, coalesced vs gloo n=$n" \
    torchrun_like "$n" "$PYTHON" "$PYT/torch_coll_more.py"
done
finish
