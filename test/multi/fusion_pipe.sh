#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# PowerSGD fusion buckets overlapped on the worker (mr_fusion_pipe), and
# ACP-SGD's, with error feedback, bit for bit against the same arithmetic one
# bucket at a time and a reference from the low-rank phases, on 1, 2, 3 and 5
# ranks over shared memory and 3 over TCP.
. "$top_srcdir/test/multi/lib.sh"
for n in 1 2 3 5; do
  check "fusion pipe n=$n" env SC_TIMEOUT_MS=60000 "$SC_RUN" -n "$n" --timeout 300 --label \
    "$MR/mr_fusion_pipe"
done
check "fusion pipe n=3 SC_TRANSPORT=tcp" env SC_TRANSPORT=tcp SC_TIMEOUT_MS=60000 "$SC_RUN" -n 3 \
  --timeout 300 --label "$MR/mr_fusion_pipe"
finish
