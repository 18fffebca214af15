#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The 1-bit compressed all-reduce (mr_onebit: SCALED against a simulation of
# every rank's worker and server steps over consecutive calls, error
# feedback's 1/t convergence, MAJORITY against the vote count, refused
# arguments): over tcp on 1, 2, 3, 5 and 8 ranks and over shm on 4; device
# buffers (staged through host memory) through the stand-in on 2 ranks.
. "$top_srcdir/test/multi/lib.sh"
# SC_TEST_SAMPLE=1 (the sanitizer runs): 2 and 5 ranks over tcp; the code
# path is the same whatever the rank count.
tcp_ranks="1 2 3 5 8"
[ "${SC_TEST_SAMPLE:-0}" = 1 ] && tcp_ranks="2 5"
# The multi-MiB size (ONEBIT_BIG=1) on tcp n=2, shm n=4 and the device row:
# each transport's many-chunk path once (on 3 ranks over tcp it took 44-106 s
# of a loaded make check and reached no other path).
for n in $tcp_ranks; do
  big=0
  [ "$n" = 2 ] && big=1
  check "tcp n=$n" env SC_TRANSPORT=tcp ONEBIT_BIG=$big "$SC_RUN" -n "$n" --timeout 300 \
    "$MR/mr_onebit"
done
check "shm n=4" env SC_TRANSPORT=shm ONEBIT_BIG=1 "$SC_RUN" -n 4 --timeout 300 "$MR/mr_onebit"
if device_runtime "$(cd "$top_builddir" && pwd)/test/devfake/.libs/libsc_devfake.so"; then
  check "device tcp n=2" env SC_TRANSPORT=tcp ONEBIT_BIG=1 "$SC_RUN" -n 2 --timeout 300 \
    "$MR/mr_onebit" --device
else
  echo "SKIP: device rows (no device stand-in)"
fi
finish
