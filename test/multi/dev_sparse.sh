#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The sparse calls and fusion on device buffers, through the device stand-in
# (test/devfake: device memory the host cannot touch, asynchronous streams;
# on a GPU with SC_TEST_DEVICE=cuda):
# sc_topk, sc_sparse_allreduce and sc_gtopk_allreduce (with and without error
# feedback) on 1..5 ranks (every dtype and size on 1-3, a sample on 4 and 5:
# the staging is the same code at any rank count), fusion with device tensors on 1..4 ranks, and
# fusion's compressed buckets (fp16, bf16, 1-bit, PowerSGD, ACP-SGD) with
# device tensors on 1, 2, 3 and 5 ranks, each against the same calls on host
# copies of the same data, bit for bit.
# Once more with a delay before every stream operation, so that a missing
# wait shows up as a wrong result instead of hiding behind a fast copy.
. "$top_srcdir/test/multi/lib.sh"
device_runtime "$top_builddir/test/devfake/.libs/libsc_devfake.so" || exit 77
for n in 1 2 3 4 5; do
  q=
  [ "$n" -ge 4 ] && q=--quick
  check "device sparse n=$n${q:+ (sample)}" "$SC_RUN" -n "$n" --timeout 300 --label "$MR/mr_dev_sparse" $q
done
check "device sparse n=3 SC_TRANSPORT=shm" env SC_TRANSPORT=shm "$SC_RUN" -n 3 --timeout 300 \
  --label "$MR/mr_dev_sparse"
for n in 1 2 3 4; do
  check "device fusion n=$n" env SC_TIMEOUT_MS=60000 "$SC_RUN" -n "$n" --timeout 300 --label \
    "$MR/mr_dev_fusion"
done
for n in 1 2 3 5; do
  check "device compressed fusion n=$n" env SC_TIMEOUT_MS=60000 "$SC_RUN" -n "$n" --timeout 300 \
    --label "$MR/mr_dev_fusion_compress"
done
check "device sparse n=2 slow streams" env SC_DEVFAKE_DELAY_US=200 "$SC_RUN" -n 2 --timeout 300 \
  --label "$MR/mr_dev_sparse" --quick
check "device fusion n=2 slow streams" env SC_DEVFAKE_DELAY_US=200 SC_TIMEOUT_MS=60000 \
  "$SC_RUN" -n 2 --timeout 300 --label "$MR/mr_dev_fusion" --quick
check "device compressed fusion n=2 slow streams" env SC_DEVFAKE_DELAY_US=200 SC_TIMEOUT_MS=60000 \
  "$SC_RUN" -n 2 --timeout 300 --label "$MR/mr_dev_fusion_compress"
finish
