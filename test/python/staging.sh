#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The staging path CUDA tensors take while libsparsecoll has no device data
# path (sparsecoll._staging): its decisions on CPU tensors in one process, and
# Comm's collectives forced through it on 1..3 ranks (sc-run). Also the torch
# backend's stream-ordered path for CUDA tensors, driven on CPU tensors with
# torch.cuda faked (ordered_unit.py; the CUDA run is cuda_stream_order.sh).
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python torch
check "staging decisions: path, size classes, pool reuse and trimming, round trip" \
  "$PYTHON" "$PYT/staging_unit.py"
check "the backend's stream-ordered path on CPU tensors, torch.cuda faked" \
  "$PYTHON" "$PYT/ordered_unit.py"
for n in 1 2 3; do
  check "Comm staged (forced on CPU tensors) n=$n" "$SC_RUN" -n "$n" --timeout 120 --label \
    "$PYTHON" "$PYT/staging_comm.py"
done
finish
