#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The torch backend's stream-ordered path on CUDA tensors, 2 ranks sharing the
# GPU: every collective behind a late producer with a consumer right after,
# Work and future semantics, DDP and the gTop-k hook with no host
# synchronisation per bucket; then the same through SPARSECOLL_CUDA_SYNC=1
# (cuda_stream_order.py). Skipped (exit 77) without a CUDA device; run by
# test/gpu/gpu_checks.sh.
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python torch
if ! "$PYTHON" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
  echo "skipped: no CUDA device (torch.cuda.is_available() is False)"
  exit 77
fi
synced() { (export SPARSECOLL_CUDA_SYNC=1 && torchrun_like "$@"); }
check "CUDA tensors stream-ordered (default), 2 ranks" \
  torchrun_like 2 "$PYTHON" "$PYT/cuda_stream_order.py"
check "CUDA tensors through the synchronizing path (SPARSECOLL_CUDA_SYNC=1), 2 ranks" \
  synced 2 "$PYTHON" "$PYT/cuda_stream_order.py"
finish
