#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sc_kfac_perf on small factors: both schemes (full factors, packed
# triangles to and from sc_place_factors' owners) checked against the exact
# sums (the tool exits 1 on a wrong entry), on 1, 2 and 3 ranks, with more
# ranks than factors and sizes 1, primes and one past the sampling limit
# (257^2 > 2^16), and ResNet-50's first stage; its JSON has both rows with wrong = 0; --help and a bad option.
. "$top_srcdir/test/multi/lib.sh"
P="$top_builddir/sc_kfac_perf"
for n in 1 2 3; do
  check "both schemes n=$n" "$SC_RUN" -n "$n" --timeout 60 "$P" --dims 5,1,17,64,257 -i 2
done
check "fewer factors than ranks, json" sh -c "'$SC_RUN' -n 3 --timeout 60 '$P' --dims 7,2 -i 1 \
  -J '$tmpdir/k.json' && [ \"\$(grep -c '\"wrong\": 0}' '$tmpdir/k.json')\" -eq 2 ]"
check "ResNet-50 stage 1 n=2" "$SC_RUN" -n 2 --timeout 60 "$P" --stages 1 -w 0 -i 1
check "help" "$P" --help
check "bad dims refused" sh -c "! '$P' --dims 3,x"
finish
