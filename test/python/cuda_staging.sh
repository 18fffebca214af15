#!/bin/sh
# CUDA tensors through the staging path, for real: Comm and the torch backend
# on 2 ranks sharing the GPU. Skipped (exit 77) without a CUDA device.
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python torch
if ! "$PYTHON" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
  echo "skipped: no CUDA device (torch.cuda.is_available() is False)"
  exit 77
fi
check "CUDA tensors, Comm and the torch backend, 2 ranks" \
  torchrun_like 2 "$PYTHON" "$PYT/cuda_staging.py"
finish
