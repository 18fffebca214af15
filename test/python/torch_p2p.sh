#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# send, recv, isend, irecv and batch_isend_irecv on the "sparsecoll" backend
# against gloo on the same inputs (ring shifts, both orders, every order of a
# batch, all pairs, interleaved tags, several dtypes, empty and multi-MiB
# tensors), and bad arguments raising on both: groups of 1, 2, 3 and 4 ranks
# in one 4-rank launch (torchrun's variables; the default group is the
# 4-rank one).
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python numpy torch
check "torch backend: send, recv, isend, irecv, batch_isend_irecv vs gloo, groups of 1..4 ranks" \
  torchrun_like 4 "$PYTHON" "$PYT/torch_p2p.py"
finish
