#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# CUDA tensors for real: Comm and the torch backend on 2 ranks sharing the
# GPU, through the staging path and through the default one (device pointers
# when the library has a device runtime). Skipped (exit 77) without a CUDA
# device.
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python torch
if ! "$PYTHON" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
  echo "skipped: no CUDA device (torch.cuda.is_available() is False)"
  exit 77
fi
staged() { (export SPARSECOLL_CUDA_DIRECT=0 && torchrun_like "$@"); }
check "CUDA tensors staged, Comm and the torch backend, 2 ranks" \
  staged 2 "$PYTHON" "$PYT/cuda_staging.py"
check "CUDA tensors, default path (direct with a device runtime), 2 ranks" \
  torchrun_like 2 "$PYTHON" "$PYT/cuda_staging.py"
finish
