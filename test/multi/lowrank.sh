#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Low-rank compression (mr_lowrank: PowerSGD and ACP-SGD, every dtype, the
# ranks' bits identical, low-rank averages exact, full-rank results the
# projections the modes define, error feedback converging): host buffers over
# tcp on 1 to 8 ranks and over shm, device buffers (staged) through the
# stand-in.
. "$top_srcdir/test/multi/lib.sh"
run() { # run NAME N "VAR=VALUE ..." ARGS...
  name=$1 n=$2 vars=$3
  shift 3
  # shellcheck disable=SC2086 # the settings split into words on purpose
  check "$name" env $vars "$SC_RUN" -n "$n" --timeout 300 "$MR/mr_lowrank" "$@"
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
run "host shm n=4 (sample)" 4 "SC_TRANSPORT=shm" --quick
if device_runtime "$(cd "$top_builddir" && pwd)/test/devfake/.libs/libsc_devfake.so"; then
  run "device shm n=3 (sample)" 3 "SC_TRANSPORT=shm" --device --quick
else
  echo "SKIP: device rows (no device stand-in)"
fi
finish
