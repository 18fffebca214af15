#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Bucket fusion (every policy, dense; sparse when gTop-k is built) on 1, 2, 3
# and 4 ranks, over shared memory and (3 ranks) TCP, the round and ownership rules
# (mr_fusion_rules), P3 (mr_fusion_p3) and compression (mr_fusion_compress) on 1..4, and a tiny replay of each
# trace (every policy, P3 included; LAGS / OMGS / single gTop-k on BERT).
# Under a wrapper's transport (ucx-fusion.sh, verbs-fusion.sh, verbs_fake.sh
# with VERBS_FAKE_SUITES=all) the rows are what reaches that transport: the
# three programs on 2, 3 and 4 ranks (P3 on 3). One rank sends nothing, and the step
# slices and the replays are fusion's logic above the same messages, which the
# plain run checks over shm (they were 12 of ucx-fusion.sh's 30 s).
. "$top_srcdir/test/multi/lib.sh"
sizes="1 2 3 4"
[ -n "${SC_TRANSPORT:-}" ] && sizes="2 3 4"
for n in $sizes; do
  check "fusion n=$n" "$SC_RUN" -n "$n" --timeout 300 --label "$MR/mr_fusion"
done
# The rules: a wait only this rank could unblock must fail far below this timeout.
for n in $sizes; do
  check "fusion rules n=$n" env SC_TIMEOUT_MS=60000 "$SC_RUN" -n "$n" --timeout 300 --label \
    "$MR/mr_fusion_rules"
done
# P3: ranks ready in different orders and times; results against the plain average.
# Four ranks run below with several slices per step. Under a wrapper's
# transport, 3 ranks: the scheduler's agreement is fusion's own logic above
# the same all-reduces the other two programs post there (p3 on 2 and 4
# ranks took 33 of ucx-fusion.sh's 79 s). SC_TEST_SAMPLE=1: 1 and 2 ranks
# here; the step-slice rows below run 4 and 3 (and 3 over tcp).
p3_sizes="1 2 3"
[ -n "${SC_TRANSPORT:-}" ] && p3_sizes=3
[ "${SC_TEST_SAMPLE:-0}" = 1 ] && [ -z "${SC_TRANSPORT:-}" ] && p3_sizes="1 2"
for n in $p3_sizes; do
  check "fusion p3 n=$n" env SC_TIMEOUT_MS=60000 "$SC_RUN" -n "$n" --timeout 300 --label \
    "$MR/mr_fusion_p3"
done
# Compression (mr_fusion_compress: fp16, bf16, 1-bit, PowerSGD, ACP-SGD against
# the public calls bucket by bucket): the worker's routing, the same above
# every transport. AUTO's trial runs in the program's two plans with a
# calibrated model on more than one rank, and in no other: rank 0 logs it
# once for each.
compress() { # compress N
  env SC_TIMEOUT_MS=60000 SC_DEBUG=INFO "$SC_RUN" -n "$1" --timeout 300 --label \
    "$MR/mr_fusion_compress" >"$tmpdir/compress" 2>&1
  st=$?
  grep -v " SC INFO " "$tmpdir/compress" | tail -n 20
  want=2
  [ "$1" -eq 1 ] && want=0
  trials=$(grep -c "auto's trial" "$tmpdir/compress")
  echo "AUTO's trial logged $trials times, want $want"
  [ "$st" -eq 0 ] && [ "$trials" -eq "$want" ]
}
compress_sizes=$sizes
[ "${SC_TEST_SAMPLE:-0}" = 1 ] && compress_sizes=3
for n in $compress_sizes; do
  check "fusion compress n=$n" compress "$n"
done
# The rows above run over the default transport (shm here: one host) or the one
# a wrapper names (ucx-fusion.sh, verbs_fake.sh); the plain run adds the rest.
if [ -n "${SC_TRANSPORT:-}" ]; then
  finish
  exit
fi
# Several slices per agreement step (the rows above take one, the default):
# the cap, and a budget that differs by rank (every rank must use the MIN, or
# the slices pair up wrongly and the averages come out wrong or time out).
check "fusion p3 n=4 SC_P3_STEP_SLICES=64" env SC_P3_STEP_SLICES=64 SC_TIMEOUT_MS=60000 \
  "$SC_RUN" -n 4 --timeout 300 --label "$MR/mr_fusion_p3"
check "fusion p3 n=3 SC_P3_STEP_SLICES by rank" env SC_TIMEOUT_MS=60000 "$SC_RUN" -n 3 \
  --timeout 300 sh -c 'SC_P3_STEP_SLICES=$((SC_RANK * 5 + 2)) exec "$0"' "$MR/mr_fusion_p3"
# TCP beside the default transport.
check "fusion n=3 SC_TRANSPORT=tcp" env SC_TRANSPORT=tcp "$SC_RUN" -n 3 --timeout 300 --label \
  "$MR/mr_fusion"
check "fusion p3 n=3 SC_TRANSPORT=tcp" env SC_TRANSPORT=tcp SC_TIMEOUT_MS=60000 "$SC_RUN" -n 3 \
  --timeout 300 --label "$MR/mr_fusion_p3"
for t in resnet50 vgg16 bert_base; do
  check "replay $t n=2 (smoke)" "$SC_RUN" -n 2 --timeout 200 "$top_builddir/sc_fusion_replay" \
    --trace "$top_srcdir/perf/traces/$t.trace" --scale 0.01 --iter-ms 20 -i 1 -w 0 \
    --alpha 50 --beta 0.001 -J "$tmpdir/$t.json"
done
check "replay resnet50 n=3 --interleave --contiguous (smoke)" "$SC_RUN" -n 3 --timeout 200 \
  "$top_builddir/sc_fusion_replay" --trace "$top_srcdir/perf/traces/resnet50.trace" --scale 0.01 \
  --iter-ms 20 -i 2 -w 0 --interleave --contiguous --alpha 50 --beta 0.001 -J "$tmpdir/il.json"
check "replay bert_base n=3 lags,omgs,gtopk (smoke)" "$SC_RUN" -n 3 --timeout 200 \
  "$top_builddir/sc_fusion_replay" --trace "$top_srcdir/perf/traces/bert_base.trace" --scale 0.01 \
  --iter-ms 20 -i 1 -w 0 --density 0.01 -p lags,omgs,gtopk --alpha 50 --beta 0.001 \
  -J "$tmpdir/sparse.json"
finish
