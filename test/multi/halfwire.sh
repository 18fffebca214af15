#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sc_allreduce_compressed (mr_halfwire: float32 buffers, fp16 and bf16 on the
# wire, every op, against the exact reference within the documented rounding
# bound, the same bits on every rank): host buffers over tcp on 1 to 8 ranks
# and over shm, device buffers through the stand-in (staged through the host).
. "$top_srcdir/test/multi/lib.sh"
run() { # run NAME N "VAR=VALUE ..." ARGS...
  name=$1 n=$2 vars=$3
  shift 3
  # shellcheck disable=SC2086 # the settings split into words on purpose
  check "$name" env $vars "$SC_RUN" -n "$n" --timeout 300 "$MR/mr_halfwire" "$@"
}
# SC_TEST_SAMPLE=1 (the sanitizer runs): 2 and 5 ranks over tcp; the code
# path is the same whatever the rank count.
tcp_ranks="1 2 3 5 8"
[ "${SC_TEST_SAMPLE:-0}" = 1 ] && tcp_ranks="2 5"
for n in $tcp_ranks; do
  q=--quick
  [ "$n" -le 3 ] && q=
  run "host tcp n=$n${q:+ (sample)}" "$n" "SC_TRANSPORT=tcp" $q
done
run "host shm n=4" 4 "SC_TRANSPORT=shm"
if device_runtime "$(cd "$top_builddir" && pwd)/test/devfake/.libs/libsc_devfake.so"; then
  run "device tcp n=3 (sample)" 3 "SC_TRANSPORT=tcp" --device --quick
else
  echo "SKIP: device rows (no device stand-in)"
fi
finish
