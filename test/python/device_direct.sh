#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The binding's device-pointer path (sparsecoll._staging.Direct) on the
# device stand-in: raw device allocations behind __cuda_array_interface__
# through every Comm call on 1..3 ranks (sc-run). Torch CUDA tensors cannot
# be made here (no GPU); cuda_staging.sh runs them where a GPU is.
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python numpy
SC_DEVRT_STANDIN="$abs_builddir/test/devfake/.libs/libsc_devfake.so"
if [ ! -f "$SC_DEVRT_STANDIN" ]; then
  echo "skipped: the device stand-in $SC_DEVRT_STANDIN is not built"
  exit 77
fi
export SC_DEVRT_STANDIN
for n in 1 2 3; do
  check "device pointers through Comm's dense calls, stand-in, n=$n" "$SC_RUN" -n "$n" \
    --timeout 120 --label "$PYTHON" "$PYT/device_direct.py"
done
# Every stream op of the stand-in delayed: a result read before the library
# waited for it would show.
check "device pointers through Comm's dense calls, slow stand-in streams, n=2" env \
  SC_DEVFAKE_DELAY_US=200 "$SC_RUN" -n 2 --timeout 200 --label "$PYTHON" "$PYT/device_direct.py"
for n in 2 3; do
  check "device pointers through gtopk_allreduce, stand-in, n=$n" "$SC_RUN" -n "$n" \
    --timeout 120 --label "$PYTHON" "$PYT/device_direct.py" --sparse
done
finish
